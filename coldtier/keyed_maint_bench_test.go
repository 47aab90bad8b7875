package coldtier_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/catalog"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// BenchmarkKeyedColdQuery times a cold query (every row of the Iceberg
// table, all columns, through sluice's two-tier query with the store
// holding no row: remove is on) of a keyed table that took a day of
// updates, scaled down: SLUICE_BENCH_KEYS keys (100,000 by default)
// loaded in one run, then SLUICE_BENCH_RUNS continuous runs (100) each
// changing 1% of the keys picked uniformly at random (a tenth of the
// changes deletes, a deleted key picked again is written again; a new
// version often lands in another day partition), so every run adds data
// files and position delete files. Three tables in one run of the
// benchmark: the same final rows written once (one run), the updated
// table before maintenance, and after it (maintenance rewrites the small
// files, leaving out the deleted rows, and drops the delete files). Each
// reports rows/s, rows per CPU-second of the process, and the table's
// data and delete files. With SLUICE_BENCH_DUCKDB=1 DuckDB's iceberg_scan
// is timed on the same three snapshots (pyiceberg's venv with the
// duckdb-extension wheels). With SLUICE_BENCH_MAINTAIN_EVERY=N
// maintenance also runs during the updates, as a trigger every N runs
// would, placed so that N-1 runs follow the last pass: the table queried
// "before maintenance" is then the worst a query meets under that
// trigger.
//
//	go test -run '^$' -bench KeyedColdQuery -benchtime 10x ./coldtier/
func BenchmarkKeyedColdQuery(b *testing.B) {
	keys := benchEnvInt(b, "SLUICE_BENCH_KEYS", 100_000)
	runs := benchEnvInt(b, "SLUICE_BENCH_RUNS", 100)
	every := 0
	if os.Getenv("SLUICE_BENCH_MAINTAIN_EVERY") != "" {
		every = benchEnvInt(b, "SLUICE_BENCH_MAINTAIN_EVERY", 1)
	}
	ctx := context.Background()
	dir := b.TempDir()
	open := func(name string) (*table.Table, *coldtier.Compactor, coldtier.Config) {
		b.Helper()
		st, err := table.Open(filepath.Join(dir, name, "store"), table.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		tb, err := st.Table(keyedTableConfig)
		if err != nil {
			b.Fatal(err)
		}
		cfg := coldtier.Config{Warehouse: filepath.Join(dir, name, "warehouse"), StateDir: filepath.Join(dir, name), Node: "bench",
			Catalog: coldtier.Catalog{URI: filepath.Join(dir, name, "catalog.db")}}
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return tb, c, cfg
	}
	compact := func(c *coldtier.Compactor) {
		b.Helper()
		if _, err := c.Compact(ctx, time.Now(), coldtier.Options{Continuous: true, Remove: true}); err != nil {
			b.Fatal(err)
		}
	}
	// load appends state's rows grouped by note (a note decides the day),
	// in batches.
	load := func(tb *table.Table, state keyState) {
		b.Helper()
		byNote := map[string][]int64{}
		for n, note := range state {
			byNote[note] = append(byNote[note], n)
		}
		scratch := keyState{}
		for note, ns := range byNote {
			for len(ns) > 0 {
				part := ns[:min(len(ns), 10_000)]
				ns = ns[len(part):]
				scratch.upsert(b, tb, part, note)
			}
		}
	}

	setup := time.Now()
	updated, cu, cfgUpdated := open("updated")
	state := keyState{}
	for n := range int64(keys) {
		state[n] = "v0"
	}
	load(updated, state)
	compact(cu)
	rng := rand.New(rand.NewPCG(1, 2))
	changes := max(keys/100, 1)
	for r := 1; r <= runs; r++ {
		note := "v" + strconv.Itoa(r)
		picked := map[int64]bool{}
		for len(picked) < changes {
			picked[rng.Int64N(int64(keys))] = true
		}
		var ups, dels []int64
		for n := range picked {
			if _, live := state[n]; live && rng.IntN(10) == 0 {
				dels = append(dels, n)
			} else {
				ups = append(ups, n)
			}
		}
		state.upsert(b, updated, ups, note)
		state.remove(b, updated, dels)
		compact(cu)
		if every > 0 && (runs-r)%every == every-1 {
			if _, err := cu.Maintain(ctx, coldtier.MaintainOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	once, co, cfgOnce := open("once")
	load(once, state)
	compact(co)
	b.Logf("%d keys, %d runs of %d changes: %d live keys; set up in %v", keys, runs, changes, len(state), time.Since(setup).Round(time.Millisecond))

	duck := os.Getenv("SLUICE_BENCH_DUCKDB") != ""
	query := func(name string, c *coldtier.Compactor, cfg coldtier.Config) {
		b.Run(name, func(b *testing.B) {
			data, deletes, err := coldtier.FileCounts(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			cpu := processCPU()
			b.ResetTimer()
			for b.Loop() {
				err := c.QueryValues(ctx, table.Query{}, true, func(_ []table.Column, _ []any) error { n++; return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if n != len(state)*b.N {
				b.Fatalf("%d rows in %d queries, want %d each", n, b.N, len(state))
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(n)/(processCPU()-cpu).Seconds(), "rows/CPU-s")
			b.ReportMetric(float64(data), "data-files")
			b.ReportMetric(float64(deletes), "delete-files")
			if duck {
				duckDBScan(b, cfg, len(state))
			}
		})
	}
	query("written-once", co, cfgOnce)
	query("updated/before-maintenance", cu, cfgUpdated)
	ms, err := cu.Maintain(ctx, coldtier.MaintainOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("maintenance: %d files rewritten into %d (%d groups)", ms.FilesRewritten, ms.FilesWritten, ms.Partitions)
	query("updated/after-maintenance", cu, cfgUpdated)
}

func benchEnvInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// duckDBScan times DuckDB's iceberg_scan of the table's current snapshot
// (testdata/duckdb_scan.py: the same columns as sluice's query, read
// and aggregated in DuckDB) and reports its rows/s and rows per
// CPU-second of the Python process (DuckDB's threads included).
func duckDBScan(b *testing.B, cfg coldtier.Config, rows int) {
	b.Helper()
	coldtest.Require(b, pyErr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	loc := catalog.Location{Warehouse: cfg.Warehouse, Catalog: cfg.Catalog}
	if err := loc.Defaults(cfg.StateDir); err != nil {
		b.Fatal(err)
	}
	cat, err := catalog.Open(ctx, loc, nil)
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, itable.Identifier{"sluice", keyedTableConfig.Name})
	if err != nil {
		b.Fatal(err)
	}
	script, err := os.ReadFile("testdata/duckdb_scan.py")
	if err != nil {
		b.Fatal(err)
	}
	out, err := pyPool.Run(ctx, string(script), tbl.MetadataLocation(), strconv.Itoa(max(b.N, 3)))
	if err != nil {
		b.Fatal(err)
	}
	var res struct {
		Available bool
		Why       string
		Rows      int
		Seconds   float64
		CPU       float64
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("duckdb_scan.py: %v: %.300s", err, out)
	}
	if !res.Available {
		b.Logf("DuckDB not timed: %s", res.Why)
		return
	}
	if res.Rows != rows {
		b.Fatalf("DuckDB read %d rows, want %d", res.Rows, rows)
	}
	b.ReportMetric(float64(res.Rows)/res.Seconds, "duckdb-rows/s")
	b.ReportMetric(float64(res.Rows)/res.CPU, "duckdb-rows/CPU-s")
	b.Logf("DuckDB: %.1f ms per scan", 1000*res.Seconds)
}
