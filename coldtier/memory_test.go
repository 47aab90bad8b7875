package coldtier_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/procmem"
)

// TestCompactionMemoryBound compacts a store of one day of N rows and one of
// 8N rows, each twice in a child process (the test binary, as the crash
// tests run it) into the Iceberg table on the S3 server, and samples the
// child's anonymous RSS (RssAnon, every 2 ms); the lower peak of the two
// runs of a size is what counts (a GC that comes late makes a single peak
// jump by 10-15 MiB on a loaded machine). Not VmHWM: that counts the
// executable's file pages too (docs/cold-tier.md). The bounds are literals
// set between what the code measures and what it measures without the
// guards (2026-11-26, lower of two runs): 47 and 76 MiB (+29; +27 to +40 in
// earlier runs); without the wait that holds the row reader to two batches
// 46 and 117 MiB (+71), without maxBatchRows 44 and 112 MiB (+68). So: at
// most 100 MiB, and at most 50 MiB more for 8x the rows of a day. What still
// grows with the rows of a day is bounded by constants: the day's file, held
// whole by the S3 upload, is at most 12 MiB (then a new file starts), and
// the store's blocks are larger. The batch bound itself is checked exactly
// by TestRowReaderHoldsTwoBatches.
func TestCompactionMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("compacts 900k rows in child processes")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory; scripts/test runs this test without -race")
	}
	const (
		small   = 100_000
		growth  = 50 << 20
		ceiling = 100 << 20
	)
	peakSmall := compactChildPeak(t, small)
	peakBig := compactChildPeak(t, 8*small)
	t.Logf("peak anonymous RSS: %d MiB compacting %d rows, %d MiB compacting %d rows",
		peakSmall>>20, small, peakBig>>20, 8*small)
	if peakBig > peakSmall+growth {
		t.Errorf("peak anonymous RSS grew from %d MiB to %d MiB with 8x the rows, want at most %d MiB more",
			peakSmall>>20, peakBig>>20, growth>>20)
	}
	if peakBig > ceiling || peakSmall > ceiling {
		t.Errorf("peak anonymous RSS %d / %d MiB, want at most %d MiB", peakSmall>>20, peakBig>>20, ceiling>>20)
	}
}

// compactChildPeak fills a store with rows rows of one day, compacts a copy
// of it in a child process twice, and returns the lower of the two peaks
// of anonymous RSS.
func compactChildPeak(t *testing.T, rows int) int64 {
	t.Helper()
	dir := t.TempDir()
	st, tb := openTable(t, dir, staticSchema)
	for i := 0; i < rows; i += 50_000 {
		fill(t, tb, i, min(50_000, rows-i), 1)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var peaks []int64
	for run := range 2 {
		runDir := filepath.Join(dir, "run"+strconv.Itoa(run))
		if err := os.CopyFS(filepath.Join(runDir, "store"), os.DirFS(filepath.Join(dir, "store"))); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, runDir, "memory-"+strconv.Itoa(rows)+"-"+strconv.Itoa(run))
		buf, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("the child's config: %v", err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+runDir, childConfigEnv+"="+string(buf))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		peak := procmem.SamplePeak(cmd.Process.Pid, "RssAnon")
		err = cmd.Wait()
		p := peak()
		if err != nil || !strings.Contains(stderr.String(), "child: compaction done") {
			t.Fatalf("child: %v\n%s", err, stderr.String())
		}
		t.Logf("%d rows, run %d: peak anonymous RSS %d MiB", rows, run+1, p>>20)
		peaks = append(peaks, p)
	}
	return slices.Min(peaks)
}
