package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/table"
)

// TestWriterTooWideMessageIsDeadLetter: a message whose row would widen the
// inferred schema past the table's column limit is a dead letter naming the
// limit, adds no column, and the other messages of the batch are stored
// with their position. Before, one 100k-field Kafka message widened the
// schema to 100k columns, which compaction could never write again.
func TestWriterTooWideMessageIsDeadLetter(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "events", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	tb.SetMaxColumns(10)
	dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWriter(Target{Store: s, Table: tb, DeadLetters: dl, Policy: ingest.Reject}, "ndjson", nil, kafkaFields, func(m *Message) string { return "m" + m.Topic })
	if err != nil {
		t.Fatal(err)
	}
	var wide strings.Builder
	wide.WriteString(`{"ts":"2026-01-01T00:00:00Z"`)
	for i := range 100 {
		fmt.Fprintf(&wide, `,"f%d":%d`, i, i)
	}
	wide.WriteString("}")
	msgs := []Message{
		{Topic: "0", Body: []byte(`{"ts":"2026-01-01T00:00:00Z","id":1}`)},
		{Topic: "1", Body: []byte(wide.String())},
		{Topic: "2", Body: []byte(`{"ts":"2026-01-01T00:00:01Z","id":2}`)},
	}
	res, err := w.Write(ctx, msgs, []Position{{Name: "p", Value: []byte{7}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 2 || res.DeadLetters != 1 {
		t.Fatalf("result %+v: want 2 accepted, 1 dead letter", res)
	}
	if n := len(tb.Schema()); n > 10 {
		t.Fatalf("the schema widened to %d columns", n)
	}
	var dead []table.Row
	if err := dl.Query(ctx, table.Query{}, func(r table.Row) error { dead = append(dead, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0]["origin"] != "m1" || !strings.Contains(dead[0]["error"].(string), "max_columns") {
		t.Fatalf("dead letters %v: want one from message 1 naming max_columns", dead)
	}
	if pos, _ := s.Position("p"); len(pos) != 1 || pos[0] != 7 {
		t.Fatalf("position %v", pos)
	}
}
