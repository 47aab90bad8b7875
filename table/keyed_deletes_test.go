package table

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

// keysOf lists what f walks (DeletedKeys, ChangedKeys) as "id/n" texts,
// sorted.
func keysOf(t *testing.T, f func(fn func(key []any) error) error) []string {
	t.Helper()
	var out []string
	err := f(func(key []any) error {
		if len(key) != 2 {
			return fmt.Errorf("key %v: want 2 values", key)
		}
		if _, ok := key[0].(string); !ok {
			return fmt.Errorf("key %v: id is a %T, want a string", key, key[0])
		}
		if _, ok := key[1].(int64); !ok {
			return fmt.Errorf("key %v: n is a %T, want an int64", key, key[1])
		}
		out = append(out, fmt.Sprintf("%s/%d", key[0], key[1]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestKeyedDeleteLog: a keyed table that keeps its delete log records each
// applied delete (not a replayed one, nor one of a key the same append
// writes again) under its append's sequence, with
// the key's typed values; DeletedKeys reads a sequence range, a View sees
// the records and rows of its moment only, ChangedKeys names the keys of
// live rows and deletes from a sequence on, and ClearDeletesBelow drops
// the records below a mark. The records survive a reopen.
func TestKeyedDeleteLog(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	cfg := Config{Name: "state", HashBy: "dev", SortBy: "ts", PrimaryKey: []string{"id", "n"}}
	tb := keyedTable(t, s, cfg)
	row := func(id string, v int64) Row {
		return Row{"id": id, "n": int64(len(id)), "dev": "d" + id, "v": v, "ts": t0.Add(time.Duration(v) * time.Minute)}
	}
	drop := func(id string) Row { return Row{"id": id, "n": int64(len(id)), OperationColumn: OperationDelete} }
	deleted := func(from, limit uint64) []string {
		return keysOf(t, func(fn func([]any) error) error {
			return tb.DeletedKeys(ctx, from, limit, func(key []any, _ Position) error { return fn(key) })
		})
	}
	limit := func() uint64 {
		_, _, l, _, err := tb.SeqRange(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	appendRows(t, tb, row("x", 1), drop("x"))
	if got := deleted(0, 0); len(got) != 0 {
		t.Errorf("without KeepDeleteLog the deletes are recorded: %v", got)
	}
	tb.KeepDeleteLog()
	appendRows(t, tb, row("a", 1), row("bb", 1), row("ccc", 1))
	appendRows(t, tb, drop("a"))
	// Deleted and written again in one append: the key's row is its
	// change, and no record may follow it.
	appendRows(t, tb, row("ee", 3), drop("ee"), row("ee", 4))
	first := limit()
	view, err := tb.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	appendRows(t, tb, drop("bb"), row("dddd", 2))
	// A replayed delete is not recorded again.
	appendRows(t, tb, at(drop("ccc"), "kafka/t/0", 5))
	appendRows(t, tb, at(drop("ccc"), "kafka/t/0", 5))

	if got, want := deleted(0, 0), []string{"a/1", "bb/2", "ccc/3"}; !slices.Equal(got, want) {
		t.Errorf("every delete: %v, want %v", got, want)
	}
	if got, want := deleted(0, first), []string{"a/1"}; !slices.Equal(got, want) {
		t.Errorf("the deletes below %d: %v, want %v", first, got, want)
	}
	if got, want := deleted(first, 0), []string{"bb/2", "ccc/3"}; !slices.Equal(got, want) {
		t.Errorf("the deletes from %d: %v, want %v", first, got, want)
	}
	n := 0
	if err := tb.DeletedKeys(ctx, 0, 0, func([]any, Position) error { n++; return nil }); err != nil || n != 3 {
		t.Errorf("%d records (%v), want 3: one per key an append left deleted", n, err)
	}

	// The view: the moment after a's delete.
	changed := func(v *View, from uint64) []string {
		return keysOf(t, func(fn func([]any) error) error {
			return v.ChangedKeys(ctx, from, func(ch KeyChange) error { return fn(ch.Key) })
		})
	}
	if got, want := changed(view, 0), []string{"a/1", "bb/2", "ccc/3", "ee/2"}; !slices.Equal(got, want) {
		t.Errorf("the view's changed keys: %v, want %v (bb, ccc and ee live, a deleted)", got, want)
	}
	var ids []string
	if err := view.QueryValuesSeqs(ctx, Query{Columns: []string{"id"}}, 0, 0, func(_ []Column, vals []any) error {
		ids = append(ids, vals[0].(string))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if want := []string{"bb", "ccc", "ee"}; !slices.Equal(ids, want) {
		t.Errorf("the view's rows: %v, want %v (the store as it was)", ids, want)
	}
	now, err := tb.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer now.Close()
	if got, want := changed(now, first), []string{"bb/2", "ccc/3", "dddd/4"}; !slices.Equal(got, want) {
		t.Errorf("the keys changed from %d: %v, want %v", first, got, want)
	}

	if err := tb.ClearDeletesBelow(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got, want := deleted(0, 0), []string{"bb/2", "ccc/3"}; !slices.Equal(got, want) {
		t.Errorf("after ClearDeletesBelow(%d): %v, want %v", first, got, want)
	}
	dir := s.dir
	view.Close()
	now.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	tb = keyedTable(t, s, cfg)
	if got, want := deleted(0, 0), []string{"bb/2", "ccc/3"}; !slices.Equal(got, want) {
		t.Errorf("after a reopen: %v, want %v", got, want)
	}
}

// countMarks is the number of dead-row marks the table's store holds.
func countMarks(t *testing.T, tb *Table) int {
	t.Helper()
	lo, hi := deadBounds(tb.id)
	it, err := tb.store.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	return n
}

// TestKeyedMarksOfDeletedBlocks: after DeleteBlocks removed committed
// blocks, an update of a key whose row was in one marks that row dead
// again (the key index still points there); DeleteMarksBefore deletes
// those marks and leaves the marks of blocks still stored.
func TestKeyedMarksOfDeletedBlocks(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	appendRows(t, tb, up("a", 1), up("b", 1), up("c", 1))
	_, _, limit, _, err := tb.SeqRange(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut := t0.Add(24 * time.Hour)
	if _, err := tb.DeleteBlocks(ctx, cut, limit-1); err != nil {
		t.Fatal(err)
	}
	appendRows(t, tb, up("a", 2), up("b", 2)) // mark the rows of the deleted block
	appendRows(t, tb, up("a", 3))             // and a row of a block still stored
	// a, b and c are in partitions (dev) of their own.
	if n := countMarks(t, tb); n != 3 {
		t.Fatalf("%d marks, want 3: of the deleted blocks of a and b, of a's stored block", n)
	}
	deleted, err := tb.DeleteMarksBefore(ctx, cut, limit-1)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 2 || countMarks(t, tb) != 1 {
		t.Errorf("deleted %d marks, %d left; want 2 and the stored block's 1", deleted, countMarks(t, tb))
	}
	wantState(t, tb, map[string]int64{"a": 3, "b": 2})
}

// TestKeyedDeleteLogPositions: a delete record carries the position the
// delete leaves in the key index (its own; for a delete without one, the
// position it keeps), a record without one reads as none, and a record
// written before records had positions (the key values alone) still
// reads. ChangedKeys gives a row's own source position and a delete's
// record's, and says which is a delete.
func TestKeyedDeleteLogPositions(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	tb.KeepDeleteLog()
	appendRows(t, tb, at(up("a", 1), "kafka/t/0", 5), at(up("b", 1), "kafka/t/0", 6), up("c", 1), up("e", 1))
	appendRows(t, tb, at(del("a"), "kafka/t/0", 9), del("b"), del("c"))
	// A record as written before positions: the key values alone.
	_, _, limit, _, err := tb.SeqRange(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := []byte{byte(String)}
	old = append(old, 1, 'd')
	if err := s.db.Set(deleteLogKey(nil, tb.id, limit, []byte("\x01d")), old, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	appendRows(t, tb, at(up("e", 2), "kafka/t/1", 3))

	got := map[string]Position{}
	if err := tb.DeletedKeys(ctx, 0, 0, func(key []any, at Position) error {
		got[key[0].(string)] = at
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]Position{
		"a": {Partition: "kafka/t/0", Offset: 9}, // its own
		"b": {Partition: "kafka/t/0", Offset: 6}, // kept from b's upsert
		"c": {},                                  // none ever
		"d": {},                                  // an old record
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("delete of %s: position %+v (recorded %v), want %+v", k, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d deletes recorded, want %d: %v", len(got), len(want), got)
	}

	view, err := tb.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	changes := map[string]KeyChange{}
	if err := view.ChangedKeys(ctx, 0, func(ch KeyChange) error {
		ch.Key = slices.Clone(ch.Key)
		changes[ch.Key[0].(string)] = ch
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ch := changes["e"]; ch.Deleted || ch.At != (Position{Partition: "kafka/t/1", Offset: 3}) {
		t.Errorf("e's change: %+v, want its row at kafka/t/1 offset 3", ch)
	}
	if ch := changes["a"]; !ch.Deleted || ch.At != want["a"] {
		t.Errorf("a's change: %+v, want its delete at kafka/t/0 offset 9", ch)
	}
}
