package coldtier_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// childDeletesEnv makes the crash test's child run delete, in its commit,
// the committed rows deleteWhere picks.
const childDeletesEnv = "SLUICE_COLDTIER_CHILD_DELETES"

// deletedN is which committed rows the tests delete: n ending in 3.
func deletedN(n int64) bool { return n%10 == 3 }

// deleteWhere names the rows of tbl's data files whose column n pick
// selects, reading each file through the table's file IO (so the child
// process finds them as the parent does).
func deleteWhere(pick func(int64) bool) func(ctx context.Context, tbl *itable.Table) ([]coldtier.RowRef, error) {
	return func(ctx context.Context, tbl *itable.Table) ([]coldtier.RowRef, error) {
		if tbl.CurrentSnapshot() == nil {
			return nil, nil
		}
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return nil, err
		}
		fsys, err := tbl.FS(ctx)
		if err != nil {
			return nil, err
		}
		var refs []coldtier.RowRef
		for _, task := range tasks {
			f, err := fsys.Open(task.File.FilePath())
			if err != nil {
				return nil, err
			}
			ns, err := columnN(ctx, f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", task.File.FilePath(), err)
			}
			for pos, n := range ns {
				if pick(n) {
					refs = append(refs, coldtier.RowRef{File: task.File.FilePath(), Pos: int64(pos)})
				}
			}
		}
		return refs, nil
	}
}

// columnN reads column n of a data file, in the file's row order.
func columnN(ctx context.Context, r interface {
	ReadAt([]byte, int64) (int, error)
	Seek(int64, int) (int64, error)
	Read([]byte) (int, error)
}) ([]int64, error) {
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	idx := pf.MetaData().Schema.ColumnIndexByName("n")
	if idx < 0 {
		return nil, fmt.Errorf("no column n")
	}
	cr, err := fr.GetColumn(ctx, idx)
	if err != nil {
		return nil, err
	}
	groups := make([]int, pf.NumRowGroups())
	for i := range groups {
		groups[i] = i
	}
	col, err := fr.ReadColumn(groups, cr)
	if err != nil {
		return nil, err
	}
	defer col.Release()
	var ns []int64
	for _, chunk := range col.Chunks() {
		ns = append(ns, chunk.(*array.Int64).Int64Values()...)
	}
	return ns, nil
}

// wantAfterDeletes is the n of the rows 0..committed-1 not picked by
// deletedN, and the added ones.
func wantAfterDeletes(committed int, added []int64) []int64 {
	var want []int64
	for n := range int64(committed) {
		if !deletedN(n) {
			want = append(want, n)
		}
	}
	return append(want, added...)
}

// checkNs compares the n of rows read by a reader with want (each once).
func checkNs(t *testing.T, who string, rows []map[string]any, want []int64) {
	t.Helper()
	got := make([]int64, 0, len(rows))
	for _, r := range rows {
		got = append(got, int64(r["n"].(float64)))
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	w := append([]int64(nil), want...)
	sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Errorf("%s reads %d rows, want %d (first of each: %v / %v)", who, len(got), len(w), firstNs(got), firstNs(w))
	}
}

func firstNs(ns []int64) []int64 { return ns[:min(len(ns), 12)] }

