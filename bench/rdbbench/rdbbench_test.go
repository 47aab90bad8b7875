package rdbbench

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/sluicedb/sluice/internal/rdbcorpus"
	"github.com/sluicedb/sluice/rdbtool"
)

// benchCorpus is the generated corpus for the go test benchmarks:
// SLUICE_RDB_BENCH_MB (default 50) MB in the default cache dir, made once
// with redis-server and reused. `sluice bench rdb` is the full report (each
// case in its own process, peak RSS); these are for quick profiling:
//
//	go test -run '^$' -bench . -benchmem -cpuprofile cpu.out ./bench/rdbbench/
func benchCorpus(b *testing.B) string {
	b.Helper()
	mb := 50
	if s := os.Getenv("SLUICE_RDB_BENCH_MB"); s != "" {
		mb, _ = strconv.Atoi(s)
	}
	opts := rdbcorpus.Options{SizeMB: mb}
	if _, err := os.Stat(rdbcorpus.Path(opts)); err != nil {
		if _, err := exec.LookPath("redis-server"); err != nil {
			b.Skip("no cached corpus and no redis-server to make one")
		}
	}
	path, err := rdbcorpus.Generate(context.Background(), opts)
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
		if _, err := rdbtool.Export(context.Background(), path, io.Discard, rdbtool.JSONLines, rdbtool.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryCSV(b *testing.B) {
	path := benchCorpus(b)
	for b.Loop() {
		if _, err := rdbtool.Memory(context.Background(), path, io.Discard, rdbtool.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeys(b *testing.B) {
	path := benchCorpus(b)
	for b.Loop() {
		if _, err := rdbtool.Keys(context.Background(), path, io.Discard, rdbtool.Options{}); err != nil {
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
