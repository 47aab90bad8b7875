package coldtier_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/procmem"
	"github.com/sluicedb/sluice/table"
)

// TestMaintainMemoryBound rewrites one day of 1.6M rows committed in 40
// small runs, in a child process (the test binary), sampling its anonymous
// RSS every 2 ms, and bounds the peak: the rewrite merges the files by key
// reading a page per column of at most 32 files at once (maintain_merge.go)
// and hands batches of at most 32768 rows to the writer, two at a time.
// Measured (2026-11-26, load average ~20): 140 MiB anonymous (156 with 64
// files at once; the rewrite in file order, before the merge, 114-130,
// and 205 with iceberg-go's read defaults); the bound is 160 MiB. What
// remains is the merge's pages, the S3 upload's buffers (the 8 MB file read
// whole; a file over 16 MiB goes in parts, several at once) and Arrow
// batches, doubled by the GC's headroom (docs/cold-tier.md).
//
// With SLUICE_MAINTAIN_BENCH_ROWS=N it rewrites N rows instead (in
// SLUICE_MAINTAIN_BENCH_RUNS runs, default 40) and also logs the figures
// docs/cold-tier.md gives: cold queries over the same rows compacted in one
// run, in the small runs' files and after the rewrite. Not under -race.
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
	runs := 40
	if n, err := strconv.Atoi(os.Getenv("SLUICE_MAINTAIN_BENCH_RUNS")); err == nil && n > 0 {
		runs = n
	}
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

	var beforeRewrite []coldQuery
	if bench != "" {
		beforeRewrite = coldQueries(t, small, cfg, "small files")
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
	// The cold queries over the rewritten table, against the same rows
	// compacted in one run and, before the rewrite, in small commits.
	rewritten := coldQueries(t, small, cfg, "rewritten")
	oneRun := coldQueries(t, one, cfgOne, "one run")
	for i, q := range rewritten {
		t.Logf("%-22s one run %8.2fM rows/s %6.1f ms CPU | small files %8.2fM rows/s (%.2fx one run's time, %.2fx CPU) | rewritten %8.2fM rows/s (%.2fx one run's time, %.2fx CPU)",
			q.name, oneRun[i].rate(), oneRun[i].cpu.Seconds()*1e3,
			beforeRewrite[i].rate(), beforeRewrite[i].wall.Seconds()/oneRun[i].wall.Seconds(), beforeRewrite[i].cpu.Seconds()/oneRun[i].cpu.Seconds(),
			q.rate(), q.wall.Seconds()/oneRun[i].wall.Seconds(), q.cpu.Seconds()/oneRun[i].cpu.Seconds())
	}
}

// coldQuery is the best of 3 runs of one cold query.
type coldQuery struct {
	name      string
	rows      int
	wall, cpu time.Duration // of the best run, by wall time
}

func (q coldQuery) rate() float64 { return float64(q.rows) / q.wall.Seconds() / 1e6 }

// coldQueries runs the benchmark's cold queries (sluice's QueryValues of
// the Iceberg table only) on the table in dir, each best of 3, and logs
// them. The day holds one hour of rows of 7 users.
func coldQueries(t *testing.T, dir string, cfg coldtier.Config, label string) []coldQuery {
	t.Helper()
	ctx := context.Background()
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	files, _ := c.DataFiles(ctx)
	from, to := day0.Add(20*time.Minute), day0.Add(26*time.Minute)
	var out []coldQuery
	for _, q := range []struct {
		name string
		q    table.Query
	}{
		{"all rows", table.Query{}},
		{"one key", table.Query{HashIn: []any{"u3"}}},
		{"range (6 of 60 min)", table.Query{From: from, To: to}},
		{"one key, range", table.Query{HashIn: []any{"u3"}, From: from, To: to}},
	} {
		best := coldQuery{name: q.name, wall: 1 << 62}
		for range 3 {
			n := 0
			cpu0 := processCPU()
			t0 := time.Now()
			if err := c.QueryValues(ctx, q.q, true, func([]table.Column, []any) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			if wall := time.Since(t0); wall < best.wall {
				best.wall, best.cpu, best.rows = wall, processCPU()-cpu0, n
			}
		}
		t.Logf("cold query, %s, %s: %d rows from %d files in %v, %v CPU (%.2fM rows/s, best of 3)", label, q.name, best.rows,
			len(files), best.wall.Round(time.Millisecond), best.cpu.Round(time.Millisecond), best.rate())
		out = append(out, best)
	}
	return out
}

// processCPU is the CPU time (user and system) of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
