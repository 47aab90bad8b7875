package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicedb/sluice/table"
)

// BenchmarkCompact writes 100k 6-column rows (2 days, 4 partitions) from
// the store to Parquet, keeping the store (each iteration uses a fresh
// output directory and resets nothing else: the watermark mark is cleared
// by using a new table per iteration).
func BenchmarkCompact(b *testing.B) {
	ctx := context.Background()
	s, err := table.Open(b.TempDir(), table.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const rows = 100_000
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		tb, err := s.Table(table.Config{Name: fmt.Sprintf("t%d", i), HashBy: "user", SortBy: "ts"})
		if err != nil {
			b.Fatal(err)
		}
		for batch := range rows / 1000 {
			var rs []table.Row
			for j := range 1000 {
				k := batch*1000 + j
				rs = append(rs, table.Row{
					"ts": day0.Add(time.Duration(k) * 1700 * time.Millisecond), "user": fmt.Sprintf("u%d", k%4),
					"n": int64(k), "f": float64(k) / 3, "ok": k%2 == 0, "s": fmt.Sprintf("v%d", k%100),
				})
			}
			if err := tb.Append(ctx, rs); err != nil {
				b.Fatal(err)
			}
		}
		out := b.TempDir()
		b.StartTimer()
		st, err := Compact(ctx, tb, out, day0.Add(72*time.Hour), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if st.Rows != rows {
			b.Fatalf("compacted %d rows", st.Rows)
		}
	}
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
}
