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
	t.Parallel()
	dir := t.TempDir()
	twoNodesCommit(t, dir, testConfig(t, dir, "two-nodes"), false)
}

// twoNodesCommit runs two nodes on the shared catalog and table, each
// compacting six days of its own rows one day per run, at the same time;
// with openTogether the nodes also open the catalog and create the table
// at the same time (two servers starting on a new catalog). It checks that
// every row is in the table once, one snapshot per run, and returns the
// commit retries of each node.
func twoNodesCommit(t *testing.T, dir string, shared coldtier.Config, openTogether bool) [2]int64 {
	t.Helper()
	ctx := context.Background()
	const days = 6
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		retries [2]int64
		nodes   [2]*coldtier.Compactor
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
		open := func() (err error) {
			if nodes[node], err = coldtier.Open(ctx, cfg, tb); err != nil {
				return fmt.Errorf("node %d: open: %w", node, err)
			}
			return nil
		}
		if !openTogether {
			if err := open(); err != nil {
				t.Fatal(err)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if openTogether {
				if err := open(); err != nil {
					errs <- err
					return
				}
			}
			c := nodes[node]
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
	defer func() { // before the stores close
		for _, c := range nodes {
			if c != nil {
				c.Close()
			}
		}
	}()
	close(start)
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
	return retries
}
