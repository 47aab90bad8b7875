package rdb

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

var (
	benchOnce      sync.Once
	benchData      []byte
	benchLargeOnce sync.Once
	benchLargeData []byte
)

// benchRDB is a ~32 MiB synthetic snapshot of small values (see
// syntheticRDB), built once: the worst case, element overhead dominates.
func benchRDB() []byte {
	benchOnce.Do(func() { benchData = syntheticRDB(64000) })
	return benchData
}

// benchRDBLarge is a ~40 MiB snapshot of 0.5-2 KiB values (syntheticRDBLarge).
func benchRDBLarge() []byte {
	benchLargeOnce.Do(func() { benchLargeData = syntheticRDBLarge(30000) })
	return benchLargeData
}

// visitAll decodes every value and touches every element.
func visitAll(p *Parser) (n int, err error) {
	fn := func(el *Element) error {
		n += len(el.Member) + len(el.Value)
		return nil
	}
	for p.Next() {
		n += len(p.Entry().Key)
		if p.Entry().Type == String {
			v, err := p.Value()
			if err != nil {
				return n, err
			}
			n += len(v)
			continue
		}
		if err := p.Visit(fn); err != nil {
			return n, err
		}
	}
	return n, p.Err()
}

func BenchmarkParse(b *testing.B) {
	b.Run("small", func(b *testing.B) { benchmarkParse(b, benchRDB()) })
	b.Run("large", func(b *testing.B) { benchmarkParse(b, benchRDBLarge()) })
}

func benchmarkParse(b *testing.B, data []byte) {
	run := func(name string, mk func() *Parser, visit bool) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu := cpuTime()
			defer func() { b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op") }()
			for b.Loop() {
				p := mk()
				if visit {
					if _, err := visitAll(p); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for p.Next() {
				}
				if p.Err() != nil {
					b.Fatal(p.Err())
				}
			}
		})
	}
	rejectAll := func(*Entry) bool { return false }
	run("visit-all/reader", func() *Parser { return NewParser(bytes.NewReader(data), nil) }, true)
	run("visit-all/bytes", func() *Parser { return NewBytesParser(data, nil) }, true)
	run("visit-all/bytes-nocrc", func() *Parser { return NewBytesParser(data, &Options{SkipChecksum: true}) }, true)
	run("keys-only/reader", func() *Parser { return NewParser(bytes.NewReader(data), nil) }, false)
	run("keys-only/bytes", func() *Parser { return NewBytesParser(data, nil) }, false)
	run("reject-all/reader", func() *Parser { return NewParser(bytes.NewReader(data), &Options{Filter: rejectAll}) }, false)
	run("reject-all/bytes", func() *Parser { return NewBytesParser(data, &Options{Filter: rejectAll}) }, false)
	run("reject-all/bytes-nocrc", func() *Parser {
		return NewBytesParser(data, &Options{Filter: rejectAll, SkipChecksum: true})
	}, false)
}

// cpuTime is the CPU time (user and system) the process has used, in
// nanoseconds: beside ns/op it gives a figure a loaded machine (other
// processes taking the cores) distorts less.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkOpen compares Open's memory map with reading the same file
// through the window buffer (the page cache is warm in both).
func BenchmarkOpen(b *testing.B) {
	data := benchRDB()
	path := filepath.Join(b.TempDir(), "bench.rdb")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name   string
		noMmap bool
		filter Filter
	}{
		{"visit-all/mmap", false, nil},
		{"visit-all/read", true, nil},
		{"reject-all/mmap", false, func(*Entry) bool { return false }},
		{"reject-all/read", true, func(*Entry) bool { return false }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				p, err := Open(path, &Options{NoMmap: mode.noMmap, Filter: mode.filter})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := visitAll(p); err != nil {
					b.Fatal(err)
				}
				p.Close()
			}
		})
	}
}

func BenchmarkCRC64(b *testing.B) {
	data := benchRDB()[:1<<20]
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		crc64Update(0, data)
	}
}

// BenchmarkReadBaseline copies the in-memory file through a window-sized buffer
// (what reading it costs at all), for comparison with the parse figures.
func BenchmarkReadBaseline(b *testing.B) {
	data := benchRDB()
	buf := make([]byte, defaultBufferSize)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := bytes.NewReader(data)
		for {
			if _, err := r.Read(buf); err != nil {
				break
			}
		}
	}
}
