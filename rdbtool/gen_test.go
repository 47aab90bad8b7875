package rdbtool

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestGenerateReusesCache(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (scripts/test installs it)")
	}
	opts := GenerateOptions{SizeMB: 1, Dir: t.TempDir()}
	path, err := Generate(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if path != CorpusPath(opts) {
		t.Errorf("Generate wrote %s, CorpusPath says %s", path, CorpusPath(opts))
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
	c, _, err := Count(context.Background(), path, Options{})
	if err != nil || c.Total == 0 {
		t.Errorf("count of the corpus: %d keys, %v", c.Total, err)
	}
	entries, _ := os.ReadDir(opts.Dir)
	if len(entries) != 1 {
		t.Errorf("cache dir holds %d entries (work dirs left behind?)", len(entries))
	}
}
