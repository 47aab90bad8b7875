package table

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

// sparseTable is a keyed table without a hashBy: an append's rows of one
// time bucket are one block.
func sparseTable(t testing.TB, s *Store) *Table {
	t.Helper()
	return keyedTable(t, s, Config{Name: "sparse", SortBy: "ts", PrimaryKey: []string{"id"}})
}

// versions returns v for the keys from..to-1, all at one time (one block).
func versions(from, to int, v int64) []Row { return versionsAt(from, to, v, t0) }

func versionsAt(from, to int, v int64, ts time.Time) []Row {
	var rows []Row
	for i := from; i < to; i++ {
		rows = append(rows, Row{"id": fmt.Sprint(i), "v": v, "ts": ts})
	}
	return rows
}

// blockRows returns the row count of each of the table's blocks, in key
// order, and the number of its dead-row marks.
func blockRows(t testing.TB, tb *Table) (rows []int, marks int) {
	t.Helper()
	lo, hi := tableBounds(tb.id)
	it, err := tb.store.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	var dec blockDecoder
	for it.First(); it.Valid(); it.Next() {
		if err := dec.decode(it.Key(), it.Value(), func(string) bool { return false }); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, dec.rows)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	lo, hi = deadBounds(tb.id)
	it, err = tb.store.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		marks++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return rows, marks
}

func wantBlocks(t testing.TB, tb *Table, rows []int, marks int) {
	t.Helper()
	got, gotMarks := blockRows(t, tb)
	if !slices.Equal(got, rows) || gotMarks != marks {
		t.Fatalf("blocks of %v rows and %d marks, want %v and %d", got, gotMarks, rows, marks)
	}
}

// rewrite runs a pass that merges no block; rewriteBelow one that merges
// blocks below mergeBelow.
func rewrite(t testing.TB, tb *Table, want int) {
	t.Helper()
	rewriteBelow(t, tb, 0, want)
}

func rewriteBelow(t testing.TB, tb *Table, mergeBelow uint64, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := tb.RewriteSparseBlocks(ctx, mergeBelow)
	if err != nil || n != want {
		t.Fatalf("RewriteSparseBlocks = %d, %v; want %d blocks", n, err, want)
	}
}

func stateOf(keys int, vs ...func(i int) int64) map[string]int64 {
	want := map[string]int64{}
	for i := range keys {
		for _, v := range vs {
			if x := v(i); x != 0 {
				want[fmt.Sprint(i)] = x
			}
		}
	}
	return want
}

// TestKeyedRewriteSparseBlocks: a block whose rows an append made mostly
// dead is rewritten with its live rows (one block, same place in the key
// order, no mark), a wholly dead one deleted; queries and lookups see the
// same state, and the next appends (through the caches of entries and
// marks that the rewrite updated) supersede the moved rows exactly.
func TestKeyedRewriteSparseBlocks(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := sparseTable(t, s)
	rewrite(t, tb, 0) // the pass after the open reads every mark: none
	appendRows(t, tb, versions(0, 100, 1)...)
	appendRows(t, tb, versions(0, 70, 2)...) // 70 % dead: not sparse
	rewrite(t, tb, 0)
	wantBlocks(t, tb, []int{100, 70}, 1)
	appendRows(t, tb, versions(70, 80, 2)...) // 80 %: noted by the append
	wantBlocks(t, tb, []int{100, 70, 10}, 1)
	rewrite(t, tb, 1)
	wantBlocks(t, tb, []int{20, 70, 10}, 0)
	state2 := stateOf(100, func(i int) int64 { return 1 }, func(i int) int64 {
		if i < 80 {
			return 2
		}
		return 0
	})
	wantState(t, tb, state2)
	// The moved rows' keys, through the cached entries the rewrite
	// updated: one row each, the block's mark of 20 rows.
	appendRows(t, tb, versions(80, 95, 3)...)
	wantBlocks(t, tb, []int{20, 70, 10, 15}, 1)
	state3 := stateOf(100, func(i int) int64 { return state2[fmt.Sprint(i)] }, func(i int) int64 {
		if i >= 80 && i < 95 {
			return 3
		}
		return 0
	})
	wantState(t, tb, state3)
	// All dead: deleted with its mark.
	appendRows(t, tb, versions(95, 100, 3)...)
	rewrite(t, tb, 1)
	wantBlocks(t, tb, []int{70, 10, 15, 5}, 0)
	// Every key again: one row per key.
	appendRows(t, tb, versions(0, 100, 4)...)
	wantState(t, tb, stateOf(100, func(int) int64 { return 4 }))
	rewrite(t, tb, 4)
	wantBlocks(t, tb, []int{100}, 0)
}

