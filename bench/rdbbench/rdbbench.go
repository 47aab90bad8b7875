// Package rdbbench is `sluice bench rdb`: it runs each case (read the file,
// parse it, visit every element, skip every value, export JSON Lines, the
// memory report) on a generated corpus (internal/rdbcorpus) in a child
// process of its own, so peak RSS and CPU time are that case's, and prints
// the table docs/rdb.md reports.
package rdbbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedb/sluice/internal/rdbcorpus"
	"github.com/sluicedb/sluice/rdb"
	"github.com/sluicedb/sluice/rdbtool"
)

// BenchCases are the cases `sluice bench rdb` runs, in order.
var BenchCases = []string{"cat", "read-file", "visit-all", "visit-all-mmap", "keys-only", "filter-none", "filter-none-mmap", "export-jsonl", "export-jsonl-serial", "memory-csv"}

// benchCaseDoc says what each case measures (the table's first column).
var benchCaseDoc = map[string]string{
	"cat":                 "cat FILE > /dev/null (the cat binary, run from the case's process)",
	"read-file":           "read the file (1 MiB reads to nowhere, like cat > /dev/null)",
	"visit-all":           "parse, visiting every element of every value",
	"keys-only":           "key scan, every value skipped undecoded",
	"filter-none":         "all-rejecting filter (parser filter returns false)",
	"visit-all-mmap":      "visit-all, file memory-mapped (rdb.Open)",
	"filter-none-mmap":    "filter-none, file memory-mapped (rdb.Open)",
	"export-jsonl":        "JSON Lines export to /dev/null (parse and JSON writing on 2 goroutines)",
	"export-jsonl-serial": "JSON Lines export to /dev/null, one goroutine (--no-parallel)",
	"memory-csv":          "memory report CSV to /dev/null",
}

// CaseResult is one case's measurement, made inside the child process that
// ran it (so PeakRSS is that case's own).
type CaseResult struct {
	Case     string
	Bytes    int64 // file size
	Keys     int64 // keys seen (0 for filter-none and read-file)
	Elements int64 // elements visited (visit-all)
	Elapsed  time.Duration
	CPU      time.Duration // user+system CPU time of the run, all threads (GC, CRC helper included)
	// ThreadCPU is the CPU time of the OS thread running the case (the
	// parsing loop), locked to it for the run.
	ThreadCPU time.Duration
	// StageCPU (export-jsonl only): CPU time of the parsing goroutine's and
	// the writer goroutine's threads.
	StageCPU   [2]time.Duration `json:",omitempty"`
	TotalAlloc uint64           // bytes allocated during the run (runtime.MemStats.TotalAlloc delta)
	Mallocs    uint64
	PeakRSS    int64 // bytes, from getrusage(RUSAGE_SELF).ru_maxrss at the end of the run
}

// MBps is the throughput in MB/s (10^6 bytes per second), the unit of the
// peers' published figures.
func (r CaseResult) MBps() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// RunBenchCase runs one case on the RDB file at path in this process. If
// cpuProfile is not empty a CPU profile of the run is written there.
func RunBenchCase(ctx context.Context, name, path, cpuProfile string) (CaseResult, error) {
	st, err := os.Stat(path)
	if err != nil {
		return CaseResult{}, err
	}
	res := CaseResult{Case: name, Bytes: st.Size()}
	// Warm the page cache, as the peers' figures are "warm cache".
	if err := readFile(path); err != nil {
		return res, err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile()
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// The case runs on one locked OS thread so its own CPU time can be told
	// from the helpers' (GC, the parser's CRC goroutine, the export writer).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpuBefore, threadBefore := cpuTime(), threadCPU()
	start := time.Now()
	switch name {
	case "read-file":
		err = readFile(path)
	case "cat":
		cmd := exec.Command("cat", path)
		cmd.Stdout = nil // /dev/null
		err = cmd.Run()
		if err == nil {
			// The child's CPU time is not in this process's rusage.
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
		}
	case "visit-all":
		res.Keys, res.Elements, err = visitAll(path, false)
	case "visit-all-mmap":
		res.Keys, res.Elements, err = visitAll(path, true)
	case "keys-only":
		res.Keys, err = keysOnly(path, nil, false)
	case "filter-none":
		_, err = keysOnly(path, func(*rdb.Entry) bool { return false }, false)
	case "filter-none-mmap":
		_, err = keysOnly(path, func(*rdb.Entry) bool { return false }, true)
	case "export-jsonl", "export-jsonl-serial", "memory-csv":
		var null *os.File
		null, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return res, err
		}
		defer null.Close()
		var s rdbtool.Stats
		switch name {
		case "export-jsonl":
			s, err = rdbtool.Export(ctx, path, null, rdbtool.JSONLines, rdbtool.Options{StageCPU: &res.StageCPU})
		case "export-jsonl-serial":
			s, err = rdbtool.Export(ctx, path, null, rdbtool.JSONLines, rdbtool.Options{NoParallel: true})
		default:
			s, err = rdbtool.Memory(ctx, path, null, rdbtool.Options{})
		}
		res.Keys = s.Keys
	default:
		return res, fmt.Errorf("rdbbench: unknown bench case %q", name)
	}
	res.Elapsed = time.Since(start)
	if name == "cat" {
		res.ThreadCPU = res.CPU
	} else {
		res.CPU = cpuTime() - cpuBefore
		res.ThreadCPU = threadCPU() - threadBefore
	}
	runtime.ReadMemStats(&after)
	res.TotalAlloc = after.TotalAlloc - before.TotalAlloc
	res.Mallocs = after.Mallocs - before.Mallocs
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		res.PeakRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
	return res, err
}

