package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest"
)

const benchConfig = `
tables:
  - name: bench
    hashBy: user
    sortBy: time
    schema:
      - {name: time, type: timestamp}
      - {name: user, type: string}
      - {name: action, type: string}
      - {name: country, type: string}
      - {name: device, type: string}
      - {name: amount, type: float64}
      - {name: score, type: float64}
      - {name: count, type: int64}
      - {name: session, type: int64}
      - {name: ok, type: bool}
`

// benchPartitions is the number of distinct hashBy values in a batch.
var benchPartitions = 10

// BenchmarkIngestBatch is POST /rows without HTTP: decode 1000 ten-field
// rows and Append them (synced), from parallel goroutines like concurrent
// requests. It separates the server's and the store's cost from HTTP's.
func BenchmarkIngestBatch(b *testing.B) {
	cfg, err := config.Parse([]byte(benchConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(context.Background(), cfg, Options{StorageDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var bodies [][]byte
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for n := 0; n < 16; n++ {
		var buf bytes.Buffer
		for i := 0; i < 1000; i++ {
			k := n*1000 + i
			fmt.Fprintf(&buf, `{"time":"%s","user":"u%d","action":"view","country":"SG","device":"web","amount":%d.5,"score":%d.5,"count":%d,"session":%d,"ok":true}`+"\n",
				base.Add(time.Duration(k)*37*time.Millisecond).Format(time.RFC3339Nano), k%benchPartitions, k%500, k%97, k%13, k/7)
		}
		bodies = append(bodies, buf.Bytes())
	}
	b.ReportAllocs()
	b.SetParallelism(2)
	b.ResetTimer()
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := s.Ingest(context.Background(), "bench", bytes.NewReader(bodies[i%len(bodies)]), IngestOptions{Format: ingest.NDJSON}); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "rows/s")
	// Synced commits bound rows/s by the disk's latency; the CPU per row
	// is the figure the work per row moves.
	b.ReportMetric(float64(b.N)*1000/(processCPU()-cpu0).Seconds(), "rows/CPU-s")
}

// processCPU is the process's user+sys CPU time (Pebble's background work
// included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
