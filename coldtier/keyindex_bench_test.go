package coldtier

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// BenchmarkKeyIndexBytes measures the cold key index of 1M keys (a
// string key like "device-0001234" and an int64 key), 100 data files of
// 10k rows: heap bytes per key (live heap after a GC, with the index
// against without), bytes per key of the saved file, and the time to
// save and to load it. docs/perf/upserts-iceberg.md has the figures.
func BenchmarkKeyIndexBytes(b *testing.B) {
	const keys = 1_000_000
	for _, kind := range []string{"string", "int64"} {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				ix := &keyIndex{keyCols: []string{"id"}, keys: map[string]keyLoc{}}
				for f := range 100 {
					ix.files = append(ix.files, fmt.Sprintf("s3://lake/sluice/devices/data/ts_day=2024-05-01/%05d-0-6b11acc8-7f75-484b-9773-9262388fb10e-00001.parquet", f))
				}
				var key []byte
				for i := range keys {
					key = key[:0]
					if kind == "string" {
						key, _ = appendKey(key, fmt.Sprintf("device-%07d", i))
					} else {
						key, _ = appendKey(key, int64(i)*7919)
					}
					ix.add(key, keyLoc{file: uint32(i / 10_000), pos: uint32(i % 10_000), seq: 1})
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
				heap := float64(ms.HeapAlloc-before) / keys
				path := filepath.Join(b.TempDir(), "ix.bin")
				started := time.Now()
				if err := ix.save(path); err != nil {
					b.Fatal(err)
				}
				saved := time.Since(started)
				fi, err := os.Stat(path)
				if err != nil {
					b.Fatal(err)
				}
				started = time.Now()
				back, err := loadKeyIndex(path)
				if err != nil {
					b.Fatal(err)
				}
				loaded := time.Since(started)
				if len(back.keys) != keys {
					b.Fatalf("loaded %d keys, saved %d", len(back.keys), keys)
				}
				runtime.KeepAlive(ix)
				b.ReportMetric(heap, "heap-B/key")
				b.ReportMetric(float64(fi.Size())/keys, "disk-B/key")
				b.ReportMetric(saved.Seconds(), "save-s")
				b.ReportMetric(loaded.Seconds(), "load-s")
			}
		})
	}
}