// threadCPU is the CPU time of the calling OS thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUMBps is the throughput per CPU-second: on a shared, loaded machine the
// wall-clock figure includes time spent waiting for a core, this does not.
func (r CaseResult) CPUMBps() float64 {
	if r.CPU <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.CPU.Seconds()
}

func readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// benchParser opens path through a 1 MiB read window, or memory-mapped.
func benchParser(path string, filter rdb.Filter, mmap bool) (*rdb.Parser, error) {
	return rdb.Open(path, &rdb.Options{BufferSize: 1 << 20, Filter: filter, NoMmap: !mmap})
}

func visitAll(path string, mmap bool) (keys, elements int64, err error) {
	p, err := benchParser(path, nil, mmap)
	if err != nil {
		return 0, 0, err
	}
	defer p.Close()
	var touched int64
	visit := func(el *rdb.Element) error {
		elements++
		touched += int64(len(el.Member) + len(el.Value) + len(el.Fields))
		return nil
	}
	for p.Next() {
		keys++
		e := p.Entry()
		if e.Type == rdb.String {
			v, err := p.Value()
			if err != nil {
				return keys, elements, err
			}
			touched += int64(len(v))
			continue
		}
		if err := p.Visit(visit); err != nil {
			return keys, elements, err
		}
	}
	_ = touched
	return keys, elements, p.Err()
}

func keysOnly(path string, filter rdb.Filter, mmap bool) (keys int64, err error) {
	p, err := benchParser(path, filter, mmap)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	for p.Next() {
		keys++
	}
	return keys, p.Err()
}

// BenchOptions configures RunBench.
type BenchOptions struct {
	Corpus rdbcorpus.Options
	// Cases to run (default BenchCases).
	Cases []string
	// Runs per case; the fastest run is reported (default 3).
	Runs int
	// ProfileDir, if set, receives <case>.pprof CPU profiles (last run).
	ProfileDir string
	// Child returns the command that runs one case in a fresh process and
	// prints its CaseResult as JSON on stdout (the CLI re-executes itself
	// with a hidden flag). Required.
	Child func(name, path, cpuProfile string) *exec.Cmd
	// Log receives progress lines.
	Log io.Writer
}

