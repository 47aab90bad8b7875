package coldtier_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCompactionMemoryBound compacts a store of one day of N rows and one of
// 4N rows, each in a child process (the test binary, as the crash tests
// run it) into the Iceberg table on the S3 server, and samples the child's
// anonymous RSS (RssAnon, every 2 ms): the peak stays under an absolute
// bound and grows little with 4x the rows. Not VmHWM: that counts the
// executable's file pages too (docs/cold-tier.md). What still grows with
// the rows of a day is bounded by constants: the day's file, held whole by
// the S3 upload, is at most 12 MiB (then a new file starts), and the
// store's blocks are larger. Measured: 56-58 MiB and 75-77 MiB (+19); with
// the reader not waiting for the writer to release its batches (iceberg-go
// then queues them) 59 and 98 MiB (+39).
func TestCompactionMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("compacts 750k rows in child processes")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory; scripts/test runs this test without -race")
	}
	const (
		small   = 150_000
		growth  = 30 << 20
		ceiling = 128 << 20
	)
	peakSmall := compactChildPeak(t, small)
	peakBig := compactChildPeak(t, 4*small)
	t.Logf("peak anonymous RSS: %d MiB compacting %d rows, %d MiB compacting %d rows",
		peakSmall>>20, small, peakBig>>20, 4*small)
	if peakBig > peakSmall+growth {
		t.Errorf("peak anonymous RSS grew from %d MiB to %d MiB with 4x the rows, want at most %d MiB more",
			peakSmall>>20, peakBig>>20, growth>>20)
	}
	if peakBig > ceiling || peakSmall > ceiling {
		t.Errorf("peak anonymous RSS %d / %d MiB, want at most %d MiB", peakSmall>>20, peakBig>>20, ceiling>>20)
	}
}

// compactChildPeak fills a store with rows rows of one day and returns the
// peak anonymous RSS of a child process compacting it.
func compactChildPeak(t *testing.T, rows int) int64 {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "memory-"+strconv.Itoa(rows))
	st, tb := openTable(t, dir, staticSchema)
	for i := 0; i < rows; i += 50_000 {
		fill(t, tb, i, min(50_000, rows-i), 1)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	buf, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childConfigEnv+"="+string(buf))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := sampleRssAnon(cmd.Process.Pid)
	err := cmd.Wait()
	p := peak()
	if err != nil || !strings.Contains(stderr.String(), "child: compaction done") {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	return p
}

// sampleRssAnon samples RssAnon of process pid every 2 ms until the
// returned function is called (after the process ended), which returns the
// largest value seen.
func sampleRssAnon(pid int) func() int64 {
	var peak atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			if b, err := os.ReadFile(path); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
						kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
						if err == nil && kb<<10 > peak.Load() {
							peak.Store(kb << 10)
						}
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
