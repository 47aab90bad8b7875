package stream

import (
	"bytes"
	"compress/gzip"
	"context"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/table"
)

// TestWriterJoinedDecodeSkip: NDJSON messages decoded as one input under
// on_bad_line skip keep their good lines, and each message with a bad line
// gets one dead letter naming its own line number and origin; metadata a
// static schema lacks reaches no stored row.
func TestWriterJoinedDecodeSkip(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", Columns: []table.Column{{Name: "ts", Type: table.Timestamp}, {Name: "id", Type: table.Int64}}})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	target := Target{Store: s, Table: tb, DeadLetters: dl, Policy: ingest.Skip,
		Schema: map[string]compute.Type{"ts": compute.Timestamp, "id": compute.Int64}}
	w, err := newWriter(target, "ndjson", []string{"key", "offset"}, kafkaFields, func(m *Message) string { return "m" + m.Topic })
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{
		{Topic: "0", Key: []byte("k"), Body: []byte(`{"ts":"2026-01-01T00:00:00Z","id":1}` + "\n" + `{"ts":"2026-01-01T00:00:00Z","id":2}`)},
		{Topic: "1", Body: []byte(`{"ts":"2026-01-01T00:00:00Z","id":3}` + "\n" + `{broken` + "\n" + `{"ts":"2026-01-01T00:00:00Z","id":4}` + "\n")},
		{Topic: "2", Body: []byte(`{"ts":"2026-01-01T00:00:00Z","id":5}`)},
	}
	res, err := w.Write(ctx, msgs, []Position{{Name: "p", Value: []byte{7}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 5 || res.BadLines != 1 || res.DeadLetters != 1 || res.Poison != 0 {
		t.Fatalf("result %+v: want 5 accepted, 1 bad line, 1 dead letter, no poison", res)
	}
	var ids []int64
	if err := tb.Query(ctx, table.Query{}, func(r table.Row) error {
		if _, ok := r["_key"]; ok {
			t.Errorf("row %v has _key, which the static schema lacks", r)
		}
		ids = append(ids, r["id"].(int64))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 5 {
		t.Fatalf("stored ids %v", ids)
	}
	var dead []table.Row
	if err := dl.Query(ctx, table.Query{}, func(r table.Row) error { dead = append(dead, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0]["origin"] != "m1" || !strings.HasPrefix(dead[0]["error"].(string), "1 bad lines skipped, the first: line 2:") {
		t.Fatalf("dead letters %v: want one from message 1 naming its line 2", dead)
	}
	if pos, _ := s.Position("p"); len(pos) != 1 || pos[0] != 7 {
		t.Fatalf("position %v", pos)
	}
}

// TestWriterFormats: json-array, CSV and gzip-compressed message bodies are
// decoded message by message; a message that does not decode is poison
// under on_bad_line reject and the others are stored.
func TestWriterFormats(t *testing.T) {
	ctx := context.Background()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`[{"ts":"2026-01-01T00:00:00Z","id":3}]`))
	zw.Close()
	for _, c := range []struct {
		format string
		bodies []string
		want   int
		poison int
	}{
		{"json", []string{`[{"ts":"2026-01-01T00:00:00Z","id":1},{"ts":"2026-01-01T00:00:00Z","id":2}]`, gz.String(), `[{"ts":`}, 3, 1},
		{"csv", []string{"ts,id\n2026-01-01T00:00:00Z,1\n2026-01-01T00:00:00Z,2\n", "ts,id\n2026-01-01T00:00:00Z,x\n"}, 2, 1},
	} {
		t.Run(c.format, func(t *testing.T) {
			s, err := table.Open(t.TempDir(), table.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", Columns: []table.Column{{Name: "ts", Type: table.Timestamp}, {Name: "id", Type: table.Int64}}})
			if err != nil {
				t.Fatal(err)
			}
			target := Target{Store: s, Table: tb, Policy: ingest.Reject, Schema: map[string]compute.Type{"ts": compute.Timestamp, "id": compute.Int64}}
			w, err := newWriter(target, c.format, nil, kafkaFields, func(m *Message) string { return "m" })
			if err != nil {
				t.Fatal(err)
			}
			var msgs []Message
			for _, b := range c.bodies {
				msgs = append(msgs, Message{Body: []byte(b)})
			}
			res, err := w.Write(ctx, msgs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Accepted != c.want || res.Poison != c.poison {
				t.Fatalf("result %+v: want %d accepted, %d poison", res, c.want, c.poison)
			}
		})
	}
}