// sluiceNs reads column n of both tiers through sluice's own query.
func sluiceNs(t *testing.T, c *coldtier.Compactor) []map[string]any {
	t.Helper()
	var rows []map[string]any
	err := c.QueryValues(context.Background(), table.Query{Columns: []string{"n"}}, true, func(_ []table.Column, vals []any) error {
		rows = append(rows, map[string]any{"n": float64(vals[0].(int64))})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestPositionDeletes commits 2000 rows, then a continuous run that adds
// 100 rows and deletes the committed rows whose n ends in 3 (200) in its
// commit: one snapshot carries both, and pyiceberg, DuckDB's iceberg_scan
// and sluice's own query read the 1900 rows left.
func TestPositionDeletes(t *testing.T) {
	t.Parallel() // its own directory, catalog and prefix in the bucket; its hook is its Compactor's
	dir := t.TempDir()
	cfg := testConfig(t, dir, "posdel")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fill(t, tb, 0, 2000, 3)
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := coldtier.Options{Remove: true, Continuous: true}
	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
		t.Fatal(err)
	}
	before := readIceberg(t, cfg, "events")

	fill(t, tb, 5000, 100, 3)
	coldtier.SetRunDeletes(c, deleteWhere(deletedN))
	stats, err := c.Compact(ctx, day0.Add(72*time.Hour), opts)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Rows != 100 || stats.Deleted != 200 {
		t.Errorf("the run committed %d rows and deleted %d, want 100 and 200", stats.Rows, stats.Deleted)
	}
	var added []int64
	for n := range int64(100) {
		added = append(added, 5000+n)
	}
	want := wantAfterDeletes(2000, added)
	v := readIceberg(t, cfg, "events")
	if len(v.Snapshots) != len(before.Snapshots)+1 {
		t.Errorf("%d snapshots after the run, want %d (one for the rows and the deletes)", len(v.Snapshots), len(before.Snapshots)+1)
	}
	if op := fmt.Sprint(v.Snapshots[len(v.Snapshots)-1]["operation"]); !strings.EqualFold(strings.TrimPrefix(op, "Operation."), "overwrite") {
		t.Errorf("the run's snapshot is an %v, want an overwrite (rows and deletes)", op)
	}
	checkNs(t, "pyiceberg", v.PyIceberg, want)
	if rows := icebergScan(t, cfg); rows != nil {
		checkNs(t, "DuckDB iceberg_scan", rows, want)
	}
	checkNs(t, "sluice", sluiceNs(t, c), want)
}

// TestPositionDeletesKill9 kills a run that adds rows and deletes older
// ones after its files (data and deletes) are uploaded and before its
// commit: neither is visible, and the next run commits both; killed after
// the commit: both are visible, and the restart adds nothing.
func TestPositionDeletesKill9(t *testing.T) {
	t.Parallel() // each step its own directory, catalog, prefix and child process
	for _, step := range []string{"after-upload", "after-commit"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := testConfig(t, dir, "posdel-crash-"+step)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			st, tb := openTable(t, dir, staticSchema)
			fill(t, tb, 0, 2000, 3)
			c, err := coldtier.Open(ctx, cfg, tb)
			if err != nil {
				t.Fatal(err)
			}
			opts := coldtier.Options{Remove: true, Continuous: true}
			if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
				t.Fatal(err)
			}
			c.Close()
			fill(t, tb, 5000, 100, 3)
			st.Close()

			killAt(t, dir, cfg, step, childContinuousEnv+"=1", childDeletesEnv+"=1")

			var added []int64
			for n := range int64(100) {
				added = append(added, 5000+n)
			}
			all := make([]int64, 0, 2000)
			for n := range int64(2000) {
				all = append(all, n)
			}
			after := wantAfterDeletes(2000, added)
			v := readIceberg(t, cfg, "events")
			switch step {
			case "after-upload":
				checkNs(t, "pyiceberg after a kill before the commit", v.PyIceberg, all)
			case "after-commit":
				checkNs(t, "pyiceberg after a kill after the commit", v.PyIceberg, after)
			}

			st, tb = openTable(t, dir, staticSchema)
			defer st.Close()
			c, err = coldtier.Open(ctx, cfg, tb) // the restart: recovery runs here
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if step == "after-upload" {
				coldtier.SetRunDeletes(c, deleteWhere(deletedN))
			}
			stats, err := c.Compact(ctx, day0.Add(72*time.Hour), opts)
			if err != nil {
				t.Fatal(err)
			}
			wantRows := map[string]int64{"after-upload": 100, "after-commit": 0}[step]
			if stats.Rows != wantRows {
				t.Errorf("the run after the restart committed %d rows, want %d", stats.Rows, wantRows)
			}
			v = readIceberg(t, cfg, "events")
			checkNs(t, "pyiceberg after the restart", v.PyIceberg, after)
			checkNs(t, "sluice after the restart", sluiceNs(t, c), after)
		})
	}
}

