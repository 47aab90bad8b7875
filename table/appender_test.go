package table

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// An Appender of several parts is one atomic append: a later part may widen a
// column an earlier part was encoded with (read back converted), queries
// do not wait for an open batch (collect runs between parts), and a
// failing part leaves nothing stored.
func TestAppenderPartsAreOneAtomicAppend(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "b", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tb.NewAppender()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, []Row{{"ts": t0, "k": "a", "v": int64(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, []Row{{"ts": t0, "k": "a", "v": 2.5, "w": "new"}}); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, tb, Query{}); len(got) != 0 {
		t.Fatalf("rows visible before Commit: %v", got)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	var vs []float64
	for _, r := range collect(t, tb, Query{}) {
		vs = append(vs, r["v"].(float64))
	}
	slices.Sort(vs)
	if !slices.Equal(vs, []float64{1, 2.5}) {
		t.Fatalf("v = %v, want [1 2.5] (the first part converted to the widened type)", vs)
	}

	b, err = tb.NewAppender()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, []Row{{"ts": t0, "k": "c", "x": int64(1)}}); err != nil {
		t.Fatal(err)
	}
	err = b.Add(ctx, []Row{{"ts": t0, "k": "c"}, {"ts": "never", "k": "c"}})
	var se *SchemaError
	if !errors.As(err, &se) || se.Row != 1 {
		t.Fatalf("bad part: %v, want a SchemaError on its row 1", err)
	}
	if err := b.Commit(ctx); err == nil {
		t.Fatal("Commit after a failed part succeeded")
	}
	b.Close()
	if got := collect(t, tb, Query{HashIn: []any{"c"}}); len(got) != 0 {
		t.Fatalf("abandoned batch stored %v", got)
	}
	// The table still takes appends (the schema lock was released).
	if err := tb.Append(ctx, []Row{{"ts": t0, "k": "d", "y": true}}); err != nil {
		t.Fatal(err)
	}
}
