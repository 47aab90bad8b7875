package rdbtool

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// benchCorpus is the generated corpus for the go test benchmarks:
// SLUICE_RDB_BENCH_MB (default 50) MB in the default cache dir, made once
// with redis-server and reused. `sluice bench rdb` is the full report (each
// case in its own process, peak RSS); these are for quick profiling:
//
//	go test -run '^$' -bench . -benchmem -cpuprofile cpu.out ./rdbtool/
func benchCorpus(b *testing.B) string {
	b.Helper()
	mb := 50
	if s := os.Getenv("SLUICE_RDB_BENCH_MB"); s != "" {
		mb, _ = strconv.Atoi(s)
	}
	opts := GenerateOptions{SizeMB: mb}
	if _, err := os.Stat(CorpusPath(opts)); err != nil {
		if _, err := exec.LookPath("redis-server"); err != nil {
			b.Skip("no cached corpus and no redis-server to make one")
		}
	}
	path, err := Generate(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	b.ReportAllocs()
	return path
}

func BenchmarkExportJSONL(b *testing.B) {
	path := benchCorpus(b)
	for b.Loop() {
		if _, err := Export(context.Background(), path, io.Discard, JSONLines, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryCSV(b *testing.B) {
	path := benchCorpus(b)
	for b.Loop() {
		if _, err := Memory(context.Background(), path, io.Discard, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeys(b *testing.B) {
	path := benchCorpus(b)
	for b.Loop() {
		if _, err := Keys(context.Background(), path, io.Discard, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVisitAll(b *testing.B) {
	path := benchCorpus(b)
	for b.Loop() {
		if _, _, err := visitAll(path, false); err != nil {
			b.Fatal(err)
		}
	}
}
