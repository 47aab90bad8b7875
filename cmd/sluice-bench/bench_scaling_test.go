package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/coldtest"
)

// TestBenchScalingFillsEveryRow runs the real `sluice-bench scaling` binary
// at --cpus 1 on tiny sizes and checks that its table has every row of
// the scaling table (and the range query) with its cell filled: a piece
// left out or failing leaves a row missing or a cell "–" or "error".
func TestBenchScalingFillsEveryRow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	s3, err := coldtest.StartS3(t.TempDir()) // the compaction's S3 server
	coldtest.Require(t, err)
	s3.Stop()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice-bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "scaling", "--cpus", "1", "--duration", "200ms", "--query-rows", "2000", "--compact-rows", "3000", "--parallelism", "20")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench scaling: %v\n%s\n%s", err, out, stderr.String())
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		rows[cells[0]] = cells[1:]
	}
	if h := rows["work"]; len(h) != 1 || h[0] != "1 core" {
		t.Fatalf("header: %q\n%s", h, out)
	}
	for _, want := range []string{
		"HTTP ingest, no column", "same, one Lua column", "ingest rows per CPU-second (no column)",
		"Lua pool, default strategy", "same, `simple-syncpool`", "compaction", "one-partition query", "64-partition range query",
	} {
		var cells []string
		for name, c := range rows {
			if strings.HasPrefix(name, want) {
				cells = c
			}
		}
		if len(cells) != 1 || cells[0] == "" || cells[0] == "–" || strings.HasPrefix(cells[0], "error") {
			t.Errorf("row %q: cells %q", want, cells)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
