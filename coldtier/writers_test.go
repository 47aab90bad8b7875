package coldtier_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// BenchmarkWriters measures N nodes (N = 1, 2, 4; each its own store and
// Compactor) committing to one Iceberg table through the PostgreSQL
// catalog and the REST catalog, each node appending 1000 rows and
// compacting them every SLUICE_WRITERS_INTERVAL (default 2s, 5x the
// 10 s of a deployment, to get more commits in a short run) for
// SLUICE_WRITERS_DURATION (default 30s): commits/s, the commits redone
// after another node committed first (CommitRetries), and the p50/p99 of
// a run (read, upload, commit). At the end every row is in the table once
// (sluice's query). Run it alone:
//
//	go test -run '^$' -bench Writers -benchtime 1x -timeout 30m -v ./coldtier/
func BenchmarkWriters(b *testing.B) {
	interval, duration := 2*time.Second, 30*time.Second
	if v, err := time.ParseDuration(os.Getenv("SLUICE_WRITERS_INTERVAL")); err == nil {
		interval = v
	}
	if v, err := time.ParseDuration(os.Getenv("SLUICE_WRITERS_DURATION")); err == nil {
		duration = v
	}
	for _, catalog := range []string{"postgres", "rest"} {
		for _, n := range []int{1, 2, 4} {
			b.Run(catalog+"/nodes="+strconv.Itoa(n), func(b *testing.B) {
				dir := b.TempDir()
				var cfg coldtier.Config
				switch catalog {
				case "postgres":
					cfg = pgConfig(b, dir, "writers-"+strconv.Itoa(n), "writers")
				case "rest":
					// The fixture's default backend, an in-memory SQLite
					// database, fails concurrent requests
					// (UncheckedSQLException); a file serves them.
					rest, err := coldtest.StartREST(dir, "CATALOG_URI=jdbc:sqlite:file:"+filepath.Join(dir, "rest-catalog.db"))
					coldtest.Require(b, err)
					defer rest.Stop()
					cfg = coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), Catalog: coldtier.Catalog{Type: "rest", URI: rest.URI}}
				}
				writers(b, dir, cfg, n, interval, duration)
			})
		}
	}
}

func writers(b *testing.B, dir string, shared coldtier.Config, n int, interval, duration time.Duration) {
	ctx := context.Background()
	const perRun = 1000
	var (
		mu      sync.Mutex
		runs    []time.Duration
		wg      sync.WaitGroup
		nodes   = make([]*coldtier.Compactor, n)
		tables  = make([]*table.Table, n)
		appends = make([]int, n)
		errs    = make(chan error, n)
	)
	for i := range n {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		st, tb := openTable(b, nodeDir, staticSchema)
		defer st.Close()
		cfg := shared
		cfg.Node, cfg.StateDir = fmt.Sprintf("node%d", i), nodeDir
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		nodes[i], tables[i] = c, tb
	}
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for r := 0; time.Since(start) < duration; r++ {
				fill(b, tables[i], i*10_000_000+r*perRun, perRun, 1)
				appends[i] += perRun
				t0 := time.Now()
				if _, err := nodes[i].Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
					errs <- fmt.Errorf("node %d run %d: %w", i, r, err)
					return
				}
				mu.Lock()
				runs = append(runs, time.Since(t0))
				mu.Unlock()
				<-tick.C
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var retries int64
	want := 0
	for i := range n {
		retries += nodes[i].Counters().CommitRetries.Load()
		want += appends[i]
	}
	seen := map[int64]int{}
	err := nodes[0].QueryValues(ctx, table.Query{Columns: []string{"n"}}, true, func(cols []table.Column, vals []any) error {
		seen[vals[0].(int64)]++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for k, c := range seen {
		if c != 1 {
			b.Fatalf("row n=%d is in the table %d times", k, c)
		}
	}
	if len(seen) != want {
		b.Fatalf("%d rows in the table, want %d", len(seen), want)
	}
	slices.Sort(runs)
	p := func(q float64) time.Duration { return runs[min(len(runs)-1, int(q*float64(len(runs))))] }
	b.ReportMetric(float64(len(runs))/elapsed.Seconds(), "commits/s")
	b.ReportMetric(float64(retries), "retries")
	b.ReportMetric(float64(p(0.5).Milliseconds()), "p50-run-ms")
	b.ReportMetric(float64(p(0.99).Milliseconds()), "p99-run-ms")
	b.Logf("%d nodes, %v interval: %d commits in %v (%.2f/s), %d redone after a conflict, run p50 %v p99 %v max %v, %d rows each once",
		n, interval, len(runs), elapsed.Round(time.Second), float64(len(runs))/elapsed.Seconds(), retries,
		p(0.5).Round(time.Millisecond), p(0.99).Round(time.Millisecond), runs[len(runs)-1].Round(time.Millisecond), want)
}
