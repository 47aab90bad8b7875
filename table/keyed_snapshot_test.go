package table

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestDeleteKeysNotAt writes keys from a snapshot's position, from an
// older one, from another partition and without a position, in a table
// keyed by columns of four types, and deletes the keys not at the
// snapshot's position two keys at a time: only the snapshot's keys stay
// (every type's key found again from the index's text), a run cancelled
// between two appends is finished by the next run, and a run after that
// deletes nothing.
func TestDeleteKeysNotAt(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	// An inferred schema: a delete row whose key values were not of their
	// column's type would widen the column.
	tb := keyedTable(t, s, Config{Name: "snap", HashBy: "dev", SortBy: "ts", PrimaryKey: []string{"n", "f", "b", "when"}})
	row := func(i int, v int64) Row {
		return Row{"n": int64(i), "f": float64(i) + 0.25, "b": i%2 == 0, "when": t0.Add(time.Duration(i) * time.Nanosecond),
			"dev": "d", "ts": t0, "v": v}
	}
	// Keys 0-9 at generation 5 (the snapshot), 10-14 at generation 4, 15-17
	// from another partition, 18-19 without a position; key 20 deleted at
	// generation 3 (a tombstone).
	var rows []Row
	for i := range 10 {
		rows = append(rows, at(row(i, 5), "rdb", 5))
	}
	for i := 10; i < 15; i++ {
		rows = append(rows, at(row(i, 4), "rdb", 4))
	}
	for i := 15; i < 18; i++ {
		rows = append(rows, at(row(i, 1), "kafka/x/0", int64(i)))
	}
	rows = append(rows, row(18, 0), row(19, 0), at(row(20, 3), "rdb", 2))
	appendRows(t, tb, rows...)
	tomb := at(row(20, 3), "rdb", 3)
	tomb[OperationColumn] = OperationDelete
	appendRows(t, tb, tomb)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Cancelled before its second append: two keys deleted.
	stop, stopRun := context.WithCancel(ctx)
	staleKeysHook = func(_ *Table, deleted int64) {
		if deleted == 2 {
			stopRun()
		}
	}
	n, err := tb.DeleteKeysNotAt(stop, "rdb", 5, 2)
	staleKeysHook = nil
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Fatalf("cancelled run: %d deleted, %v; want 2 and context.Canceled", n, err)
	}
	if got := len(collect(t, tb, Query{})); got != 20-2 {
		t.Fatalf("after the cancelled run: %d keys, want 18", got)
	}
	n, err = tb.DeleteKeysNotAt(ctx, "rdb", 5, 2)
	if err != nil || n != 8 {
		t.Fatalf("second run: %d deleted, %v; want the 8 left", n, err)
	}
	got := map[string]bool{}
	for _, r := range collect(t, tb, Query{}) {
		k := fmt.Sprint(r["n"], r["f"], r["b"], r["when"])
		if got[k] {
			t.Fatalf("key %s twice", k)
		}
		got[k] = true
		if r["v"] != int64(5) {
			t.Errorf("key %s kept, from generation %v", k, r["v"])
		}
	}
	if len(got) != 10 {
		t.Fatalf("%d keys kept, want the snapshot's 10: %v", len(got), got)
	}
	for i := range 10 {
		r := row(i, 0)
		if _, ok, err := tb.Lookup(ctx, []any{r["n"], r["f"], r["b"], r["when"]}); !ok || err != nil {
			t.Errorf("key %d: Lookup %v %v", i, ok, err)
		}
	}
	types := map[string]Type{}
	for _, c := range tb.Schema() {
		types[c.Name] = c.Type
	}
	if types["n"] != Int64 || types["f"] != Float64 || types["b"] != Bool || types["when"] != Timestamp {
		t.Errorf("the key columns' types after the deletes: %v", types)
	}
	if n, err := tb.DeleteKeysNotAt(ctx, "rdb", 5, 2); err != nil || n != 0 {
		t.Fatalf("third run: %d deleted, %v; want none", n, err)
	}
	// The deletes left tombstones at the snapshot's position: a replay of
	// generation 4 does not bring a key back.
	appendRows(t, tb, at(row(12, 4), "rdb", 4))
	if got := len(collect(t, tb, Query{})); got != 10 {
		t.Fatalf("a replay of generation 4 after the deletes: %d keys, want 10", got)
	}
}

// TestDeleteKeysNotAtAppendOnly: a table without a primary key has no
// index to read.
func TestDeleteKeysNotAtAppendOnly(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "plain", HashBy: "dev", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.DeleteKeysNotAt(context.Background(), "rdb", 1, 0); err == nil {
		t.Fatal("an append-only table: no error")
	}
}
