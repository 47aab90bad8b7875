package coldtier_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// node is one writer of a shared Iceberg table in a test: its own store
// and state dir, the shared catalog and warehouse.
type node struct {
	cfg coldtier.Config
	st  *table.Store
	tb  *table.Table
	c   *coldtier.Compactor
}

// openNode opens node name of the table shared configures, under dir.
func openNode(t *testing.T, dir, name string, shared coldtier.Config) *node {
	t.Helper()
	n := &node{cfg: shared}
	n.cfg.Node, n.cfg.StateDir = name, filepath.Join(dir, name)
	n.st, n.tb = openTable(t, n.cfg.StateDir, staticSchema)
	t.Cleanup(func() { n.st.Close() })
	n.reopen(t)
	return n
}

// reopen opens the node's compactor again, as its restart does (the
// compactor before is abandoned, as a killed process's is).
func (n *node) reopen(t *testing.T) {
	t.Helper()
	c, err := coldtier.Open(context.Background(), n.cfg, n.tb)
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	t.Cleanup(func() { c.Close() })
}

// compact runs one compaction (with removal) of the node's rows of the
// first three days.
func (n *node) compact(ctx context.Context) (coldtier.Stats, error) {
	return n.c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{Remove: true})
}

// crash is what a hook panics with to stop a run where a kill would.
type crash struct{}

// compactCrashing runs a compaction that a hook stops with crash{} and
// reports whether it was stopped so.
func (n *node) compactCrashing(t *testing.T, ctx context.Context) (crashed bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			crashed = true
		}
	}()
	if _, err := n.compact(ctx); err != nil {
		t.Fatal(err)
	}
	return false
}

