package table

import (
	"context"
	"slices"
	"strconv"
	"strings"
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

// TestBlockRangeWaitsForReservedSequences: an append that reserved its
// sequence numbers but has not committed yet, while a later append has,
// must not fall below the high sequence BlockRange returns (the run would
// not read it, and DeleteBlocks would delete it unread). BlockRange waits
// for it instead.
func TestBlockRangeWaitsForReservedSequences(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "t", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	slow, err := tb.NewAppender()
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if err := slow.Add(ctx, []Row{{"k": "a", "ts": t0.Add(time.Hour), "n": int64(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := slow.flush(context.Background()); err != nil { // its sequence is reserved now
		t.Fatal(err)
	}
	if err := tb.Append(ctx, []Row{{"k": "b", "ts": t0.Add(2 * time.Hour), "n": int64(2)}}); err != nil {
		t.Fatal(err)
	}
	cut := t0.Add(24 * time.Hour)

	// While slow is uncommitted, BlockRange must not return a bound that
	// covers its sequence without counting it: it may only wait.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, high, blocks, err := tb.BlockRange(short, cut)
	cancel()
	if first := slow.hold.first.Load() - 1; err == nil && high >= first {
		t.Fatalf("BlockRange returned high %d and %d blocks while sequence %d was reserved and uncommitted", high, blocks, first)
	}

	type result struct {
		high   uint64
		blocks int
		err    error
	}
	got := make(chan result, 1)
	go func() {
		_, high, blocks, err := tb.BlockRange(ctx, cut)
		got <- result{high, blocks, err}
	}()
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.blocks != 2 {
		t.Fatalf("BlockRange after the commit: %d blocks, high %d, %v; want both blocks", r.blocks, r.high, r.err)
	}

	// A discarded appender releases its reservation too.
	dropped, err := tb.NewAppender()
	if err != nil {
		t.Fatal(err)
	}
	if err := dropped.Add(ctx, []Row{{"k": "c", "ts": t0.Add(3 * time.Hour), "n": int64(3)}}); err != nil {
		t.Fatal(err)
	}
	if err := dropped.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	dropped.Close()
	if _, _, blocks, err := tb.BlockRange(ctx, cut); err != nil || blocks != 2 {
		t.Fatalf("BlockRange after a discarded appender: %d blocks, %v", blocks, err)
	}
}

// TestShrinkCache: while shrunk, reading every block leaves at most about
// keep bytes in the block cache; restored, the same read fills it again.
// Nested shrinks hold until the last restore.
func TestShrinkCache(t *testing.T) {
	s, err := Open(t.TempDir(), Options{CacheSize: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(Config{Name: "t", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// ~4 MB of poorly compressible blocks, flushed to sstables so that reads go
	// through the block cache.
	for i := range 40 {
		rows := make([]Row, 2000)
		for j := range rows {
			n := uint64(i*2000 + j)
			var v strings.Builder
			for _, m := range []uint64{0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD} {
				v.WriteString(strconv.FormatUint(n*m, 36))
			}
			rows[j] = Row{"k": "key-" + strconv.Itoa(j%50), "ts": t0.Add(time.Duration(n) * time.Second), "s": v.String()}
		}
		if err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	readAll := func() int64 {
		t.Helper()
		if err := tb.QueryValues(ctx, Query{}, func([]Column, []any) error { return nil }); err != nil {
			t.Fatal(err)
		}
		return s.db.Metrics().BlockCache.Size
	}
	const keep = 1 << 20
	restore := tb.ShrinkCache(keep)
	restore2 := tb.ShrinkCache(keep)
	restore()
	restore() // a second call does nothing
	shrunk := readAll()
	if shrunk > 2*keep {
		t.Fatalf("block cache holds %d bytes while shrunk to %d", shrunk, keep)
	}
	restore2()
	if size := readAll(); size < 3*keep {
		t.Fatalf("block cache holds %d bytes after restore, want the data read (several MB)", size)
	}
}

// TestSourceColumnsAndSequences: hidden source columns enter a static
// schema without being listed, stay in it across a reopen with the same
// config, and are returned only when named; SeqRange and QueryValuesSeqs
// select the blocks from a sequence mark on (a continuous cold tier's
// runs), CommittedSeq keeps the mark and WriterID the store's id across a
// reopen.
func TestSourceColumnsAndSequences(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Name: "t", HashBy: "k", SortBy: "ts", Columns: []Column{{Name: "k", Type: String}, {Name: "ts", Type: Timestamp}}}
	s := openStore(t, dir)
	tb, err := s.Table(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	row := func(k string, off int64) Row {
		return Row{"k": k, "ts": t0.Add(time.Duration(off) * time.Hour), SourceBatchColumn: "kafka/x/0/id@0-10", SourceOffsetColumn: off}
	}
	if err := tb.Append(ctx, []Row{row("a", 0), row("b", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, []Row{{"k": "a", "ts": t0, "other": 1}}); err == nil {
		t.Fatal("a column the static schema lacks was taken")
	}
	_, _, limit, blocks, err := tb.SeqRange(ctx, 0)
	if err != nil || blocks != 2 {
		t.Fatalf("SeqRange from 0: %d blocks, %v; want 2", blocks, err)
	}
	if err := tb.SetCommittedSeq(ctx, limit); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, []Row{row("c", 30)}); err != nil {
		t.Fatal(err)
	}
	// A late row (an event time before every other): SeqRange, which now
	// seeks to the earliest time written since the mark, finds it.
	late := row("d", 31)
	late["ts"] = t0.Add(-5 * time.Hour)
	if err := tb.Append(ctx, []Row{late}); err != nil {
		t.Fatal(err)
	}
	first, _, _, blocks, err := tb.SeqRange(ctx, limit)
	if err != nil || blocks != 2 || !first.Equal(t0.Add(-5*time.Hour)) {
		t.Fatalf("SeqRange from the mark (seeking): %d blocks from %v, %v; want 2 from t0-5h", blocks, first, err)
	}
	id, err := s.WriterID()
	if err != nil || len(id) != 12 {
		t.Fatalf("WriterID %q, %v", id, err)
	}
	s.Close()

	s = openStore(t, dir)
	defer s.Close()
	if tb, err = s.Table(cfg); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.WriterID(); again != id {
		t.Errorf("WriterID %q after a reopen, was %q", again, id)
	}
	if mark, err := tb.CommittedSeq(); err != nil || mark != limit {
		t.Fatalf("CommittedSeq %d, %v; want %d", mark, err, limit)
	}
	var names []string
	for _, c := range tb.Schema() {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "k,ts,"+SourceBatchColumn+","+SourceOffsetColumn {
		t.Fatalf("schema after a reopen: %s", got)
	}
	cols, _ := tb.Columns(Query{})
	if len(cols) != 2 {
		t.Errorf("a query naming no columns returns %v, want k and ts only", cols)
	}
	first, _, _, blocks, err = tb.SeqRange(ctx, limit)
	if err != nil || blocks != 2 || !first.Equal(t0.Add(-5*time.Hour)) {
		t.Fatalf("SeqRange from the mark (full scan): %d blocks from %v, %v; want the two appended after it", blocks, first, err)
	}
	var offs []string
	err = tb.QueryValuesSeqs(ctx, Query{Columns: []string{"k", SourceOffsetColumn}}, limit, 0, func(_ []Column, vals []any) error {
		offs = append(offs, vals[0].(string)+strconv.FormatInt(vals[1].(int64), 10))
		return nil
	})
	slices.Sort(offs)
	if err != nil || strings.Join(offs, ",") != "c30,d31" {
		t.Fatalf("rows from the mark on: %v, %v; want c30,d31", offs, err)
	}
}

// BenchmarkAppendSourceColumns: what the two hidden source columns a
// stream adds for a cold tier cost an append of 5000 five-field rows (one
// Kafka poll of one partition).
func BenchmarkAppendSourceColumns(b *testing.B) {
	for _, withSource := range []bool{false, true} {
		b.Run("source="+strconv.FormatBool(withSource), func(b *testing.B) {
			s := openStore(b, b.TempDir())
			defer s.Close()
			tb, err := s.Table(Config{Name: "t", HashBy: "user", SortBy: "ts"})
			if err != nil {
				b.Fatal(err)
			}
			rows := make([]Row, 5000)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				tag := "kafka/events/3/0f1e2d3c4b5a6978@" + strconv.Itoa(i*len(rows)) + "-" + strconv.Itoa((i+1)*len(rows))
				for r := range rows {
					id := int64(i*len(rows) + r)
					rows[r] = Row{"user": "u" + strconv.Itoa(r%10), "ts": t0.Add(time.Duration(id) * time.Millisecond),
						"id": id, "amount": float64(r) / 3, "note": "some text"}
					if withSource {
						rows[r][SourceBatchColumn] = tag
						rows[r][SourceOffsetColumn] = id
					}
				}
				if err := tb.Append(context.Background(), rows); err != nil {
					b.Fatal(err)
				}
			}
			st := tb.Stats()
			b.ReportMetric(float64(st.BytesWritten)/float64(st.RowsAppended), "bytes/row")
		})
	}
}
