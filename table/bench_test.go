package table

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user + system) the process has used: on a
// machine shared with other work it is far less inflated than wall time,
// so benchmarks also report rows per CPU-second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRate reports rows/s (wall) and rows per CPU-second since cpu0.
func reportRate(b *testing.B, rows int, cpu0 time.Duration) {
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(rows)/cpu.Seconds(), "rows/cpu-s")
	}
}

// benchRows returns a batch of n 10-field rows: event time, partition
// (one of parts), and eight more columns of every type.
func benchRows(batch, n, parts int) []Row {
	rows := make([]Row, n)
	for i := range rows {
		k := batch*n + i
		rows[i] = Row{
			"ts":      t0.Add(time.Duration(k) * time.Millisecond),
			"user":    fmt.Sprintf("user-%d", k%parts),
			"n":       int64(k),
			"amount":  float64(k%1000) / 7,
			"country": [...]string{"SG", "ID", "MY", "TH", "VN", "PH"}[k%6],
			"ok":      k%3 == 0,
			"latency": int64(k % 250),
			"session": fmt.Sprintf("s-%08x", k/10),
			"score":   float64(k%97) * 1.5,
			"path":    [...]string{"/", "/cart", "/pay", "/search?q=shoes"}[k%4],
		}
	}
	return rows
}

// BenchmarkAppend appends 1000-row batches of 10 fields spread over 16
// partitions (16 blocks per batch) or 1000 (one-row blocks: the worst
// case). Each Append is synced: it pays one fsync.
func BenchmarkAppend(b *testing.B) {
	for _, parts := range []int{16, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, b.TempDir())
			defer s.Close()
			tb, err := s.Table(Config{Name: "bench", HashBy: "user", SortBy: "ts"})
			if err != nil {
				b.Fatal(err)
			}
			const n = 1000
			batches := make([][]Row, 64)
			for i := range batches {
				batches[i] = benchRows(i, n, parts)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; b.Loop(); i++ {
				if err := tb.Append(ctx, batches[i%len(batches)]); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, b.N*n, cpu0)
			st := tb.Stats()
			b.ReportMetric(float64(st.BytesWritten)/float64(st.RowsAppended), "stored-B/row")
		})
	}
}

// BenchmarkQueryPartition streams one partition's rows over a time range
// (all 10 columns, no predicate) out of 200k rows in 200 blocks.
func BenchmarkQueryPartition(b *testing.B) {
	for _, proj := range []struct {
		name string
		cols []string
	}{{"all-columns", nil}, {"3-columns", []string{"ts", "n", "amount"}}} {
		b.Run(proj.name, func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, b.TempDir())
			defer s.Close()
			tb, err := s.Table(Config{Name: "bench", HashBy: "user", SortBy: "ts"})
			if err != nil {
				b.Fatal(err)
			}
			for i := range 200 {
				if err := tb.Append(ctx, benchRows(i, 1000, 1)); err != nil {
					b.Fatal(err)
				}
			}
			q := Query{HashIn: []any{"user-0"}, From: t0, To: t0.Add(time.Hour), Columns: proj.cols}
			b.ReportAllocs()
			b.ResetTimer()
			rows := 0
			cpu0 := cpuTime()
			for b.Loop() {
				if err := tb.Query(ctx, q, func(Row) error { rows++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, rows, cpu0)
			b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
		})
		b.Run(proj.name+"/values", func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, b.TempDir())
			defer s.Close()
			tb, err := s.Table(Config{Name: "bench", HashBy: "user", SortBy: "ts"})
			if err != nil {
				b.Fatal(err)
			}
			for i := range 200 {
				if err := tb.Append(ctx, benchRows(i, 1000, 1)); err != nil {
					b.Fatal(err)
				}
			}
			q := Query{HashIn: []any{"user-0"}, From: t0, To: t0.Add(time.Hour), Columns: proj.cols}
			b.ReportAllocs()
			b.ResetTimer()
			rows := 0
			cpu0 := cpuTime()
			for b.Loop() {
				if err := tb.QueryValues(ctx, q, func([]Column, []any) error { rows++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			if rows == 0 {
				b.Fatal("no rows")
			}
			if rows == 0 {
				b.Fatal("no rows")
			}
			reportRate(b, rows, cpu0)
			b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
		})
	}
}

// BenchmarkAppendParallel appends 1000-row batches from 4 goroutines per
// CPU: Pebble commits concurrent synced batches with one fsync
// (group commit), as a server with several ingest workers would.
func BenchmarkAppendParallel(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, b.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "bench", HashBy: "user", SortBy: "ts"})
	if err != nil {
		b.Fatal(err)
	}
	const n = 1000
	batches := make([][]Row, 64)
	for i := range batches {
		batches[i] = benchRows(i, n, 16)
	}
	b.ReportAllocs()
	b.SetParallelism(4)
	b.ResetTimer()
	cpu0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if err := tb.Append(ctx, batches[i%len(batches)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, b.N*n, cpu0)
}

// BenchmarkEncodeBlockText encodes one block of 1000 rows with a wide
// text column (a ~700-byte JSON value per row, as the RDB ingest's value
// column) and a few narrow ones, the payload buffer reused as writeBlocks
// reuses it.
func BenchmarkEncodeBlockText(b *testing.B) {
	const n = 1000
	cols := []colData{{name: "ts", typ: Timestamp}, {name: "key", typ: String}, {name: "memory_bytes", typ: Int64}, {name: "value", typ: JSON}}
	for i := range cols {
		cols[i].vals, cols[i].null = make([]value, n), make([]bool, n)
	}
	idx := make([]int, n)
	total := 0
	for r := range n {
		idx[r] = r
		cols[0].vals[r].i = t0.UnixNano() + int64(r)
		cols[1].vals[r].s = fmt.Sprintf("user:%d:profile", r)
		cols[2].vals[r].i = int64(100 + r*7)
		v := `{"name":"user` + fmt.Sprint(r) + `","tags":[`
		for len(v) < 650+r%100 {
			v += `"word` + fmt.Sprint(len(v)%97) + `",`
		}
		cols[3].vals[r].s = v + `"end"]}`
		total += len(cols[1].vals[r].s) + len(cols[3].vals[r].s) + 16
	}
	b.SetBytes(int64(total))
	var payload []byte
	for b.Loop() {
		payload = encodeBlock(payload[:0], cols, idx)
	}
}