// markersOnDisk lists the in-flight markers of the table under prefix in
// the S3 server's directory.
func markersOnDisk(t *testing.T, prefix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s3.Root, coldtest.Bucket, prefix, "sluice", "events", "sluice-inflight", "*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestOrphanCleanupDuringRunAnotherNode: node A's run is held between its
// upload and its commit (as a read lease or a slow catalog holds it) while
// node B's orphan cleanup runs with no age at all: B keeps A's uploads
// (A's in-flight marker names them), A commits, and every row is read
// once by pyiceberg, DuckDB and sluice. Without the markers B deletes A's
// files and the snapshot A commits references missing files.
func TestOrphanCleanupDuringRunAnotherNode(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	dir := t.TempDir()
	const prefix = "orphans-other-node"
	shared := testConfig(t, dir, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := openNode(t, dir, "node-a", shared), openNode(t, dir, "node-b", shared)
	fill(t, a.tb, 0, 300, 3)
	if _, err := a.compact(ctx); err != nil { // the table exists, with files
		t.Fatal(err)
	}
	fill(t, a.tb, 1000, 300, 3)
	var (
		once    sync.Once
		deleted []string
		held    bool
	)
	coldtier.SetHooks(a.c, coldtier.Hooks{RunStaged: func() {
		once.Do(func() {
			held = true
			var err error
			if deleted, err = b.c.DeleteOrphanFiles(ctx, 0); err != nil {
				t.Errorf("node B's cleanup during node A's run: %v", err)
			}
		})
	}})
	st, err := a.compact(ctx)
	if err != nil {
		t.Fatalf("node A's run after node B's cleanup: %v", err)
	}
	if !held || st.Rows != 300 {
		t.Fatalf("the hook held the run: %v; the run committed %d rows, want 300", held, st.Rows)
	}
	if len(deleted) > 0 {
		t.Errorf("node B's cleanup deleted files of node A's run in flight: %v", deleted)
	}
	checkRowsOnce(t, "after the run", shared, a.c, rowSet([2]int{0, 300}, [2]int{1000, 1300}))
	if m := markersOnDisk(t, prefix); len(m) != 0 {
		t.Errorf("in-flight markers left after the runs: %v", m)
	}
	// Once committed, a cleanup has nothing to delete.
	if deleted, err := b.c.DeleteOrphanFiles(ctx, 0); err != nil || len(deleted) != 0 {
		t.Errorf("cleanup after the commit: deleted %v, %v; want nothing", deleted, err)
	}
}

// TestOrphanCleanupDuringRunSameNode: a cleanup of the node whose run is
// held between upload and commit waits for the run (without waiting it
// would find the run's marker all the same), then keeps every file.
func TestOrphanCleanupDuringRunSameNode(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	dir := t.TempDir()
	const prefix = "orphans-same-node"
	shared := testConfig(t, dir, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := openNode(t, dir, "node-a", shared)
	fill(t, a.tb, 0, 300, 3)
	if _, err := a.compact(ctx); err != nil {
		t.Fatal(err)
	}
	fill(t, a.tb, 1000, 300, 3)
	waiting := make(chan struct{}, 1)
	type result struct {
		deleted []string
		err     error
	}
	done := make(chan result, 1)
	var once sync.Once
	coldtier.SetHooks(a.c, coldtier.Hooks{OrphansWaiting: func() { waiting <- struct{}{} }, RunStaged: func() {
		once.Do(func() {
			go func() {
				deleted, err := a.c.DeleteOrphanFiles(ctx, 0)
				done <- result{deleted, err}
			}()
			select {
			case <-waiting:
			case r := <-done:
				t.Errorf("the cleanup ran during the node's run (deleted %v, %v)", r.deleted, r.err)
				done <- r
			case <-ctx.Done():
				t.Error("the cleanup neither waited nor ended")
			}
		})
	}})
	if _, err := a.compact(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.deleted) != 0 {
			t.Errorf("cleanup after the run: deleted %v, %v; want nothing", r.deleted, r.err)
		}
	case <-ctx.Done():
		t.Fatal("the cleanup did not end after the run")
	}
	checkRowsOnce(t, "after the run", shared, a.c, rowSet([2]int{0, 300}, [2]int{1000, 1300}))
}

// TestOrphanCleanupRunCrashes stops node A's run, as a kill would, between
// writing its marker and uploading, between uploading and committing, and
// between committing and removing its marker; node B's cleanup (no age)
// runs before A restarts and after. Nothing committed is lost, the files
// of the run in flight stay until A's restart decides their fate, and
// afterwards nothing is left: no marker, no file the table does not
// reference.
func TestOrphanCleanupRunCrashes(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	for _, step := range []string{"after-marker", "after-upload", "after-commit"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			prefix := "orphans-crash-" + step
			shared := testConfig(t, dir, prefix)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			a, b := openNode(t, dir, "node-a", shared), openNode(t, dir, "node-b", shared)
			fill(t, a.tb, 0, 300, 3)
			if _, err := a.compact(ctx); err != nil {
				t.Fatal(err)
			}
			fill(t, a.tb, 1000, 300, 3)
			var once sync.Once
			stop := func() { once.Do(func() { panic(crash{}) }) }
			switch step {
			case "after-marker":
				coldtier.SetHooks(a.c, coldtier.Hooks{MarkerWritten: func(kind string) {
					if kind == "run" {
						stop()
					}
				}})
			case "after-upload":
				coldtier.SetHooks(a.c, coldtier.Hooks{RunStaged: stop})
			case "after-commit":
				coldtier.SetHooks(a.c, coldtier.Hooks{MarkerKept: stop})
			}
			if !a.compactCrashing(t, ctx) {
				t.Fatalf("the run was not stopped %s", step)
			}
			uploaded := len(dataOnDisk(t, prefix))
			if m := markersOnDisk(t, prefix); len(m) != 1 {
				t.Fatalf("in-flight markers after a crash %s: %v, want the run's", step, m)
			}
			if _, err := b.c.DeleteOrphanFiles(ctx, 0); err != nil {
				t.Fatalf("node B's cleanup before node A's restart: %v", err)
			}
			if got := len(dataOnDisk(t, prefix)); got != uploaded {
				t.Errorf("node B's cleanup deleted %d files of node A's run before its restart decided their fate", uploaded-got)
			}
			a.reopen(t)
			if m := markersOnDisk(t, prefix); len(m) != 0 {
				t.Errorf("in-flight markers after node A's restart: %v", m)
			}
			if _, err := b.c.DeleteOrphanFiles(ctx, 0); err != nil {
				t.Fatalf("node B's cleanup after node A's restart: %v", err)
			}
			if _, err := a.compact(ctx); err != nil {
				t.Fatal(err)
			}
			v := checkRowsOnce(t, "after the restart and the next run", shared, a.c, rowSet([2]int{0, 300}, [2]int{1000, 1300}))
			if _, err := b.c.DeleteOrphanFiles(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if got := len(dataOnDisk(t, prefix)); got != len(v.Files) {
				t.Errorf("%d data files on disk, the table references %d: files leaked", got, len(v.Files))
			}
			if m := markersOnDisk(t, prefix); len(m) != 0 {
				t.Errorf("in-flight markers left: %v", m)
			}
		})
	}
}

// TestOrphanMarkerOfDeadNode: the marker of a node killed between upload
// and commit that never comes back is honoured for MarkerBound, then no
// longer: its files do not stay forever.
func TestOrphanMarkerOfDeadNode(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	dir := t.TempDir()
	const prefix = "orphans-dead-node"
	shared := testConfig(t, dir, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := openNode(t, dir, "node-a", shared), openNode(t, dir, "node-b", shared)
	fill(t, a.tb, 0, 300, 3)
	if _, err := a.compact(ctx); err != nil {
		t.Fatal(err)
	}
	fill(t, a.tb, 1000, 300, 3)
	var once sync.Once
	coldtier.SetHooks(a.c, coldtier.Hooks{RunStaged: func() { once.Do(func() { panic(crash{}) }) }})
	if !a.compactCrashing(t, ctx) {
		t.Fatal("the run was not stopped")
	}
	uploaded := len(dataOnDisk(t, prefix))
	if deleted, err := b.c.DeleteOrphanFiles(ctx, 0); err != nil || len(deleted) != 0 {
		t.Fatalf("cleanup with node A's marker live: deleted %v, %v; want nothing", deleted, err)
	}
	markers := markersOnDisk(t, prefix)
	if len(markers) != 1 {
		t.Fatalf("markers: %v, want node A's", markers)
	}
	// The object store stamps objects with their file's time: the marker
	// as if written MarkerBound and an hour ago, the files a minute later.
	past := time.Now().Add(-coldtier.MarkerBound - time.Hour)
	if err := os.Chtimes(markers[0], past, past); err != nil {
		t.Fatal(err)
	}
	for _, f := range dataOnDisk(t, prefix) {
		later := past.Add(time.Minute)
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	deleted, err := b.c.DeleteOrphanFiles(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var data int
	for _, f := range deleted {
		if strings.HasSuffix(f, ".parquet") {
			data++
		}
	}
	v := checkRowsOnce(t, "after the cleanup", shared, b.c, rowSet([2]int{0, 300}))
	if data == 0 || len(dataOnDisk(t, prefix)) != len(v.Files) {
		t.Errorf("the cleanup past the marker's bound deleted %d data files (%d uploaded, %d on disk, %d in the table)",
			data, uploaded, len(dataOnDisk(t, prefix)), len(v.Files))
	}
}

// localNodes opens two nodes of one table in a local warehouse (whose
// file removal reports a missing file, as S3's does not), with the table
// committed once and three unreferenced files in its data directory.
func localNodes(t *testing.T) (a, b *node, orphans []string) {
	t.Helper()
	dir := t.TempDir()
	shared := coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"),
		Catalog: coldtier.Catalog{URI: filepath.Join(dir, "catalog.db")}}
	a, b = openNode(t, dir, "node-a", shared), openNode(t, dir, "node-b", shared)
	fill(t, a.tb, 0, 300, 3)
	if _, err := a.compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "warehouse", "sluice", "events", "data")
	for i := range 3 {
		p := filepath.Join(data, fmt.Sprintf("orphan-%d.parquet", i))
		if err := os.WriteFile(p, []byte("PAR1 not referenced PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, p)
	}
	return a, b, orphans
}

// coldRows counts the rows sluice reads from the node's cold tier (every
// file of the table read).
func coldRows(t *testing.T, n *node) int {
	t.Helper()
	rows := 0
	err := n.c.QueryValues(context.Background(), table.Query{}, true, func([]table.Column, []any) error {
		rows++
		return nil
	})
	if err != nil {
		t.Fatalf("query over the cold tier: %v", err)
	}
	return rows
}

// TestOrphanCleanupsOneNodeAtOnce: two cleanups of one node at once run
// one after the other (the second waits), and neither fails on the files
// the other deleted.
func TestOrphanCleanupsOneNodeAtOnce(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	a, _, orphans := localNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waiting := make(chan struct{}, 1)
	type result struct {
		deleted []string
		err     error
	}
	second := make(chan result, 1)
	var first atomic.Bool
	coldtier.SetHooks(a.c, coldtier.Hooks{OrphansWaiting: func() { waiting <- struct{}{} }, OrphansPlanned: func() {
		if !first.CompareAndSwap(false, true) {
			return // the second cleanup
		}
		func() {
			go func() {
				deleted, err := a.c.DeleteOrphanFiles(ctx, 0)
				second <- result{deleted, err}
			}()
			select {
			case <-waiting:
			case r := <-second:
				t.Errorf("a second cleanup ran during the first (deleted %v, %v)", r.deleted, r.err)
				second <- r
			case <-ctx.Done():
				t.Error("the second cleanup neither waited nor ended")
			}
		}()
	}})
	deleted, err := a.c.DeleteOrphanFiles(ctx, 0)
	if err != nil {
		t.Fatalf("first cleanup: %v", err)
	}
	r := <-second
	if r.err != nil {
		t.Fatalf("second cleanup: %v", r.err)
	}
	if len(deleted)+len(r.deleted) != len(orphans) {
		t.Errorf("the cleanups deleted %v and %v, want the %d orphans once", deleted, r.deleted, len(orphans))
	}
	if got := coldRows(t, a); got != 300 {
		t.Errorf("%d rows in the cold tier after the cleanups, want 300", got)
	}
}

// TestOrphanCleanupsTwoNodesAtOnce: node B's cleanup deletes the orphans
// node A's cleanup has listed and is about to delete: A's answer is no
// error (what is gone is done), not a 500 for a missing file.
func TestOrphanCleanupsTwoNodesAtOnce(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	a, b, orphans := localNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		once      sync.Once
		byB       []string
		errB      error
		whileA    bool
		planningA = true
	)
	coldtier.SetHooks(a.c, coldtier.Hooks{OrphansPlanned: func() {
		if !planningA {
			return
		}
		once.Do(func() {
			planningA = false
			whileA = true
			byB, errB = b.c.DeleteOrphanFiles(ctx, 0)
		})
	}})
	byA, err := a.c.DeleteOrphanFiles(ctx, 0)
	if err != nil {
		t.Fatalf("node A's cleanup after node B deleted its candidates: %v", err)
	}
	if !whileA || errB != nil || len(byB) != len(orphans) {
		t.Fatalf("node B's cleanup during A's: ran %v, deleted %v, %v; want the %d orphans", whileA, byB, errB, len(orphans))
	}
	if len(byA) != 0 {
		t.Errorf("node A reports %v deleted, which node B deleted", byA)
	}
	if got := coldRows(t, a); got != 300 {
		t.Errorf("%d rows in the cold tier after the cleanups, want 300", got)
	}
}

// cleanupMustWait starts node n's cleanup (no age) and returns once it
// waits for the node's maintenance; it fails the test if the cleanup ends
// instead. wait returns the cleanup's result after the maintenance.
func cleanupMustWait(t *testing.T, ctx context.Context, n *node, waiting <-chan struct{}) (wait func() ([]string, error)) {
	type result struct {
		deleted []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		deleted, err := n.c.DeleteOrphanFiles(ctx, 0)
		done <- result{deleted, err}
	}()
	select {
	case <-waiting:
	case r := <-done:
		t.Errorf("the cleanup ran during the maintenance pass (deleted %v, %v)", r.deleted, r.err)
		done <- r
	case <-ctx.Done():
		t.Error("the cleanup neither waited nor ended")
	}
	return func() ([]string, error) {
		select {
		case r := <-done:
			return r.deleted, r.err
		case <-ctx.Done():
			return nil, fmt.Errorf("the cleanup did not end: %w", ctx.Err())
		}
	}
}

// TestOrphanCleanupDuringRewrite: a cleanup of the node whose maintenance
// has uploaded a rewrite's files and staged its commit waits for the pass,
// then deletes what the pass replaced and nothing the table references.
func TestOrphanCleanupDuringRewrite(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	dir := t.TempDir()
	const prefix = "orphans-rewrite"
	shared := testConfig(t, dir, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := openNode(t, dir, "node-a", shared)
	smallCommits(t, a.tb, a.c, 0, 4, 50, 2)
	waiting := make(chan struct{}, 1)
	var (
		once sync.Once
		wait func() ([]string, error)
	)
	coldtier.SetHooks(a.c, coldtier.Hooks{OrphansWaiting: func() { waiting <- struct{}{} }, RewriteStaged: func() {
		once.Do(func() { wait = cleanupMustWait(t, ctx, a, waiting) })
	}})
	ms, err := a.c.Maintain(ctx, coldtier.MaintainOptions{NoExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	if ms.Partitions == 0 || wait == nil {
		t.Fatalf("the pass rewrote nothing: %+v", ms)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	checkRowsOnce(t, "after the rewrite and the cleanup", shared, a.c, rowSet([2]int{0, 200}))
}

// TestOrphanCleanupDuringExpiry: a cleanup of the node whose expiry has
// committed and not yet deleted the expired snapshots' files waits for the
// pass.
func TestOrphanCleanupDuringExpiry(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	dir := t.TempDir()
	const prefix = "orphans-expiry"
	shared := testConfig(t, dir, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := openNode(t, dir, "node-a", shared)
	smallCommits(t, a.tb, a.c, 0, 4, 50, 2)
	if _, err := a.c.Maintain(ctx, coldtier.MaintainOptions{NoExpire: true}); err != nil {
		t.Fatal(err)
	}
	smallCommits(t, a.tb, a.c, 1000, 1, 50, 2)
	time.Sleep(10 * time.Millisecond) // the snapshots before are older than SnapshotAge below
	waiting := make(chan struct{}, 1)
	var (
		once sync.Once
		wait func() ([]string, error)
	)
	coldtier.SetHooks(a.c, coldtier.Hooks{OrphansWaiting: func() { waiting <- struct{}{} }, ExpiryCommitted: func() {
		once.Do(func() { wait = cleanupMustWait(t, ctx, a, waiting) })
	}})
	ms, err := a.c.Maintain(ctx, coldtier.MaintainOptions{NoRewrite: true, NoManifests: true, KeepSnapshots: 1, SnapshotAge: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if ms.SnapshotsExpired == 0 || wait == nil {
		t.Fatalf("the pass expired nothing: %+v", ms)
	}
	if ms.FilesDeleted == 0 {
		t.Errorf("the expiry deleted no file: %+v", ms)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	checkRowsOnce(t, "after the expiry and the cleanup", shared, a.c, rowSet([2]int{0, 200}, [2]int{1000, 1050}))
}

// fillSource appends rows n = first..first+n-1 as one stream batch of
// source partition "kafka/events/0/id": each row carries the batch's
// offsets and its own (offset = n), as rows a Kafka consumer stored.
func fillSource(t *testing.T, tb *table.Table, first, n int) {
	t.Helper()
	batch := fmt.Sprintf("kafka/events/0/id@%d-%d", first, first+n)
	rows := make([]table.Row, 0, n)
	for i := range n {
		k := first + i
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", k%7), "ts": day0.Add(time.Duration(k) * time.Second),
			"n": int64(k), table.SourceBatchColumn: batch, table.SourceOffsetColumn: int64(k)})
	}
	if err := tb.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// TestClaimsRecheckOnConflict: nodes A and B both hold the same 300
// messages (a partition that moved between them). Between node A's claim
// read and its commit, B commits them: A's commit conflicts (the run pins
// the table's head, so iceberg-go does not replay it on the new head), A
// reads the claims again, finds B's over the offsets it wrote, and writes
// its files again without them. Each message is in the Iceberg table once,
// with a SQL catalog and with a REST catalog (whose conflict iceberg-go
// would replay without the pin).
func TestClaimsRecheckOnConflict(t *testing.T) {
	t.Parallel() // its hooks are its compactors' own (coldtier.SetHooks)
	t.Run("sql", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		shared := testConfig(t, dir, "claims-conflict")
		a := claimsConflict(t, dir, shared)
		checkRowsOnce(t, "after both runs", shared, a.c, rowSet([2]int{0, 300}))
	})
	t.Run("rest", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		rest, err := coldtest.StartREST(dir)
		coldtest.Require(t, err)
		defer rest.Stop()
		shared := coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"),
			Catalog: coldtier.Catalog{Type: "rest", URI: rest.URI}}
		a := claimsConflict(t, dir, shared)
		seen := map[int64]int{}
		err = a.c.QueryValues(context.Background(), table.Query{Columns: []string{"n"}}, true, func(_ []table.Column, vals []any) error {
			seen[vals[0].(int64)]++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for n, k := range seen {
			if k != 1 || n < 0 || n >= 300 {
				t.Errorf("row n=%d read %d times", n, k)
			}
		}
		if len(seen) != 300 {
			t.Errorf("%d distinct rows, want 300", len(seen))
		}
	})
}

// claimsConflict has node B commit the 300 messages both nodes hold
// between node A's claim read and its commit, and returns node A.
func claimsConflict(t *testing.T, dir string, shared coldtier.Config) *node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := openNode(t, dir, "node-a", shared), openNode(t, dir, "node-b", shared)
	fillSource(t, a.tb, 0, 300)
	fillSource(t, b.tb, 0, 300)
	var (
		inA  atomic.Bool
		stB  coldtier.Stats
		errB error
		ranB bool
	)
	coldtier.SetHooks(a.c, coldtier.Hooks{RunStaged: func() {
		if !inA.CompareAndSwap(false, true) {
			return
		}
		ranB = true
		stB, errB = b.compact(ctx)
	}})
	stA, err := a.compact(ctx)
	if err != nil {
		t.Fatalf("node A's run: %v", err)
	}
	if !ranB || errB != nil || stB.Rows != 300 {
		t.Fatalf("node B's run between node A's claim read and commit: ran %v, %d rows, %v; want 300 rows", ranB, stB.Rows, errB)
	}
	if stA.Rows != 0 || stA.Skipped != 300 {
		t.Errorf("node A's run: %d rows committed, %d skipped; want 0 and the 300 node B committed", stA.Rows, stA.Skipped)
	}
	return a
}

// TestRunBoundMatchesConfig: the orphan_age floor of the config counts a
// run as long as the cold tier lets one run.
func TestRunBoundMatchesConfig(t *testing.T) {
	if coldtier.MaxRunDuration != config.MaxCompactionRun {
		t.Errorf("coldtier.MaxRunDuration %v, config.MaxCompactionRun %v", coldtier.MaxRunDuration, config.MaxCompactionRun)
	}
	if coldtier.MarkerBound <= coldtier.MaxRunDuration {
		t.Errorf("markers are honoured for %v, runs may commit until %v", coldtier.MarkerBound, coldtier.MaxRunDuration)
	}
}