// TestPositionDeletesMaintain runs maintenance on a table whose small
// files carry position deletes: the merge rewrites each day's files
// without the deleted rows and the replace snapshot drops the delete
// files, so pyiceberg, DuckDB's iceberg_scan and sluice read the same rows
// before and after, and the key index rebuilt on the new files finds them.
func TestPositionDeletesMaintain(t *testing.T) {
	t.Parallel() // its own directory, catalog and prefix in the bucket; its hook is its Compactor's
	dir := t.TempDir()
	cfg := testConfig(t, dir, "posdel-maintain")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fill(t, tb, 0, 2000, 3)
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := coldtier.Options{Remove: true, Continuous: true}
	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
		t.Fatal(err)
	}
	fill(t, tb, 5000, 100, 3)
	coldtier.SetRunDeletes(c, deleteWhere(deletedN))
	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
		t.Fatal(err)
	}
	var added []int64
	for n := range int64(100) {
		added = append(added, 5000+n)
	}
	want := wantAfterDeletes(2000, added)
	data, deletes, err := coldtier.FileCounts(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if data != 6 || deletes != 3 {
		t.Fatalf("before maintenance: %d data files and %d delete files, want 6 and 3", data, deletes)
	}
	readAll := func(when string) {
		t.Helper()
		checkNs(t, "pyiceberg "+when, readIceberg(t, cfg, "events").PyIceberg, want)
		if rows := icebergScan(t, cfg); rows != nil {
			checkNs(t, "DuckDB iceberg_scan "+when, rows, want)
		}
		checkNs(t, "sluice "+when, sluiceNs(t, c), want)
	}
	readAll("before maintenance")
	if _, err := coldtier.OpenKeyIndex(ctx, c, []string{"n"}); err != nil { // saved before the rewrite
		t.Fatal(err)
	}

	merged := c.MaintainCounters().GroupsMerged
	if _, err := c.Maintain(ctx, coldtier.MaintainOptions{NoExpire: true}); err != nil {
		t.Fatal(err)
	}
	if got := c.MaintainCounters().GroupsMerged - merged; got != 3 {
		t.Errorf("%d day groups merged, want 3 (the merge applies position deletes)", got)
	}
	if data, deletes, err = coldtier.FileCounts(ctx, c); err != nil {
		t.Fatal(err)
	}
	if data != 3 || deletes != 0 {
		t.Errorf("after maintenance: %d data files and %d delete files, want 3 and none", data, deletes)
	}
	readAll("after maintenance")
	ix, err := coldtier.OpenKeyIndex(ctx, c, []string{"n"})
	if err != nil {
		t.Fatal(err)
	}
	if ix.Rebuilt {
		t.Errorf("the key index was rebuilt after maintenance, want it brought up to date from the rewrite's snapshots")
	}
	if len(ix.Rows) != len(want) || len(ix.Stale) != 0 {
		t.Errorf("the key index after maintenance holds %d keys (%d stale), want %d", len(ix.Rows), len(ix.Stale), len(want))
	}
	for _, n := range want[:50] {
		key, _ := coldtier.EncodeKey(n)
		ref, ok := ix.Rows[key]
		if !ok {
			t.Fatalf("key %d not in the index after maintenance", n)
		}
		if ns := readFileNs(t, ref.File); ns[ref.Pos] != n {
			t.Fatalf("key %d at %s row %d, which holds %d", n, ref.File, ref.Pos, ns[ref.Pos])
		}
	}
}