// TestKeyedRewriteAfterOpen: the blocks made sparse before the store was
// closed are found again by the first pass after it is opened (the marks
// are read, nothing was noted), and a delete counts as a dead row.
func TestKeyedRewriteAfterOpen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	tb := sparseTable(t, s)
	appendRows(t, tb, versions(0, 100, 1)...)
	var dels []Row
	for i := range 90 {
		dels = append(dels, del(fmt.Sprint(i)))
	}
	appendRows(t, tb, dels...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	tb = sparseTable(t, s)
	wantBlocks(t, tb, []int{100}, 1)
	rewrite(t, tb, 1)
	wantBlocks(t, tb, []int{10}, 0)
	wantState(t, tb, stateOf(100, func(i int) int64 {
		if i >= 90 {
			return 1
		}
		return 0
	}))
	if _, ok, err := tb.Lookup(context.Background(), []any{"5"}); ok || err != nil {
		t.Fatalf("Lookup of a deleted key: %v, %v", ok, err)
	}
}

// TestKeyedRewriteMerges: the sparse blocks of one partition and time
// bucket are merged into one block (a query decodes fewer), those of
// another bucket are not merged with them; the index follows the rows.
func TestKeyedRewriteMerges(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := sparseTable(t, s)
	rewrite(t, tb, 0)
	later := t0.Add(5 * time.Hour) // another time bucket
	appendRows(t, tb, versions(0, 100, 1)...)
	appendRows(t, tb, versions(100, 200, 1)...)
	appendRows(t, tb, versionsAt(200, 300, 1, later)...)
	update := append(versionsAt(0, 80, 2, t0.Add(time.Minute)), versionsAt(100, 180, 2, t0.Add(time.Minute))...)
	appendRows(t, tb, append(update, versionsAt(200, 280, 2, later.Add(time.Minute))...)...)
	wantBlocks(t, tb, []int{100, 100, 160, 100, 80}, 3)
	rewriteBelow(t, tb, math.MaxUint64, 3)
	wantBlocks(t, tb, []int{40, 160, 20, 80}, 0)
	state := stateOf(300, func(int) int64 { return 1 }, func(i int) int64 {
		if i%100 < 80 {
			return 2
		}
		return 0
	})
	wantState(t, tb, state)
	appendRows(t, tb, append(versions(0, 200, 3), versionsAt(200, 300, 3, later)...)...)
	wantState(t, tb, stateOf(300, func(int) int64 { return 3 }))
	rewriteBelow(t, tb, math.MaxUint64, 4)
	wantBlocks(t, tb, []int{200, 100}, 0)
}

// TestKeyedRewriteKeepsCompactionCursor: a cold tier that moves blocks out
// by sequence (SeqRange, QueryValuesSeqs above its committed mark) reads,
// after a rewrite, the rows it had not moved out yet and none it had: the
// blocks below the mark are merged under a sequence below it, those above
// are rewritten in place under their own.
func TestKeyedRewriteKeepsCompactionCursor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := sparseTable(t, s)
	rewrite(t, tb, 0)
	appendRows(t, tb, versions(0, 50, 1)...)
	appendRows(t, tb, versions(50, 100, 1)...)
	_, _, mark, _, err := tb.SeqRange(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.SetCommittedSeq(ctx, mark); err != nil {
		t.Fatal(err)
	}
	// Below the mark two blocks 80 % dead; above it two of 40 rows 75 %
	// dead, and two of 30.
	appendRows(t, tb, versions(0, 40, 2)...)
	appendRows(t, tb, versions(50, 90, 2)...)
	appendRows(t, tb, versions(0, 30, 3)...)
	appendRows(t, tb, versions(50, 80, 3)...)
	seqRows := func(from, limit uint64) map[string]int64 {
		out := map[string]int64{}
		if err := tb.QueryValuesSeqs(ctx, Query{Columns: []string{"id", "v"}}, from, limit, func(_ []Column, vals []any) error {
			if _, ok := out[vals[0].(string)]; ok {
				return fmt.Errorf("key %v twice", vals[0])
			}
			out[vals[0].(string)] = vals[1].(int64)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	below, above := seqRows(0, mark), seqRows(mark, 0)
	if len(below) != 20 || len(above) != 80 {
		t.Fatalf("before the rewrite: %d rows below the mark and %d above, want 20 and 80", len(below), len(above))
	}
	mark, err = tb.CommittedSeq()
	if err != nil {
		t.Fatal(err)
	}
	rewriteBelow(t, tb, mark, 4)
	if got := seqRows(0, mark); !mapsEqual(got, below) {
		t.Errorf("below the mark after the rewrite: %v, want %v", got, below)
	}
	if got := seqRows(mark, 0); !mapsEqual(got, above) {
		t.Errorf("above the mark after the rewrite: %v, want %v", got, above)
	}
	_, _, _, blocks, err := tb.SeqRange(ctx, mark)
	if err != nil || blocks != 4 {
		t.Errorf("SeqRange above the mark: %d blocks, %v; want 4", blocks, err)
	}
	wantBlocks(t, tb, []int{20, 10, 10, 30, 30}, 0)
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// rewriteChildEnv, when set to a directory, makes the test binary a child
// that makes a sparse block in a keyed table there and rewrites it
// (FaultEnv kills it at the step under test).
const rewriteChildEnv = "SLUICE_TABLE_REWRITE_CHILD"

func rewriteChild(dir string) {
	s, err := Open(dir, Options{Now: func() time.Time { return t0.Add(100 * time.Hour) }})
	if err == nil {
		var tb *Table
		if tb, err = s.Table(Config{Name: "sparse", SortBy: "ts", PrimaryKey: []string{"id"}}); err == nil {
			ctx := context.Background()
			if err = tb.Append(ctx, versions(0, 100, 1)); err == nil {
				if err = tb.Append(ctx, versions(0, 80, 2)); err == nil {
					_, err = tb.RewriteSparseBlocks(ctx, 0)
				}
			}
		}
	}
	fmt.Fprintln(os.Stderr, "rewrite child: not killed:", err)
	os.Exit(3)
}

// TestKeyedRewriteKill9 kills a process (SIGKILL) just before and just
// after the commit of a block's rewrite: after reopening, either the old
// block with its mark or the rewritten block with the index pointing into
// it is there, the state is the same, the next pass finds what is left to
// rewrite, and the next update of every key leaves one row per key.
func TestKeyedRewriteKill9(t *testing.T) {
	state := stateOf(100, func(int) int64 { return 1 }, func(i int) int64 {
		if i < 80 {
			return 2
		}
		return 0
	})
	for _, c := range []struct {
		fault  string
		blocks []int
		marks  int
		left   int
	}{{"rewrite-before-commit:1", []int{100, 80}, 1, 1}, {"rewrite-after-commit:1", []int{20, 80}, 0, 0}} {
		t.Run(c.fault, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), rewriteChildEnv+"="+dir, FaultEnv+"="+c.fault)
			cmd.Stderr = os.Stderr
			err := cmd.Run()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die of SIGKILL at %s: %v", c.fault, err)
			}
			s := openStore(t, dir)
			defer s.Close()
			tb := sparseTable(t, s)
			wantBlocks(t, tb, c.blocks, c.marks)
			wantState(t, tb, state)
			rewrite(t, tb, c.left)
			wantBlocks(t, tb, []int{20, 80}, 0)
			wantState(t, tb, state)
			appendRows(t, tb, versions(0, 100, 3)...)
			wantState(t, tb, stateOf(100, func(int) int64 { return 3 }))
		})
	}
}

