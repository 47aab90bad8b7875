package rdbtool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzExport feeds mutated RDB files (seeded with the real-server
// fixtures) to Export, both modes, and checks that whatever it writes
// before any error is well-formed JSON Lines: every complete line decodes
// with encoding/json. The parser's own fuzz targets cover the parsing; this
// one covers what rdbtool does with whatever the parser accepts.
func FuzzExport(f *testing.F) {
	for _, name := range []string{"redis-7.0.15.rdb", "redis-6.2.14.rdb", "redis-stack-7.4.1.rdb", "valkey-9.1.2.rdb"} {
		data, err := os.ReadFile(filepath.Join(fixtureDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "in.rdb")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, serial := range []bool{false, true} {
			var out bytes.Buffer
			_, err := Export(context.Background(), path, &out, JSONLines, Options{SkipChecksum: true, NoParallel: serial})
			sc := bufio.NewScanner(&out)
			sc.Buffer(nil, 64<<20)
			var lines [][]byte
			for sc.Scan() {
				lines = append(lines, bytes.Clone(sc.Bytes()))
			}
			if err != nil && len(lines) > 0 {
				lines = lines[:len(lines)-1] // the last line may be cut by the error
			}
			for _, l := range lines {
				var rec map[string]any
				if jerr := json.Unmarshal(l, &rec); jerr != nil {
					t.Fatalf("serial %v: line is not JSON (%v): %.300s", serial, jerr, l)
				}
			}
		}
	})
}
