package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/internal/rdbfixture"
	"github.com/sluicedb/sluice/rdbtool"
)

// rdbBenchFile is the snapshot of the RDB ingest benchmarks:
// $SLUICE_RDB_BENCH_FILE (e.g. the corpus of `sluice bench rdb`), else the
// Redis 7.0 fixture.
func rdbBenchFile(b *testing.B) []byte {
	path := os.Getenv("SLUICE_RDB_BENCH_FILE")
	if path == "" {
		path = rdbfixture.Path("redis-7.0.15")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkDecodeRDB is the snapshot-to-rows half of an RDB ingest (parse,
// value JSON, memory estimate, row maps), the rows dropped: with
// BenchmarkIngestRDB it splits the cost between decoding and storing.
func BenchmarkDecodeRDB(b *testing.B) {
	data := rdbBenchFile(b)
	for _, c := range []struct {
		name   string
		filter rdbtool.Filter
	}{{"all", rdbtool.Filter{}}, {"db1", rdbtool.Filter{DBs: []int{1}}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var rows int64
			for b.Loop() {
				d, err := ingest.DecodeRDB(context.Background(), bytes.NewReader(data), ingest.RDBOptions{Filter: c.filter}, func([]ingest.Row) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
				rows = d.Rows
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkIngestRDB is a whole RDB ingest into a fresh store (decode,
// pipeline, synced appends of batches of 1000), without HTTP.
func BenchmarkIngestRDB(b *testing.B) {
	data := rdbBenchFile(b)
	cfg, err := config.Parse([]byte("tables:\n  - name: keys\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		filter rdbtool.Filter
	}{{"all", rdbtool.Filter{}}, {"db1", rdbtool.Filter{DBs: []int{1}}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var rows int
			for b.Loop() {
				b.StopTimer()
				s, err := New(context.Background(), cfg, Options{StorageDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := s.IngestRDB(context.Background(), "keys", bytes.NewReader(data), ingest.RDBOptions{Filter: c.filter})
				if err != nil {
					b.Fatal(err)
				}
				rows = res.Accepted
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