// TestPositionDeletesMaintainKeepsSharedDeleteFile: a day's delete file
// names rows of a large file the rewrite leaves alone and of a small file
// it rewrites; the replace commit must keep that delete file (dropping it
// would bring the large file's deleted rows back).
func TestPositionDeletesMaintainKeepsSharedDeleteFile(t *testing.T) {
	t.Parallel() // its own directory, catalog and prefix in the bucket; its hook is its Compactor's
	dir := t.TempDir()
	cfg := testConfig(t, dir, "posdel-shared")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := coldtier.Options{Remove: true, Continuous: true}
	run := func(first, n int) {
		t.Helper()
		fill(t, tb, first, n, 1) // all on day0: one partition
		if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
			t.Fatal(err)
		}
	}
	run(0, 3000)  // the large file
	run(10000, 5) // a small one
	coldtier.SetRunDeletes(c, deleteWhere(func(n int64) bool { return n%10 == 3 && n < 3000 || n == 10003 }))
	run(20000, 5) // another small one, with the delete file naming rows of the first two
	coldtier.SetRunDeletes(c, nil)
	var want []int64
	for n := range int64(3000) {
		if n%10 != 3 {
			want = append(want, n)
		}
	}
	want = append(want, 10000, 10001, 10002, 10004, 20000, 20001, 20002, 20003, 20004)
	checkNs(t, "sluice before maintenance", sluiceNs(t, c), want)
	merged := c.MaintainCounters().GroupsMerged
	// Files under 12 KiB are small, those over 28.8 KiB never rewritten:
	// the two small files are a group, the large one stays.
	ms, err := c.Maintain(ctx, coldtier.MaintainOptions{NoExpire: true, TargetFileBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MaintainCounters().GroupsMerged - merged; got != 1 || ms.FilesRewritten != 2 {
		t.Fatalf("maintenance merged %d groups of %d files, want the two small files", got, ms.FilesRewritten)
	}
	data, deletes, err := coldtier.FileCounts(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if data != 2 || deletes != 1 {
		t.Errorf("after maintenance: %d data files and %d delete files, want 2 and the shared delete file", data, deletes)
	}
	checkNs(t, "pyiceberg after maintenance", readIceberg(t, cfg, "events").PyIceberg, want)
	checkNs(t, "sluice after maintenance", sluiceNs(t, c), want)
}

// TestPositionDeletesTargetsRewrittenMeanwhile: while a keyed run's files
// and deletes are staged, another node's maintenance rewrites the files
// whose rows the run deletes. The run's positions no longer name those
// rows: it must not commit them, but write itself again with its deletes
// found in the rewritten files, and the table ends with the right rows.
func TestPositionDeletesTargetsRewrittenMeanwhile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "posdel-rewritten")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := coldtier.Options{Remove: true, Continuous: true}
	for _, first := range []int{0, 1000} { // two small files a day
		fill(t, tb, first, 1000, 3)
		if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
			t.Fatal(err)
		}
	}
	// The other node: its own store and state dir, the same Iceberg table.
	otherDir := t.TempDir()
	otherCfg := cfg
	otherCfg.StateDir, otherCfg.Node = otherDir, "other-node"
	ost, otb := openTable(t, otherDir, staticSchema)
	defer ost.Close()
	other, err := coldtier.Open(ctx, otherCfg, otb)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	fill(t, tb, 5000, 100, 3)
	asked := 0
	find := deleteWhere(deletedN)
	coldtier.SetRunDeletes(c, func(ctx context.Context, tbl *itable.Table) ([]coldtier.RowRef, error) {
		asked++
		return find(ctx, tbl)
	})
	rewritten := 0
	defer coldtier.SetRunStaged(func() {
		if rewritten > 0 {
			return
		}
		ms, err := other.Maintain(ctx, coldtier.MaintainOptions{NoExpire: true})
		if err != nil {
			t.Errorf("the other node's maintenance: %v", err)
		}
		rewritten = ms.FilesRewritten
	})()
	stats, err := c.Compact(ctx, day0.Add(72*time.Hour), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rewritten != 6 {
		t.Fatalf("the other node rewrote %d files, want the 6 small ones", rewritten)
	}
	if asked != 2 || stats.Rows != 100 || stats.Deleted != 200 {
		t.Errorf("the run asked for its deletes %d times and committed %d rows, %d deletes; want twice (once after the rewrite), 100, 200", asked, stats.Rows, stats.Deleted)
	}
	var added []int64
	for n := range int64(100) {
		added = append(added, 5000+n)
	}
	want := wantAfterDeletes(2000, added)
	checkNs(t, "pyiceberg", readIceberg(t, cfg, "events").PyIceberg, want)
	checkNs(t, "sluice", sluiceNs(t, c), want)
}
