package coldtier_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// maintainChildEnv makes the test binary a child that runs one Maintain
// (options in maintainOptsEnv, JSON) on the store and cold tier of the
// directory it names (config in childConfigEnv); the parent kills it at the
// coldtier.FaultEnv step.
const (
	maintainChildEnv = "SLUICE_COLDTIER_MAINTAIN_CHILD"
	maintainOptsEnv  = "SLUICE_COLDTIER_MAINTAIN_OPTS"
)

func runMaintainChild(dir string) int {
	var cfg coldtier.Config
	var opts coldtier.MaintainOptions
	if err := json.Unmarshal([]byte(os.Getenv(childConfigEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	if err := json.Unmarshal([]byte(os.Getenv(maintainOptsEnv)), &opts); err != nil {
		fmt.Fprintln(os.Stderr, "child options:", err)
		return 2
	}
	st, err := table.Open(dir+"/store", table.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts", Columns: staticSchema})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer c.Close()
	if _, err := c.Maintain(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintln(os.Stderr, "child: maintain done")
	return 0
}

// smallCommits appends rows n = first.. in runs of perRun rows spread over
// days days, compacting (with removal) after each: every run commits one
// small file per day and one snapshot, as 10 s commits do.
func smallCommits(t *testing.T, tb *table.Table, c *coldtier.Compactor, first, runs, perRun, days int) {
	t.Helper()
	for r := range runs {
		fill(t, tb, first+r*perRun, perRun, days)
		if _, err := c.Compact(context.Background(), day0.Add(time.Duration(days)*24*time.Hour), coldtier.Options{Remove: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRowsOnce checks that pyiceberg, DuckDB (the files of the manifests)
// and sluice's query over both tiers each read rows n in want exactly once.
func checkRowsOnce(t *testing.T, when string, cfg coldtier.Config, c *coldtier.Compactor, want map[int]bool) readerView {
	t.Helper()
	v := readIceberg(t, cfg, "events")
	var sluice []map[string]any
	err := c.QueryValues(context.Background(), table.Query{}, true, func(cols []table.Column, vals []any) error {
		for i, col := range cols {
			if col.Name == "n" {
				sluice = append(sluice, map[string]any{"n": float64(vals[i].(int64))})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: sluice query: %v", when, err)
	}
	readers := []struct {
		reader string
		rows   []map[string]any
	}{{"pyiceberg", v.PyIceberg}, {"duckdb", v.DuckDB}, {"sluice", sluice}}
	if scan := icebergScan(t, cfg); scan != nil {
		readers = append(readers, struct {
			reader string
			rows   []map[string]any
		}{"duckdb iceberg_scan", scan})
	}
	for _, r := range readers {
		seen := map[int]int{}
		for _, row := range r.rows {
			seen[int(row["n"].(float64))]++
		}
		for n, k := range seen {
			if k != 1 || !want[n] {
				t.Errorf("%s: %s reads row n=%d %d times (wanted: %v)", when, r.reader, n, k, want[n])
			}
		}
		if len(seen) != len(want) {
			t.Errorf("%s: %s reads %d distinct rows, want %d", when, r.reader, len(seen), len(want))
		}
	}
	return v
}

// icebergScan reads column n of the table with DuckDB's iceberg_scan
// (metadata, manifests and data over S3; testdata/iceberg_scan.py), or
// returns nil, logging why, when the duckdb-extension-iceberg, -avro and
// -httpfs wheels are not in the readers' venv.
func icebergScan(t *testing.T, cfg coldtier.Config) []map[string]any {
	t.Helper()
	script, err := os.ReadFile("testdata/iceberg_scan.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := pyPool.Run(ctx, string(script), cfg.Catalog.URI, "sluice.events", s3.Endpoint,
		coldtest.AccessKey, coldtest.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Available bool
		Why       string
		N         []int64
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("iceberg_scan.py output: %v: %.500s", err, out)
	}
	if !res.Available {
		t.Logf("DuckDB iceberg_scan not run: %s", res.Why)
		return nil
	}
	t.Logf("DuckDB iceberg_scan read %d rows", len(res.N))
	rows := make([]map[string]any, len(res.N))
	for i, n := range res.N {
		rows[i] = map[string]any{"n": float64(n)}
	}
	return rows
}

func rowSet(ranges ...[2]int) map[int]bool {
	m := map[int]bool{}
	for _, r := range ranges {
		for n := r[0]; n < r[1]; n++ {
			m[n] = true
		}
	}
	return m
}

var dayDir = regexp.MustCompile(`ts_day=[0-9-]+`)

// perDay counts files by day partition.
func perDay(files []string) map[string]int {
	m := map[string]int{}
	for _, f := range files {
		m[dayDir.FindString(f)]++
	}
	return m
}

// dataOnDisk lists the Parquet files under the test's prefix in the S3
// server's directory.
func dataOnDisk(t *testing.T, prefix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s3.Root, coldtest.Bucket, prefix, "sluice", "events", "data", "*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestMaintainSmallFilesAndSnapshots: 10 compaction runs over 3 days leave
// 30 small files and 10 snapshots; one Maintain leaves one file per day
// (the minimum for its size), the manifests merged, and the snapshots
// bounded by KeepSnapshots plus the node's newest run; every row is read
// once by pyiceberg, DuckDB and sluice's query before and after. Once the
// node has committed again, the next Maintain deletes the replaced files.
func TestMaintainSmallFilesAndSnapshots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const prefix = "maintain"
	cfg := testConfig(t, dir, prefix)
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Ten runs are enough to tell each bound from its absence: 10 files a
	// day against at most 2, 10 snapshots against at most 4, 10 manifests
	// against at most 2.
	const runs, perRun, days = 10, 120, 3
	smallCommits(t, tb, c, 0, runs, perRun, days)
	want := rowSet([2]int{0, runs * perRun})
	v := checkRowsOnce(t, "before maintenance", cfg, c, want)
	if len(v.Files) != runs*days || len(v.Snapshots) != runs {
		t.Fatalf("before maintenance: %d files, %d snapshots; want %d, %d", len(v.Files), len(v.Snapshots), runs*days, runs)
	}

	small := v.Files
	// Every snapshot was the current one within the last hour: a reader
	// may still use it, so none expires, whatever KeepSnapshots says.
	ms, err := c.Maintain(ctx, coldtier.MaintainOptions{KeepSnapshots: 1, SnapshotAge: time.Hour, NoRewrite: true, NoManifests: true})
	if err != nil || ms.SnapshotsExpired != 0 {
		t.Fatalf("expiry with a 1h age right after the runs: %+v, %v; want nothing expired", ms, err)
	}
	opts := coldtier.MaintainOptions{KeepSnapshots: 3, SnapshotAge: time.Millisecond}
	time.Sleep(10 * time.Millisecond)
	ms, err = c.Maintain(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("maintain: %+v", ms)
	v = checkRowsOnce(t, "after maintenance", cfg, c, want)
	var bytes int64
	for _, f := range dataOnDisk(t, prefix) {
		if fi, err := os.Stat(f); err == nil && slicesContains(v.Files, f, prefix) {
			bytes += fi.Size()
		}
	}
	minFiles := int(math.Ceil(float64(bytes) / float64(coldtier.DefaultTargetFileBytes)))
	for day, n := range perDay(v.Files) {
		if n > 2*max(minFiles, 1) {
			t.Errorf("day %s: %d data files after maintenance, want at most %d", day, n, 2*max(minFiles, 1))
		}
	}
	if ms.Partitions != days || ms.FilesRewritten != runs*days || ms.RowsRewritten != runs*perRun {
		t.Errorf("rewrote %d groups, %d files, %d rows; want %d, %d, %d", ms.Partitions, ms.FilesRewritten, ms.RowsRewritten, days, runs*days, runs*perRun)
	}
	if ms.Manifests > 2 {
		t.Errorf("%d manifests after the merge, want at most 2", ms.Manifests)
	}
	// Kept: the 3 newest, and the node's newest compaction snapshot.
	if len(v.Snapshots) > opts.KeepSnapshots+1 || ms.Snapshots != len(v.Snapshots) {
		t.Errorf("%d snapshots after maintenance (stats: %d), want at most %d", len(v.Snapshots), ms.Snapshots, opts.KeepSnapshots+1)
	}
	var replace int
	for _, s := range v.Snapshots {
		if s["operation"] == "Operation.REPLACE" || s["operation"] == "replace" {
			replace++
		}
	}
	if replace == 0 {
		t.Errorf("no replace snapshot among %v", v.Snapshots)
	}

	// The node's newest run snapshot still references the small files; a
	// new run supersedes it, and the next pass deletes them.
	smallCommits(t, tb, c, 100000, 1, perRun, days)
	want = rowSet([2]int{0, runs * perRun}, [2]int{100000, 100000 + perRun})
	time.Sleep(10 * time.Millisecond)
	ms, err = c.Maintain(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("maintain again: %+v", ms)
	checkRowsOnce(t, "after the second maintenance", cfg, c, want)
	if left := stillOnDisk(t, prefix, small); len(left) > 0 {
		t.Errorf("%d of the %d small files are still on disk after the second pass: %v", len(left), len(small), left)
	}
	if ms.FilesDeleted == 0 {
		t.Errorf("the second pass deleted no file: %+v", ms)
	}
}

// stillOnDisk are the files of files (s3:// paths) still in the S3
// server's directory.
func stillOnDisk(t *testing.T, prefix string, files []string) []string {
	var left []string
	for _, f := range dataOnDisk(t, prefix) {
		if slicesContains(files, f, prefix) {
			left = append(left, f)
		}
	}
	return left
}

// slicesContains reports whether the table's files (s3:// paths) hold the
// local path f.
func slicesContains(files []string, f, prefix string) bool {
	for _, s := range files {
		if strings.HasSuffix(f, strings.TrimPrefix(s, "s3://")) {
			return true
		}
	}
	return false
}

// maintainKillAt runs Maintain in a child and SIGKILLs it at step.
func maintainKillAt(t *testing.T, dir string, cfg coldtier.Config, opts coldtier.MaintainOptions, step string) {
	t.Helper()
	cb, _ := json.Marshal(cfg)
	ob, _ := json.Marshal(opts)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), maintainChildEnv+"="+dir, childConfigEnv+"="+string(cb), maintainOptsEnv+"="+string(ob),
		coldtier.FaultEnv+"="+step)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var lines []string
	reached := false
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "coldtier: fault "+step {
			reached = true
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	cmd.Wait()
	if !reached {
		t.Fatalf("child never reached %s: %s", step, strings.Join(lines, "\n"))
	}
}

// TestMaintainKill9DuringRewrite kills a Maintain between the upload of a
// day's rewritten files and their replace commit: the table is as before
// (each row once), the next Maintain does the rewrite, and the orphan
// cleanup deletes exactly the killed pass's files.
func TestMaintainKill9DuringRewrite(t *testing.T) {
	t.Parallel()
	testMaintainKill9(t, "maintain-after-upload")
}

// TestMaintainKill9DuringExpiry kills it after the expiry's commit, before
// the expired snapshots' files are deleted: each row once, the files left
// are orphans the cleanup deletes.
func TestMaintainKill9DuringExpiry(t *testing.T) {
	t.Parallel()
	testMaintainKill9(t, "maintain-after-expire-commit")
}

func testMaintainKill9(t *testing.T, step string) {
	dir := t.TempDir()
	prefix := "maintain-" + step
	cfg := testConfig(t, dir, prefix)
	ctx := context.Background()
	const runs, perRun, days = 8, 100, 3
	want := rowSet([2]int{0, runs * perRun})
	opts := coldtier.MaintainOptions{KeepSnapshots: 2, SnapshotAge: time.Millisecond}
	func() {
		st, tb := openTable(t, dir, staticSchema)
		defer st.Close()
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		smallCommits(t, tb, c, 0, runs, perRun, days)
		if step == "maintain-after-expire-commit" {
			// Rewritten already, and superseded by a newer run: the kill
			// comes with the expired snapshots' files still there.
			o := opts
			o.NoExpire = true
			if _, err := c.Maintain(ctx, o); err != nil {
				t.Fatal(err)
			}
			smallCommits(t, tb, c, 100000, 1, perRun, days)
		}
	}()
	if step == "maintain-after-expire-commit" {
		want = rowSet([2]int{0, runs * perRun}, [2]int{100000, 100000 + perRun})
	}
	time.Sleep(10 * time.Millisecond)
	maintainKillAt(t, dir, cfg, opts, step)

	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v := checkRowsOnce(t, "after the kill", cfg, c, want)
	before := v.Files
	orphans := len(dataOnDisk(t, prefix)) - len(v.Files)
	if orphans <= 0 {
		t.Fatalf("after a kill at %s: no file left over (%d on disk, %d in the table)", step, len(dataOnDisk(t, prefix)), len(v.Files))
	}
	if step == "maintain-after-upload" {
		time.Sleep(10 * time.Millisecond)
		ms, err := c.Maintain(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if ms.Partitions != days {
			t.Errorf("the next pass rewrote %d day partitions, want %d", ms.Partitions, days)
		}
		v = checkRowsOnce(t, "after the next pass", cfg, c, want)
	}
	deleted, err := c.DeleteOrphanFiles(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("orphan cleanup deleted %d files", len(deleted))
	var deletedData int
	for _, f := range deleted {
		if strings.HasSuffix(f, ".parquet") {
			deletedData++
		}
	}
	if deletedData == 0 {
		t.Errorf("the orphan cleanup deleted no data file after a kill at %s: %v", step, deleted)
	}
	checkRowsOnce(t, "after the orphan cleanup", cfg, c, want)
	// A new run supersedes the node's newest run snapshot (kept, with
	// the files it references); the next pass leaves only live files.
	smallCommits(t, tb, c, 200000, 1, perRun, days)
	want = rowSet([2]int{0, runs * perRun}, [2]int{100000, 100000 + perRun}, [2]int{200000, 200000 + perRun})
	if step == "maintain-after-upload" {
		want = rowSet([2]int{0, runs * perRun}, [2]int{200000, 200000 + perRun})
	}
	time.Sleep(10 * time.Millisecond)
	if _, err := c.Maintain(ctx, opts); err != nil {
		t.Fatal(err)
	}
	checkRowsOnce(t, "after a new run and pass", cfg, c, want)
	// (After the expiry's kill the table's files are the rewritten ones,
	// which the new run's snapshot, the node's newest, still references.)
	if left := stillOnDisk(t, prefix, before); step == "maintain-after-upload" && len(left) > 0 {
		t.Errorf("%d of the %d files of the table after the kill are still on disk after a new run and pass: %v", len(left), len(before), left)
	}
}

// TestMaintainKeepsPendingRun: node A is killed between its commit and its
// local step (its record names the run; its rows are in both tiers). Node
// B keeps committing and expires snapshots with KeepSnapshots 1 and no age:
// A's run snapshot must stay, so that A's restart finds it and removes its
// rows from the store: each row once.
func TestMaintainKeepsPendingRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dirA, dirB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	cfgA := testConfig(t, dir, "maintain-pending")
	cfgA.StateDir = dirA
	cfgB := cfgA
	cfgB.Node, cfgB.StateDir = "node-b", dirB
	ctx := context.Background()

	st, tb := openTable(t, dirA, staticSchema)
	fill(t, tb, 0, 2000, 3)
	st.Close()
	killAt(t, dirA, cfgA, "after-commit")

	stB, tbB := openTable(t, dirB, staticSchema)
	defer stB.Close()
	b, err := coldtier.Open(ctx, cfgB, tbB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	smallCommits(t, tbB, b, 100000, 4, 50, 3)
	time.Sleep(10 * time.Millisecond)
	ms, err := b.Maintain(ctx, coldtier.MaintainOptions{KeepSnapshots: 1, SnapshotAge: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node b maintain: %+v", ms)
	if ms.SnapshotsExpired == 0 {
		t.Fatalf("node b expired nothing: %+v", ms)
	}

	st, tb = openTable(t, dirA, staticSchema)
	defer st.Close()
	a, err := coldtier.Open(ctx, cfgA, tb) // recovery
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	hot := normRows(t, tb, table.Query{})
	v := readIceberg(t, cfgA, "events")
	seen := map[float64]int{}
	for _, rows := range [][]map[string]any{hot, v.PyIceberg} {
		for _, r := range rows {
			seen[r["n"].(float64)]++
		}
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("row n=%v is held %d times (hot %d, cold %d rows)", n, k, len(hot), len(v.PyIceberg))
		}
	}
	if len(seen) != 2000+4*50 {
		t.Errorf("%d distinct rows, want %d", len(seen), 2000+4*50)
	}
}

// TestMaintainTwoNodesAtOnce: two nodes compact into one table, then both
// run Maintain at the same time: the rewrites of one day race, one wins per
// group and the other drops its files; every row is read once.
func TestMaintainTwoNodesAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shared := testConfig(t, dir, "maintain-two")
	ctx := context.Background()
	var nodes [2]*coldtier.Compactor
	for i := range nodes {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		st, tb := openTable(t, nodeDir, staticSchema)
		defer st.Close()
		cfg := shared
		cfg.Node, cfg.StateDir = fmt.Sprintf("node%d", i), nodeDir
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		nodes[i] = c
		smallCommits(t, tb, c, i*100000, 5, 60, 3)
	}
	errs := make(chan error, 2)
	for _, c := range nodes {
		go func() {
			ms, err := c.Maintain(ctx, coldtier.MaintainOptions{})
			t.Logf("%+v", ms)
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	v := checkRowsOnce(t, "after two passes at once", shared, nodes[0], rowSet([2]int{0, 300}, [2]int{100000, 100300}))
	for day, n := range perDay(v.Files) {
		if n > 2 {
			t.Errorf("day %s: %d files after the passes, want at most 2", day, n)
		}
	}
}

// TestMaintainExpiryFileAlreadyGone: the files an expiry deletes are
// unreferenced once its commit is in, so another node's orphan cleanup may
// delete them first; the expiry counts them deleted instead of failing the
// pass.
func TestMaintainExpiryFileAlreadyGone(t *testing.T) {
	dir := t.TempDir()
	const prefix = "maintain-gone"
	cfg := testConfig(t, dir, prefix)
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	smallCommits(t, tb, c, 0, 4, 50, 1)
	small := dataOnDisk(t, prefix)
	if len(small) != 4 {
		t.Fatalf("%d data files after 4 runs, want 4", len(small))
	}
	opts := coldtier.MaintainOptions{KeepSnapshots: 1, SnapshotAge: time.Millisecond}
	if ms, err := c.Maintain(ctx, opts); err != nil || ms.FilesRewritten != 4 {
		t.Fatalf("first pass: %+v, %v; want the 4 files rewritten", ms, err)
	}
	// The node's newest run referenced the small files; after one more
	// run, only expired snapshots do.
	smallCommits(t, tb, c, 100000, 1, 50, 1)
	time.Sleep(10 * time.Millisecond)
	gone := 0
	defer coldtier.SetExpiryCommitted(func() {
		for _, f := range small[:2] {
			if err := os.Remove(f); err != nil {
				t.Error(err)
			} else {
				gone++
			}
		}
	})()
	opts.NoRewrite = true
	ms, err := c.Maintain(ctx, opts)
	if err != nil {
		t.Fatalf("expiry with 2 of its files already deleted: %v", err)
	}
	t.Logf("maintain: %+v", ms)
	if gone != 2 {
		t.Fatalf("the hook deleted %d files, want 2", gone)
	}
	if left := stillOnDiskOf(small); len(left) > 0 {
		t.Errorf("small files left on disk after the expiry: %v", left)
	}
	if ms.FilesDeleted < len(small) {
		t.Errorf("the pass counted %d files deleted, want at least the %d small files", ms.FilesDeleted, len(small))
	}
	checkRowsOnce(t, "after the expiry", cfg, c, rowSet([2]int{0, 200}, [2]int{100000, 100050}))
}

// stillOnDiskOf are the local files of files that still exist.
func stillOnDiskOf(files []string) []string {
	var left []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			left = append(left, f)
		}
	}
	return left
}
