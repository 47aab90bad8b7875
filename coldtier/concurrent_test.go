package coldtier_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// TestTwoNodesCommitToOneTable has two nodes (two stores, one catalog, one
// Iceberg table) compact day by day at the same time: optimistic
// concurrency makes some commits conflict, iceberg-go retries them on the
// fresh table, and every row of both nodes is in the table exactly once.
func TestTwoNodesCommitToOneTable(t *testing.T) {
	dir := t.TempDir()
	shared := testConfig(t, dir, "two-nodes")
	ctx := context.Background()
	const days = 6
	var (
		wg      sync.WaitGroup
		retries [2]int64
		errs    = make(chan error, 2)
	)
	for node := range 2 {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node%d", node))
		st, tb := openTable(t, nodeDir, staticSchema)
		defer st.Close()
		fill(t, tb, node*100000, 600, days)
		cfg := shared
		cfg.Node = fmt.Sprintf("node%d", node)
		cfg.StateDir = nodeDir
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := 1; d <= days; d++ {
				if _, err := c.Compact(ctx, day0.Add(time.Duration(d)*24*time.Hour), coldtier.Options{Remove: true}); err != nil {
					errs <- fmt.Errorf("node %d day %d: %w", node, d, err)
					return
				}
			}
			retries[node] = c.Counters().CommitRetries.Load()
			if left := normRows(t, tb, table.Query{}); len(left) != 0 {
				errs <- fmt.Errorf("node %d: %d rows left in its store", node, len(left))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v := readIceberg(t, shared, "events")
	seen := map[float64]int{}
	for _, r := range v.PyIceberg {
		seen[r["n"].(float64)]++
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("row n=%v is in the table %d times", n, k)
		}
	}
	if len(seen) != 1200 || len(v.PyIceberg) != 1200 {
		t.Errorf("%d rows (%d distinct), want 1200", len(v.PyIceberg), len(seen))
	}
	if len(v.Snapshots) != 2*days {
		t.Errorf("%d snapshots, want %d (one per run)", len(v.Snapshots), 2*days)
	}
	t.Logf("commit retries: node0 %d, node1 %d", retries[0], retries[1])
}
