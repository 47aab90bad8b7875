package main

import (
	"github.com/sluicedb/sluice/internal/redisproc"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRDBSmall runs the real `sluice-bench rdb` binary end to end on a
// tiny corpus: redis-server generates it, each case runs in a child process.
func TestBenchRDBSmall(t *testing.T) {
	redisproc.Need(t) // fails under CI=true without redis-server, skips otherwise
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice-bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cache := filepath.Join(dir, "cache")
	cmd := exec.Command(bin, "rdb", "--size-mb", "2", "--runs", "1", "--cache-dir", cache,
		"--cases", "read-file,keys-only,export-jsonl")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench rdb: %v\n%s", err, out)
	}
	for _, want := range []string{"| read-file |", "| keys-only |", "| export-jsonl |", "peak RSS", "load average"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	rdbs, _ := filepath.Glob(filepath.Join(cache, "*.rdb"))
	if len(rdbs) != 1 {
		t.Fatalf("corpus files in the cache: %v", rdbs)
	}
	// The corpus is a real RDB with several databases: count it, through
	// the hidden sluice command (the kafka report's nodes run the same way).
	count := exec.Command(bin, "sluice", "rdb", "count", "--no-progress", rdbs[0])
	var stderr strings.Builder
	count.Stderr = &stderr
	stdoutb, err := count.Output()
	stdout := string(stdoutb)
	if err != nil || !strings.Contains(stdout, "\n1    all") || !strings.Contains(stdout, "\n3    all") {
		t.Errorf("count of the corpus: %v %s\n%s", err, stderr.String(), stdout)
	}
}
