package coldtier_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// TestRESTCatalog compacts through an Iceberg REST catalog (Apache
// Iceberg's own REST catalog server, a Java process) into a local
// warehouse, in two runs, and reads the rows back over both tiers; a
// restart (a new Compactor) sees the committed watermark.
func TestRESTCatalog(t *testing.T) {
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir)
	coldtest.Require(t, err)
	defer rest.Stop()
	cfg := coldtier.Config{
		Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "rest",
		Catalog: coldtier.Catalog{Type: "rest", URI: rest.URI},
	}
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	fill(t, tb, 0, 1200, 4)
	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	want := tieredRows(t, c, table.Query{})
	for _, wm := range []time.Time{day0.Add(48 * time.Hour), day0.Add(96 * time.Hour)} {
		if _, err := c.Compact(ctx, wm, coldtier.Options{Remove: true}); err != nil {
			log, _ := os.ReadFile(rest.Log)
			t.Fatalf("%v\nREST catalog log (last 3000 bytes): %s", err, log[max(0, len(log)-3000):])
		}
	}
	c.Close()
	c, err = coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if left := normRows(t, tb, table.Query{}); len(left) != 0 {
		t.Fatalf("%d rows left in the store", len(left))
	}
	if got := tieredRows(t, c, table.Query{}); !reflect.DeepEqual(got, want) {
		t.Errorf("%d rows through the REST catalog, want %d", len(got), len(want))
	}
	files, err := c.DataFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("%d data files, want one per day (4)", len(files))
	}
}

// TestMaintainRetryKeepsSnapshotLogSorted: node A stages a rewrite's
// replace snapshot, node B commits a run before A's commit, and the REST
// catalog refuses A's commit (409). The retried rewrite must not keep the
// timestamp it was staged with: the snapshot log would then go back in
// time, which Apache Iceberg's REST server refuses once the gap exceeds a
// minute ("[BUG] Expected sorted snapshot log entries", seen in the
// compressed hour). Every row is still read once.
func TestMaintainRetryKeepsSnapshotLogSorted(t *testing.T) {
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir)
	coldtest.Require(t, err)
	defer rest.Stop()
	ctx := context.Background()
	var nodes [2]*coldtier.Compactor
	var stores [2]*table.Table
	for i := range nodes {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		st, tb := openTable(t, nodeDir, staticSchema)
		defer st.Close()
		cfg := coldtier.Config{
			Warehouse: filepath.Join(dir, "warehouse"), StateDir: nodeDir, Node: fmt.Sprintf("node%d", i),
			Catalog: coldtier.Catalog{Type: "rest", URI: rest.URI},
		}
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		nodes[i], stores[i] = c, tb
	}
	a, b := nodes[0], nodes[1]
	smallCommits(t, stores[0], a, 0, 4, 50, 1)

	staged := 0
	defer coldtier.SetRewriteStaged(func() {
		staged++
		if staged == 1 {
			time.Sleep(5 * time.Millisecond) // B's snapshot is younger than A's staged one
			smallCommits(t, stores[1], b, 100000, 1, 50, 1)
		}
	})()
	ms, err := a.Maintain(ctx, coldtier.MaintainOptions{SnapshotAge: time.Hour})
	if err != nil {
		log, _ := os.ReadFile(rest.Log)
		t.Fatalf("%v\nREST catalog log (last 3000 bytes): %s", err, log[max(0, len(log)-3000):])
	}
	t.Logf("maintain: %+v (staged %d times)", ms, staged)
	if ms.FilesRewritten != 4 {
		t.Errorf("rewrote %d files, want the 4 of node A's runs", ms.FilesRewritten)
	}

	entries, snaps, err := coldtier.SnapshotLog(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(entries); i++ {
		prev, cur := entries[i-1], entries[i]
		if cur.TimestampMs < prev.TimestampMs {
			t.Errorf("snapshot log entry %d (snapshot %d, %s) is older than entry %d (snapshot %d, %s): %d ms back",
				i, cur.SnapshotID, snaps[cur.SnapshotID].Summary.Operation, i-1, prev.SnapshotID,
				snaps[prev.SnapshotID].Summary.Operation, prev.TimestampMs-cur.TimestampMs)
		}
	}
	rewrite, runB := -1, -1
	for i, e := range entries {
		props := snaps[e.SnapshotID].Summary.Properties
		if props["sluice.rewrite"] != "" {
			rewrite = i
		}
		if props["sluice.run"] != "" && props["sluice.node"] == "node1" {
			runB = i
		}
	}
	if runB < 0 || rewrite < runB {
		t.Errorf("the rewrite is entry %d of the snapshot log, node B's run entry %d: want the rewrite after B's run", rewrite, runB)
	}

	seen := map[float64]int{}
	for _, r := range tieredRows(t, a, table.Query{}) {
		seen[r["n"].(float64)]++
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("row n=%v read %d times", n, k)
		}
	}
	if len(seen) != 4*50+50 {
		t.Errorf("%d distinct rows, want %d", len(seen), 4*50+50)
	}
}
