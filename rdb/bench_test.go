package rdb

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var (
	benchOnce sync.Once
	benchData []byte
)

// benchRDB is a ~32 MiB synthetic snapshot (see syntheticRDB), built once.
func benchRDB() []byte {
	benchOnce.Do(func() { benchData = syntheticRDB(64000) })
	return benchData
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
	data := benchRDB()
	run := func(name string, mk func() *Parser, visit bool) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
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
