package table

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestBatchRowsAndPositionTogether: rows of two tables and a position
// committed in one Batch are all there after a reopen.
func TestBatchRowsAndPositionTogether(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	main, err := s.Table(Config{Name: "events", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := s.Table(Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(main, []Row{{"ts": t0, "id": int64(1)}, {"ts": t0, "id": int64(2)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(dead, []Row{{"time": t0, "error": "bad"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(main, []Row{{"ts": t0}}); !errors.Is(err, ErrTableTwice) {
		t.Fatalf("second append to the same table: %v, want ErrTableTwice", err)
	}
	if err := b.SetPosition("events/kafka/t/0", binary.BigEndian.AppendUint64(nil, 42)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	main, _ = s.Table(Config{Name: "events", SortBy: "ts"})
	dead, _ = s.Table(Config{Name: "events_deadletter", SortBy: "time"})
	if got := collect(t, main, Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}); len(got) != 2 {
		t.Fatalf("events after reopen: %v", got)
	}
	if got := collect(t, dead, Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}); len(got) != 1 {
		t.Fatalf("dead letters after reopen: %v", got)
	}
	pos, err := s.Position("events/kafka/t/0")
	if err != nil || len(pos) != 8 || binary.BigEndian.Uint64(pos) != 42 {
		t.Fatalf("position after reopen: %v, %v", pos, err)
	}
	if pos, err := s.Position("events/kafka/t/1"); pos != nil || err != nil {
		t.Fatalf("unset position: %v, %v", pos, err)
	}
	names, err := s.Tables()
	if err != nil || !slices.Equal(names, []string{"events", "events_deadletter"}) {
		t.Fatalf("positions must not show as tables: %v, %v", names, err)
	}
}

// TestBatchCloseWithoutCommit: nothing staged is stored, a widened schema is
// restored, and the table's lock is released (a later Append works).
func TestBatchCloseWithoutCommit(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "events", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(tb, []Row{{"ts": t0, "new": "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPosition("p", []byte{1}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got := collect(t, tb, Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}); len(got) != 0 {
		t.Fatalf("rows of a closed batch: %v", got)
	}
	if pos, _ := s.Position("p"); pos != nil {
		t.Fatalf("position of a closed batch: %v", pos)
	}
	if sc := tb.Schema(); len(sc) != 1 {
		t.Fatalf("schema after a closed batch: %v", sc)
	}
	if err := tb.Append(ctx, []Row{{"ts": t0, "other": int64(1)}}); err != nil {
		t.Fatalf("append after a closed batch: %v", err)
	}
}

// TestBatchSchemaErrorStagesNothing: a row that does not fit a static schema
// is a *SchemaError naming it, and the rest of the Batch still commits.
func TestBatchSchemaErrorStagesNothing(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "events", SortBy: "ts", Columns: []Column{{Name: "ts", Type: Timestamp}, {Name: "n", Type: Int64}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Append(tb, []Row{{"ts": t0, "n": int64(1)}, {"ts": t0, "n": "not a number"}})
	var se *SchemaError
	if !errors.As(err, &se) || se.Row != 1 || se.Column != "n" {
		t.Fatalf("append of a bad row: %v, want a SchemaError for row 1 column n", err)
	}
	if err := b.Append(tb, []Row{{"ts": t0, "n": int64(2)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := collect(t, tb, Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)})
	if len(got) != 1 || got[0]["n"] != int64(2) {
		t.Fatalf("rows: %v", got)
	}
}
