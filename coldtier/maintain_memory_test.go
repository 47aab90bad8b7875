package coldtier_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/procmem"
	"github.com/sluicedb/sluice/table"
)

// TestMaintainMemoryBound rewrites one day of 1.6M rows committed in 40
// small runs, in a child process (the test binary), sampling its anonymous
// RSS every 2 ms, and bounds the peak: the rewrite reads with one worker,
// batches of at most 32768 rows and two batches queued before the writer
// (iceberg-go's defaults: GOMAXPROCS workers, the table's batch size, 64
// batches queued). Measured (2026-11-26, load average 20-30): 114-130 MiB
// with these settings, 205 MiB with iceberg-go's defaults; the bound, 160
// MiB, sits between. What remains is mostly the S3 upload's buffers (the
// 8 MB file read whole; a file over 16 MiB goes in parts, several at once)
// and Arrow batches, doubled by the GC's headroom (docs/cold-tier.md).
//
// With SLUICE_MAINTAIN_BENCH_ROWS=N it rewrites N rows instead and also
// logs the figures docs/cold-tier.md gives: the cold query over the
// rewritten table against the same rows compacted in one run. Not under
// -race.
func TestMaintainMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("compacts and rewrites 400k rows")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory; scripts/test runs this test without -race")
	}
	const ceiling = 160 << 20
	rows := 1_600_000
	bench := os.Getenv("SLUICE_MAINTAIN_BENCH_ROWS")
	if bench != "" {
		rows, _ = strconv.Atoi(bench)
	}
	const runs = 40
	per := rows / runs
	ctx := context.Background()
	dir := t.TempDir()
	small, one := filepath.Join(dir, "small"), filepath.Join(dir, "one")
	prefix := "maintain-memory-" + strconv.Itoa(rows)
	cfg := testConfig(t, small, prefix)
	cfgOne := testConfig(t, one, prefix+"-one")

	st, tb := openTable(t, small, staticSchema)
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	smallCommits(t, tb, c, 0, runs, per, 1)
	c.Close()
	st.Close()
	if bench != "" {
		st, tb = openTable(t, one, staticSchema)
		for i := 0; i < rows; i += 50_000 {
			fill(t, tb, i, min(50_000, rows-i), 1)
		}
		c, err = coldtier.Open(ctx, cfgOne, tb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
			t.Fatal(err)
		}
		c.Close()
		st.Close()
	}

	opts := coldtier.MaintainOptions{NoExpire: true}
	cb, _ := json.Marshal(cfg)
	ob, _ := json.Marshal(opts)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), maintainChildEnv+"="+small, childConfigEnv+"="+string(cb), maintainOptsEnv+"="+string(ob))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	anon := procmem.SamplePeak(cmd.Process.Pid, "RssAnon")
	hwm := procmem.SamplePeak(cmd.Process.Pid, "VmHWM")
	err = cmd.Wait()
	wall := time.Since(start)
	peakAnon, peakHWM := anon(), hwm()
	if err != nil || !strings.Contains(stderr.String(), "child: maintain done") {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	t.Logf("rewrite of %d rows in %d files (child process, with its start and the store's open): %v wall (%.0f rows/s), %v CPU (%.0f rows per CPU-second); peak RSS (VmHWM) %d MiB, peak anonymous RSS %d MiB",
		rows, runs, wall.Round(time.Millisecond), float64(rows)/wall.Seconds(), cpu.Round(time.Millisecond), float64(rows)/cpu.Seconds(), peakHWM>>20, peakAnon>>20)
	if peakAnon > ceiling {
		t.Errorf("peak anonymous RSS %d MiB during the rewrite, want at most %d MiB", peakAnon>>20, ceiling>>20)
	}

	if bench == "" {
		return
	}
	// The cold query over the rewritten table and over the same rows
	// compacted in one run.
	for _, side := range []struct {
		name string
		dir  string
		cfg  coldtier.Config
	}{{"rewritten", small, cfg}, {"one run", one, cfgOne}} {
		st, tb := openTable(t, side.dir, staticSchema)
		c, err := coldtier.Open(ctx, side.cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		files, _ := c.DataFiles(ctx)
		for _, q := range []struct {
			name string
			q    table.Query
		}{{"all rows", table.Query{}}, {"one key", table.Query{HashIn: []any{"u3"}}}} {
			best := time.Duration(1 << 62)
			var n int
			for range 3 {
				n = 0
				t0 := time.Now()
				if err := c.QueryValues(ctx, q.q, true, func([]table.Column, []any) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				best = min(best, time.Since(t0))
			}
			t.Logf("cold query, %s, %s: %d rows from %d files in %v (%.2fM rows/s, best of 3)", side.name, q.name, n, len(files), best.Round(time.Millisecond), float64(n)/best.Seconds()/1e6)
		}
		c.Close()
		st.Close()
	}
}
