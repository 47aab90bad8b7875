package table

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// TestParallelScanSameAsInline: a query over many blocks answers the same
// rows in the same order whether its blocks are decoded inline (one P) or
// by workers (eight), with and without predicates and limits, including a
// limit that falls inside a block and a corrupt-free early stop.
func TestParallelScanSameAsInline(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "scan", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if err := tb.Append(ctx, benchRows(i, 500, 37)); err != nil {
			t.Fatal(err)
		}
	}
	queries := map[string]Query{
		"all":        {},
		"range":      {From: t0.Add(3 * time.Second), To: t0.Add(25 * time.Second)},
		"where":      {Where: []Predicate{{Column: "latency", Op: Lt, Value: int64(20)}}},
		"keys":       {HashIn: []any{"user-3", "user-30", "user-17"}},
		"limit":      {Limit: 1234},
		"limit-one":  {Limit: 1},
		"cols+limit": {Columns: []string{"n", "user"}, Limit: 5000, Where: []Predicate{{Column: "ok", Op: Eq, Value: true}}},
	}
	run := func(procs int, q Query) [][]any {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		var out [][]any
		err := tb.QueryValues(ctx, q, func(_ []Column, vals []any) error {
			out = append(out, append([]any(nil), vals...))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for name, q := range queries {
		inline, parallel := run(1, q), run(8, q)
		if len(inline) == 0 {
			t.Errorf("%s: no rows", name)
		}
		if !reflect.DeepEqual(inline, parallel) {
			t.Errorf("%s: %d rows inline, %d in parallel, or in another order", name, len(inline), len(parallel))
		}
		if q.Limit > 0 && len(parallel) != q.Limit {
			t.Errorf("%s: %d rows, limit %d", name, len(parallel), q.Limit)
		}
	}
	// An emit error stops the scan and is returned, workers and all.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	stop := fmt.Errorf("enough")
	n := 0
	err = tb.QueryValues(ctx, Query{}, func([]Column, []any) error {
		if n++; n == 777 {
			return stop
		}
		return nil
	})
	if err != stop || n != 777 {
		t.Errorf("emit error: %v after %d rows", err, n)
	}
}

// BenchmarkQueryRange streams a time range over every partition (64
// partitions, 400k rows of 10 columns in ~6,400 blocks): the query whose
// blocks workers decode in parallel. Run with -cpu 1,2,4,8 to see it scale
// (GOMAXPROCS above the machine's cores shows contention, not speed).
func BenchmarkQueryRange(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, b.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "bench", HashBy: "user", SortBy: "ts"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if err := tb.Append(ctx, benchRows(i, 4000, 64)); err != nil {
			b.Fatal(err)
		}
	}
	q := Query{From: t0, To: t0.Add(time.Hour)}
	b.ReportAllocs()
	b.ResetTimer()
	rows := 0
	cpu0 := cpuTime()
	for b.Loop() {
		if err := tb.QueryValues(ctx, q, func([]Column, []any) error { rows++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, rows, cpu0)
}
