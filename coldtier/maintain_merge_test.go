package coldtier_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// TestMaintainMergesByKey: a day of 15 small files (10 sorted by key as
// compaction runs write them; 4 of 2500 rows written in the store's hash
// order, each batch of 1000 sorted by iceberg-go on its own, so 3 sorted
// runs each, as an older rewrite's files; one with a column the others
// lack and some null users) is rewritten, through the merge's temporary
// files (fan-in 4), into one file sorted by (user, ts) across its row
// groups: every row group's user statistics lie after the previous one's,
// as in a file one run wrote, so a one-key read prunes the others. Every
// row is in it once, with its values (the added column null in the rows
// written before it). The old rewrite, each batch sorted on its own, fails
// the order checks.
func TestMaintainMergesByKey(t *testing.T) {
	dir := t.TempDir()
	const prefix = "maintain-merge"
	cfg := testConfig(t, dir, prefix)
	cfg.RowGroupRows = 1000
	defer coldtier.SetMergeFanIn(4)()
	ctx := context.Background()
	const runs, perRun = 10, 600
	const unsortedRuns, unsortedPerRun = 4, 2500
	func() {
		st, tb := openTable(t, dir, staticSchema)
		defer st.Close()
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		smallCommits(t, tb, c, 0, runs, perRun, 1) // creates the table with its sort order
		c.Close()
		unsorted := cfg
		unsorted.Unsorted = true
		if c, err = coldtier.Open(ctx, unsorted, tb); err != nil {
			t.Fatal(err)
		}
		smallCommits(t, tb, c, runs*perRun, unsortedRuns, unsortedPerRun, 1)
		c.Close()
	}()
	cols := append(append([]table.Column(nil), staticSchema...), table.Column{Name: "extra", Type: table.Int64})
	st, tb := openTable(t, dir, cols)
	defer st.Close()
	const extraFrom = runs*perRun + unsortedRuns*unsortedPerRun
	const files = runs + unsortedRuns + 1
	var rows []table.Row
	for k := extraFrom; k < extraFrom+perRun; k++ {
		r := table.Row{"user": fmt.Sprintf("u%d", k%7), "ts": day0.Add(time.Duration(k%3600) * time.Second),
			"n": int64(k), "extra": int64(-k)}
		if k%50 == 0 {
			r["user"] = nil // a null key sorts first
		}
		rows = append(rows, r)
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	const total = extraFrom + perRun
	want := rowSet([2]int{0, total})
	v := checkRowsOnce(t, "before the rewrite", cfg, c, want)
	if len(v.Files) != files {
		t.Fatalf("%d files before the rewrite, want %d", len(v.Files), files)
	}

	ms, err := c.Maintain(ctx, coldtier.MaintainOptions{NoExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("maintain: %+v", ms)
	if ms.FilesRewritten != files || ms.RowsRewritten != total || c.MaintainCounters().GroupsMerged != 1 {
		t.Errorf("rewrote %d files, %d rows, merged %d groups; want %d, %d, 1", ms.FilesRewritten, ms.RowsRewritten,
			c.MaintainCounters().GroupsMerged, files, total)
	}
	v = checkRowsOnce(t, "after the rewrite", cfg, c, want)
	if len(v.Files) != 1 {
		t.Fatalf("%d files after the rewrite, want 1: %v", len(v.Files), v.Files)
	}
	seen := map[int64]int{}
	for _, path := range dataOnDisk(t, prefix) {
		if slicesContains(v.Files, path, prefix) {
			checkMergedFile(t, path, seen, extraFrom)
		}
	}
	for n := range int64(total) {
		if seen[n] != 1 {
			t.Errorf("row n=%d is %d times in the rewritten file", n, seen[n])
		}
	}
}

// checkMergedFile reads a rewritten file with parquet-go and checks that
// its rows are sorted by (user, ts) across the whole file and that each row
// group's user statistics start at or after the previous one's end; it
// counts the rows' n in seen and checks column extra (null before
// extraFrom, -n from there on).
func checkMergedFile(t *testing.T, path string, seen map[int64]int, extraFrom int64) {
	t.Helper()
	osf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	fi, _ := osf.Stat()
	f, err := parquet.OpenFile(osf, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(name string) int {
		c, ok := f.Schema().Lookup(name)
		if !ok {
			t.Fatalf("%s has no column %s", path, name)
		}
		return c.ColumnIndex
	}
	user, ts, n, extra := leaf("user"), leaf("ts"), leaf("n"), leaf("extra")
	if len(f.RowGroups()) < 2 {
		t.Fatalf("%s has %d row groups, want several", path, len(f.RowGroups()))
	}
	var prevUser []byte
	var prevTS int64
	var prevHi parquet.Value
	var row int64
	for g, rg := range f.RowGroups() {
		lo, hi, ok := rg.ColumnChunks()[user].(*parquet.FileColumnChunk).Bounds()
		if !ok {
			t.Fatalf("row group %d has no user statistics", g)
		}
		if g > 0 && bytes.Compare(prevHi.ByteArray(), lo.ByteArray()) > 0 {
			t.Errorf("row group %d: users %s..%s start before the previous row group's last %s: key ranges overlap",
				g, lo.ByteArray(), hi.ByteArray(), prevHi.ByteArray())
		}
		prevHi = hi.Clone()
		rr := rg.Rows()
		buf := make([]parquet.Row, 256)
		for {
			k, err := rr.ReadRows(buf)
			for _, r := range buf[:k] {
				u, tv := r[user].ByteArray(), r[ts].Int64() // a null user is nil: first
				if c := bytes.Compare(prevUser, u); row > 0 && (c > 0 || c == 0 && prevTS > tv) {
					t.Fatalf("row %d (group %d): (%s, %d) after (%s, %d): not sorted by (user, ts)", row, g, u, tv, prevUser, prevTS)
				}
				prevUser, prevTS = append(prevUser[:0], u...), tv
				nv := r[n].Int64()
				seen[nv]++
				switch x := r[extra]; {
				case nv < extraFrom && !x.IsNull():
					t.Errorf("row n=%d: extra %v, want null (written before the column existed)", nv, x)
				case nv >= extraFrom && (x.IsNull() || x.Int64() != -nv):
					t.Errorf("row n=%d: extra %v, want %d", nv, x, -nv)
				}
				row++
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rr.Close()
	}
}
