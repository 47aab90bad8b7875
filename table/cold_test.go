package table

import (
	"context"
	"testing"
	"time"
)

// TestCompactionBounds: BlockRange fixes the blocks before a cut (the first
// bucket, the highest sequence), QueryValuesBelow reads only those, and
// DeleteBlocks deletes only those: a block written afterwards with an
// event time before the cut (a late row) is neither read nor deleted.
func TestCompactionBounds(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "t", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app := func(k string, ts time.Time, n int64) {
		t.Helper()
		if err := tb.Append(ctx, []Row{{"k": k, "ts": ts, "n": n}}); err != nil {
			t.Fatal(err)
		}
	}
	// The store's first block has sequence 0: the bound must still cover it.
	app("a", t0.Add(90*time.Minute), 1)
	app("b", t0.Add(3*time.Hour), 2)
	app("a", t0.Add(30*time.Hour), 3) // after the cut
	cut := t0.Add(24 * time.Hour)
	first, high, blocks, err := tb.BlockRange(ctx, cut)
	if err != nil {
		t.Fatal(err)
	}
	if blocks != 2 || !first.Equal(t0.Add(time.Hour)) {
		t.Fatalf("BlockRange = %v, %d, %d blocks; want the bucket at t0+1h and 2 blocks", first, high, blocks)
	}
	app("c", t0.Add(2*time.Hour), 4) // late: before the cut, written after BlockRange

	var read []int64
	err = tb.QueryValuesBelow(ctx, Query{To: cut, Columns: []string{"n"}}, high+1, func(_ []Column, vals []any) error {
		read = append(read, vals[0].(int64))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 2 || read[0]+read[1] != 3 {
		t.Fatalf("read %v, want rows 1 and 2 only", read)
	}
	deleted, err := tb.DeleteBlocks(ctx, cut, high)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 2 {
		t.Fatalf("deleted %d blocks, want 2", deleted)
	}
	var left []int64
	for _, r := range collect(t, tb, Query{}) {
		left = append(left, r["n"].(int64))
	}
	if len(left) != 2 || left[0]+left[1] != 7 {
		t.Fatalf("left %v, want the late row 4 and row 3", left)
	}
	// Again: idempotent.
	if deleted, err := tb.DeleteBlocks(ctx, cut, high); err != nil || deleted != 0 {
		t.Fatalf("second DeleteBlocks: %d, %v", deleted, err)
	}
}
