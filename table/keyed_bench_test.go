package table

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// keyedBenchKeys is the number of distinct keys of the keyed benchmarks.
const keyedBenchKeys = 1_000_000

// keyedRows returns n rows of benchRows' shape with a key column "id":
// the keys first+0..n-1 when zipf is nil, else drawn from it (a skewed
// update stream: a few keys take most updates).
func keyedRows(batch, n int, first int, zipf *rand.Zipf) []Row {
	rows := benchRows(batch, n, 16)
	for i, r := range rows {
		k := first + i
		if zipf != nil {
			k = int(zipf.Uint64())
		}
		r["id"] = fmt.Sprintf("key-%07d", k)
	}
	return rows
}

// loadKeys appends every key once, in 1000-row batches.
func loadKeys(b *testing.B, tb *Table, keys int) {
	ctx := context.Background()
	const n = 1000
	for i := 0; i < keys; i += n {
		if err := tb.Append(ctx, keyedRows(i/n, n, i, nil)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendKeyed appends 1000-row batches of updates of 1M keys
// (Zipf-skewed, s=1.1) to a keyed table that holds every key already, and
// the same batches to an append-only table (mode=plain). It reports the
// key index's bytes per key on disk (after a flush and a compaction), the
// dead-row marks' bytes and the bytes an append writes. keyed-onepart is
// keyed with every row in one partition (hashBy a column the rows lack):
// blocks of 1000 rows, whose marks are large when stored as bitmaps.
func BenchmarkAppendKeyed(b *testing.B) {
	for _, mode := range []string{"plain", "keyed", "keyed-onepart"} {
		b.Run("mode="+mode, func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, b.TempDir())
			defer s.Close()
			cfg := Config{Name: "bench", HashBy: "user", SortBy: "ts"}
			if mode != "plain" {
				cfg.PrimaryKey = []string{"id"}
			}
			if mode == "keyed-onepart" {
				cfg.HashBy = "no_such_column"
			}
			tb, err := s.Table(cfg)
			if err != nil {
				b.Fatal(err)
			}
			loadKeys(b, tb, keyedBenchKeys)
			zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, keyedBenchKeys-1)
			const n = 1000
			batches := make([][]Row, 64)
			for i := range batches {
				batches[i] = keyedRows(keyedBenchKeys/n+i, n, 0, zipf)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			written0 := tb.Stats().BytesWritten
			for i := 0; b.Loop(); i++ {
				if err := tb.Append(ctx, batches[i%len(batches)]); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, b.N*n, cpu0)
			// What an append puts into its batch: blocks, index entries
			// and marks (the write-ahead log's and the memtable's bytes).
			b.ReportMetric(float64(tb.Stats().BytesWritten-written0)/float64(b.N), "written-B/batch")
			b.StopTimer()
			if mode != "plain" {
				if err := s.db.Flush(); err != nil {
					b.Fatal(err)
				}
				lo, hi := keyIndexBounds(tb.id)
				if err := s.db.Compact(lo, hi, true); err != nil {
					b.Fatal(err)
				}
				idx, err := s.db.EstimateDiskUsage(lo, hi)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(idx)/keyedBenchKeys, "index-B/key")
				lo, hi = deadBounds(tb.id)
				marks, err := s.db.EstimateDiskUsage(lo, hi)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(marks), "marks-B")
			}
		})
	}
}

// BenchmarkQueryKeyed scans every row of a keyed table of 100k keys each
// updated 10 times (1M rows stored, 900k of them dead: mode=updated), of
// one whose 100k keys took 900k Zipf-skewed updates (mode=skewed: dead
// rows scattered over the blocks), against the 100k final rows written
// once, to a keyed table (once-keyed) and to an append-only one
// (once-plain).
func BenchmarkQueryKeyed(b *testing.B) {
	const keys, versions, n = 100_000, 10, 1000
	for _, mode := range []string{"updated", "updated-rewritten", "skewed", "skewed-rewritten", "once-keyed", "once-plain"} {
		b.Run("mode="+mode, func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, b.TempDir())
			defer s.Close()
			cfg := Config{Name: "bench", HashBy: "user", SortBy: "ts"}
			if mode != "once-plain" {
				cfg.PrimaryKey = []string{"id"}
			}
			tb, err := s.Table(cfg)
			if err != nil {
				b.Fatal(err)
			}
			first := 0
			rewritten := strings.HasSuffix(mode, "-rewritten")
			mode = strings.TrimSuffix(mode, "-rewritten")
			if mode == "skewed" {
				loadKeys(b, tb, keys)
				zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, keys-1)
				for i := range (versions - 1) * keys / n {
					if err := tb.Append(ctx, keyedRows(keys/n+i, n, 0, zipf)); err != nil {
						b.Fatal(err)
					}
				}
				first = versions // loaded
			}
			if mode != "updated" && mode != "skewed" {
				first = versions - 1
			}
			for v := first; v < versions; v++ {
				for i := 0; i < keys; i += n {
					rows := keyedRows(v*keys/n+i/n, n, i, nil)
					if err := tb.Append(ctx, rows); err != nil {
						b.Fatal(err)
					}
				}
			}
			if rewritten {
				start, cpu0 := time.Now(), cpuTime()
				n, err := tb.RewriteSparseBlocks(ctx, math.MaxUint64)
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("rewrote %d blocks in %v (%v CPU)", n, time.Since(start), cpuTime()-cpu0)
				b.ReportMetric(float64(n), "rewritten-blocks")
				b.ReportMetric(float64(time.Since(start).Milliseconds()), "rewrite-ms")
				b.ReportMetric(float64((cpuTime() - cpu0).Milliseconds()), "rewrite-cpu-ms")
			}
			if err := s.db.Flush(); err != nil {
				b.Fatal(err)
			}
			blocks0 := tb.Stats().BlocksRead
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				rows := 0
				if err := tb.QueryValues(ctx, Query{Columns: []string{"id", "n"}}, func([]Column, []any) error { rows++; return nil }); err != nil {
					b.Fatal(err)
				}
				if rows != keys {
					b.Fatalf("%d rows, want %d", rows, keys)
				}
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/query")
			b.ReportMetric(float64(tb.Stats().BlocksRead-blocks0)/float64(b.N), "blocks/query")
		})
	}
}
