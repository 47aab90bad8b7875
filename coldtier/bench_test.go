package coldtier_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// BenchmarkColdQuery times the cold read path alone: 100,000 rows of
// every column type over 4 days, compacted once into a local-directory
// warehouse, then a query of the whole range (all cold) per iteration.
// Rerun a profile with
//
//	go test -run XXX -bench ColdQuery -benchtime 20x -cpuprofile cold.prof ./coldtier
func BenchmarkColdQuery(b *testing.B) {
	dir := b.TempDir()
	st, tb := openTable(b, dir, staticSchema)
	defer st.Close()
	const rows = 100_000
	fill(b, tb, 0, rows, 4)
	ctx := context.Background()
	c, err := coldtier.Open(ctx, coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "bench"}, tb)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Compact(ctx, day0.Add(96*time.Hour), coldtier.Options{Remove: true}); err != nil {
		b.Fatal(err)
	}
	q := table.Query{From: day0, To: day0.Add(96 * time.Hour)}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		err := c.QueryValues(ctx, q, true, func(_ []table.Column, _ []any) error { n++; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	if n != rows*b.N {
		b.Fatalf("%d rows in %d queries, want %d each", n, b.N, rows)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
}