// TestKeyedRewriteExcludesAppends forces both orders of a rewrite and an
// append through hooks: an append waits while a rewrite holds the key lock
// (queries and lookups meanwhile see the blocks before it), and a rewrite
// waits while an append resolves its keys; the block the append made
// sparse is rewritten by the next pass.
func TestKeyedRewriteExcludesAppends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := sparseTable(t, s)
	rewrite(t, tb, 0)
	appendRows(t, tb, versions(0, 100, 1)...)
	appendRows(t, tb, versions(0, 80, 2)...)
	before := stateOf(100, func(int) int64 { return 1 }, func(i int) int64 {
		if i < 80 {
			return 2
		}
		return 0
	})
	var during error
	hooked := 0
	rewriteBuiltHook = func() {
		hooked++
		wantBlocks(t, tb, []int{100, 80}, 1) // not committed yet
		wantState(t, tb, before)
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer wcancel()
		during = tb.Append(wctx, versions(80, 100, 3))
	}
	defer func() { rewriteBuiltHook = nil }()
	rewrite(t, tb, 1)
	rewriteBuiltHook = nil
	if hooked != 1 || !errors.Is(during, context.DeadlineExceeded) {
		t.Fatalf("an append during a rewrite (%d hooks): %v, want it to wait (deadline exceeded)", hooked, during)
	}
	wantBlocks(t, tb, []int{20, 80}, 0)
	wantState(t, tb, before)

	var rewriting error
	appendRows(t, tb, versions(0, 70, 3)...) // the 80-row block: 87.5 % dead, noted
	keyedLoadedHook = func(*Table) {
		keyedLoadedHook = nil
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer wcancel()
		_, rewriting = tb.RewriteSparseBlocks(wctx, 0)
	}
	defer func() { keyedLoadedHook = nil }()
	appendRows(t, tb, versions(80, 90, 4)...)
	if !errors.Is(rewriting, context.DeadlineExceeded) {
		t.Fatalf("a rewrite during an append's resolution: %v, want it to wait (deadline exceeded)", rewriting)
	}
	rewrite(t, tb, 1) // the block noted before is noted still
	wantBlocks(t, tb, []int{20, 10, 70, 10}, 1)
	wantState(t, tb, stateOf(100, func(i int) int64 { return before[fmt.Sprint(i)] }, func(i int) int64 {
		switch {
		case i < 70:
			return 3
		case i >= 80 && i < 90:
			return 4
		}
		return 0
	}))
}
