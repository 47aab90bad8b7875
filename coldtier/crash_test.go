package coldtier_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// childEnv makes the test binary a child that runs one compaction (with
// removal) of the store in the directory it names, configured by the JSON
// in childConfigEnv; the parent kills it at the step coldtier.FaultEnv
// names.
const (
	childEnv       = "SLUICE_COLDTIER_CHILD"
	childConfigEnv = "SLUICE_COLDTIER_CHILD_CONFIG"
	// childContinuousEnv makes the child's run a continuous one.
	childContinuousEnv = "SLUICE_COLDTIER_CHILD_CONTINUOUS"
)

func runChild(dir string) int {
	var cfg coldtier.Config
	if err := json.Unmarshal([]byte(os.Getenv(childConfigEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
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
	if os.Getenv(childDeletesEnv) != "" {
		coldtier.SetRunDeletes(c, deleteWhere(deletedN))
	}
	opts := coldtier.Options{Remove: true, Continuous: os.Getenv(childContinuousEnv) != ""}
	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintln(os.Stderr, "child: compaction done")
	return 0
}

// killAt runs the child compaction and SIGKILLs it when it reports the
// fault step.
//
// env is added to the child's environment alone (childContinuousEnv,
// childDeletesEnv), so that a test that sets it may run in parallel.
func killAt(t *testing.T, dir string, cfg coldtier.Config, step string, env ...string) {
	t.Helper()
	buf, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("the child's config: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), childEnv+"="+dir, childConfigEnv+"="+string(buf), coldtier.FaultEnv+"="+step)
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

// TestKill9BetweenUploadAndCommit kills the compacting process after its
// files are on S3 and before the commit: nothing is visible in the Iceberg
// table, the store still holds every row, and the next run (after a late
// row arrived) moves each row exactly once.
func TestKill9BetweenUploadAndCommit(t *testing.T) {
	t.Parallel()
	testKill9(t, "after-upload")
}

// TestKill9BetweenCommitAndRemoval kills it after the commit and before the
// store's rows are removed: restarting finishes the removal (and only of
// the committed blocks: a late row written after the crash stays), so the
// two tiers together hold every row exactly once.
func TestKill9BetweenCommitAndRemoval(t *testing.T) {
	t.Parallel()
	testKill9(t, "after-commit")
}

func testKill9(t *testing.T, step string) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "crash-"+step)
	st, tb := openTable(t, dir, staticSchema)
	fill(t, tb, 0, 2000, 3)
	st.Close()

	killAt(t, dir, cfg, step)

	st, tb = openTable(t, dir, staticSchema)
	defer st.Close()
	ctx := context.Background()
	before := len(normRows(t, tb, table.Query{}))
	if before != 2000 {
		t.Fatalf("after the kill at %s the store has %d rows before recovery, want all 2000", step, before)
	}
	v := readIceberg(t, cfg, "events")
	switch step {
	case "after-upload":
		if len(v.PyIceberg) != 0 {
			t.Fatalf("kill before commit: %d rows visible in Iceberg", len(v.PyIceberg))
		}
	case "after-commit":
		if len(v.PyIceberg) != 2000 {
			t.Fatalf("kill after commit: %d rows in Iceberg, want 2000", len(v.PyIceberg))
		}
	}
	// A late row (before the watermark) arrives before the restart.
	fill(t, tb, 5000, 1, 1)

	c, err := coldtier.Open(ctx, cfg, tb) // the restart: recovery runs here
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hot := normRows(t, tb, table.Query{})
	v = readIceberg(t, cfg, "events")
	checkOnce(t, "after restart", hot, v.PyIceberg, 2001)

	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	hot = normRows(t, tb, table.Query{})
	v = readIceberg(t, cfg, "events")
	if len(hot) != 0 {
		t.Errorf("after the next run the store still has %d rows", len(hot))
	}
	checkOnce(t, "after the next run", hot, v.PyIceberg, 2001)
	checkOnce(t, "after the next run (duckdb)", hot, v.DuckDB, 2001)

	// The killed run's uploaded files are orphans only when it was killed
	// before its commit; the cleanup deletes exactly those.
	onDisk := func() int {
		files, _ := filepath.Glob(filepath.Join(s3.Root, coldtest.Bucket, "crash-"+step, "sluice", "events", "data", "*", "*.parquet"))
		return len(files)
	}
	orphans := onDisk() - len(v.Files)
	if step == "after-upload" && orphans == 0 {
		t.Fatalf("no orphan file after a kill between upload and commit (%d files)", onDisk())
	}
	if step == "after-commit" && orphans != 0 {
		t.Fatalf("%d orphan files after a kill after the commit", orphans)
	}
	deleted, err := c.DeleteOrphanFiles(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var deletedData int
	for _, f := range deleted {
		if strings.HasSuffix(f, ".parquet") {
			deletedData++
		}
	}
	if deletedData != orphans || onDisk() != len(v.Files) {
		t.Errorf("orphan cleanup deleted %d data files (%v), want the %d orphans; %d files left, want %d", deletedData, deleted, orphans, onDisk(), len(v.Files))
	}
	v = readIceberg(t, cfg, "events")
	checkOnce(t, "after the orphan cleanup", hot, v.PyIceberg, 2001)
}

// checkOnce checks that hot and cold together hold rows n = 0..1999 and
// 5000 exactly once each.
func checkOnce(t *testing.T, when string, hot, cold []map[string]any, want int) {
	t.Helper()
	seen := map[float64]int{}
	for _, rows := range [][]map[string]any{hot, cold} {
		for _, r := range rows {
			seen[r["n"].(float64)]++
		}
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("%s: row n=%v is held %d times (hot %d rows, cold %d)", when, n, k, len(hot), len(cold))
		}
	}
	if len(seen) != want {
		t.Errorf("%s: %d distinct rows in both tiers, want %d (hot %d, cold %d)", when, len(seen), want, len(hot), len(cold))
	}
}

// TestKill9ContinuousAfterCommit kills a continuous run after its commit
// and before its local step (the committed-sequence mark): the restart
// moves the mark, so the two-tier query returns each row once although the
// hot store keeps the committed rows, and the next run commits only the
// late row that arrived meanwhile.
func TestKill9ContinuousAfterCommit(t *testing.T) {
	t.Parallel() // its own directory, catalog, prefix and child process
	dir := t.TempDir()
	cfg := testConfig(t, dir, "crash-continuous")
	st, tb := openTable(t, dir, staticSchema)
	fill(t, tb, 0, 2000, 3)
	st.Close()

	killAt(t, dir, cfg, "after-commit", childContinuousEnv+"=1")

	st, tb = openTable(t, dir, staticSchema)
	defer st.Close()
	ctx := context.Background()
	if v := readIceberg(t, cfg, "events"); len(v.PyIceberg) != 2000 {
		t.Fatalf("kill after the commit: %d rows in Iceberg, want 2000", len(v.PyIceberg))
	}
	fill(t, tb, 5000, 1, 1) // a late row before the restart
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	both := func(when string) {
		t.Helper()
		seen := map[int64]int{}
		err := c.QueryValues(ctx, table.Query{Columns: []string{"n"}}, true, func(_ []table.Column, vals []any) error {
			seen[vals[0].(int64)]++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		twice := 0
		for _, k := range seen {
			if k != 1 {
				twice++
			}
		}
		if twice != 0 || len(seen) != 2001 {
			t.Errorf("%s: the two-tier query holds %d distinct rows (%d more than once), want 2001 once", when, len(seen), twice)
		}
	}
	both("after the restart")
	// The recovered local step also applied the retention (Remove): the
	// committed blocks before the watermark are gone, the late row stays.
	if hot := normRows(t, tb, table.Query{}); len(hot) != 1 {
		t.Fatalf("the hot store keeps %d rows after the restart, want the late row only", len(hot))
	}
	stats, err := c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{Remove: true, Continuous: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Rows != 1 {
		t.Errorf("the next continuous run committed %d rows, want the late row only", stats.Rows)
	}
	both("after the next run")
	v := readIceberg(t, cfg, "events")
	checkOnce(t, "after the next run", nil, v.PyIceberg, 2001)
	if hot := normRows(t, tb, table.Query{}); len(hot) != 0 {
		t.Errorf("the hot store keeps %d rows after the next run, want none (all committed, before the watermark)", len(hot))
	}
}