// BenchReport is what RunBench measured, and on what.
type BenchReport struct {
	Corpus     string // path of the RDB file
	Size       int64  // its size in bytes
	Results    []CaseResult
	CPUs       int
	GoVersion  string
	LoadBefore string // /proc/loadavg before and after: the machine is shared
	LoadAfter  string
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// RunBench generates (or reuses) the corpus and runs every case Runs times,
// each run in its own child process, returning the best run of each case.
func RunBench(ctx context.Context, opts BenchOptions) (BenchReport, error) {
	rep := BenchReport{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	path, results, err := runBench(ctx, opts, &rep)
	rep.Corpus, rep.Results = path, results
	if st, serr := os.Stat(path); serr == nil {
		rep.Size = st.Size()
	}
	rep.LoadAfter = loadAvg()
	return rep, err
}

func runBench(ctx context.Context, opts BenchOptions, rep *BenchReport) (string, []CaseResult, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Corpus.Log == nil {
		opts.Corpus.Log = opts.Log
	}
	if len(opts.Cases) == 0 {
		opts.Cases = BenchCases
	}
	if opts.Runs <= 0 {
		opts.Runs = 3
	}
	path, err := rdbcorpus.Generate(ctx, opts.Corpus)
	if err != nil {
		return "", nil, err
	}
	var results []CaseResult
	rep.LoadBefore = loadAvg()
	for _, name := range opts.Cases {
		var best CaseResult
		for run := 0; run < opts.Runs; run++ {
			prof := ""
			if opts.ProfileDir != "" && run == opts.Runs-1 {
				prof = fmt.Sprintf("%s/%s.pprof", opts.ProfileDir, name)
			}
			cmd := opts.Child(name, path, prof)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil {
				return path, results, fmt.Errorf("rdbbench: bench case %s: %v: %s", name, err, errOut.String())
			}
			var r CaseResult
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				return path, results, fmt.Errorf("rdbbench: bench case %s: bad child output %q: %w", name, out.String(), err)
			}
			// The child's own getrusage is authoritative; the parent's view
			// of the child (ru_maxrss of the reaped process) is the same
			// number and a cross-check.
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss*1024 > r.PeakRSS {
				r.PeakRSS = ru.Maxrss * 1024
			}
			fmt.Fprintf(opts.Log, "%-13s run %d: %7.1f MB/s  %s\n", name, run+1, r.MBps(), r.Elapsed.Round(time.Millisecond))
			if run == 0 || r.Elapsed < best.Elapsed {
				peak := max(best.PeakRSS, r.PeakRSS)
				best = r
				best.PeakRSS = peak
			} else {
				best.PeakRSS = max(best.PeakRSS, r.PeakRSS)
			}
		}
		results = append(results, best)
	}
	return path, results, nil
}

// WriteBenchTable writes the report: what was measured on, then a Markdown
// table. ns/key and B/key divide by the keys in the file (for the cases that
// see none, too).
func WriteBenchTable(w io.Writer, rep BenchReport) {
	results := rep.Results
	fmt.Fprintf(w, "corpus: %s (%.1f MB)\n", rep.Corpus, float64(rep.Size)/1e6)
	fmt.Fprintf(w, "machine: %d CPUs, %s, load average before %s, after %s (shared with other builds)\n\n",
		rep.CPUs, rep.GoVersion, rep.LoadBefore, rep.LoadAfter)
	var keys int64
	for _, r := range results {
		keys = max(keys, r.Keys)
	}
	fmt.Fprintln(w, "| case | what | MB/s | MB per CPU-s | MB per thread CPU-s | ns/key | B alloc/key | TotalAlloc/byte | allocs | peak RSS MB |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		nsKey, bKey := "-", "-"
		if keys > 0 && r.Case != "read-file" && r.Case != "cat" {
			nsKey = fmt.Sprintf("%.0f", float64(r.Elapsed.Nanoseconds())/float64(keys))
			bKey = fmt.Sprintf("%.2f", float64(r.TotalAlloc)/float64(keys))
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | %.0f | %s | %s | %.5f | %d | %.1f |\n", r.Case, benchCaseDoc[r.Case], r.MBps(), r.CPUMBps(),
			float64(r.Bytes)/1e6/max(r.ThreadCPU, time.Millisecond).Seconds(), nsKey, bKey, float64(r.TotalAlloc)/float64(r.Bytes), r.Mallocs, float64(r.PeakRSS)/(1<<20))
	}
	for _, r := range results {
		if slowest := max(r.StageCPU[0], r.StageCPU[1]); slowest > 0 {
			// Two idle cores: no faster than the slowest stage, nor than
			// all the CPU work (GC and the CRC helper too) spread on two.
			bound := max(slowest, r.CPU/2)
			fmt.Fprintf(w, "\n%s: parsing goroutine %.2fs CPU, writer goroutine %.2fs CPU, process %.2fs CPU: on two idle cores at most %.0f MB/s\n",
				r.Case, r.StageCPU[0].Seconds(), r.StageCPU[1].Seconds(), r.CPU.Seconds(), float64(r.Bytes)/1e6/bound.Seconds())
		}
	}
}
