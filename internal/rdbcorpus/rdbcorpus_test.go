package rdbcorpus

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/redisproc"
	"github.com/sluicedb/sluice/rdb"
)

func TestGenerateReusesCache(t *testing.T) {
	redisproc.Need(t)
	opts := Options{SizeMB: 1, Dir: t.TempDir()}
	path, err := Generate(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if path != Path(opts) {
		t.Errorf("Generate wrote %s, Path says %s", path, Path(opts))
	}
	st1, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// About the asked size (the payload estimate is rough: within 2x).
	if st1.Size() < 512<<10 || st1.Size() > 2<<20 {
		t.Errorf("1 MB corpus is %d bytes", st1.Size())
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if again, err := Generate(context.Background(), opts); err != nil || again != path {
		t.Fatalf("second Generate: %s, %v", again, err)
	}
	if st, _ := os.Stat(path); !st.ModTime().Equal(old) {
		t.Error("the cached corpus was regenerated")
	}
	opts.Force = true
	if _, err := Generate(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.ModTime().Equal(old) {
		t.Error("Force did not regenerate")
	}
	// The file is a real RDB the parser reads to the end (checksum included).
	p, err := rdb.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := 0
	for p.Next() {
		keys++
	}
	if err := p.Err(); err != nil || keys == 0 {
		t.Errorf("read of the corpus: %d keys, %v", keys, err)
	}
	p.Close()
	entries, _ := os.ReadDir(opts.Dir)
	if len(entries) != 1 {
		t.Errorf("cache dir holds %d entries (work dirs left behind?)", len(entries))
	}
}
