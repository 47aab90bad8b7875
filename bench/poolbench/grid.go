package poolbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cell is one benchmark of the grid, run in a process of its own.
type Cell struct {
	Strategy   string        `json:"strategy"`
	Mode       Mode          `json:"mode"`
	Goroutines int           `json:"goroutines"`
	CPUs       int           `json:"cpus"`
	Duration   time.Duration `json:"duration"`
	Count      int           `json:"count"`
}

func (c Cell) String() string {
	return fmt.Sprintf("%s/%s/g=%d/cpu=%d", c.Strategy, c.Mode, c.Goroutines, c.CPUs)
}

// Result is what one cell measured. NsPerOp is the median over Count runs;
// CPU and RSS come from the child process's own rusage, so they are that
// cell's alone.
type Result struct {
	Cell
	NsPerOp float64 `json:"ns_per_op"`
	// CPUNsPerOp is CPU time (all cores) per op during the measured run.
	CPUNsPerOp float64 `json:"cpu_ns_per_op"`
	// PBusy is the share of the Go scheduler's P time that was not idle
	// during the measured run (runtime/metrics): how well the strategy keeps
	// GOMAXPROCS busy, whatever share of the machine the OS gave the child.
	PBusy float64 `json:"p_busy"`
	// Waits is the share of calls that had to wait for a VM and VMs the VMs
	// the pool created (luavm's strategies only; the benchmark's waits/op
	// and vms metrics).
	Waits float64 `json:"waits_per_op"`
	// Locks is the share of acquisitions and releases that took the pool's
	// lock instead of a P's slot (luavm.ScriptStats.PoolLocks per call).
	Locks       float64 `json:"locks_per_op"`
	VMs         float64 `json:"vms"`
	BytesPerOp  int64   `json:"bytes_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	Ops         int     `json:"ops"`
	// CPUAvg is user+system CPU time over wall time of the child (100 = one
	// core busy); CPUPeak the highest such rate over a 250ms window.
	CPUAvg  float64 `json:"cpu_avg"`
	CPUPeak float64 `json:"cpu_peak"`
	// MaxRSS is the child's peak resident set, bytes.
	MaxRSS int64  `json:"max_rss"`
	Err    string `json:"err,omitempty"`
}

// RunChild runs one cell in this process and writes its Result (without the
// rusage fields, which the parent fills in) as JSON to w. It is what the
// hidden child mode of `sluice bench pool` calls. A short calibration run
// picks the op count; each measured run then has a fixed count, so the CPU
// time this process spent during it (getrusage) can be divided by its ops:
// CPUNsPerOp, which a busy machine inflates far less than wall ns/op.
func RunChild(cell Cell, w io.Writer) error {
	testing.Init()
	fn, err := Bench(cell.Strategy, cell.Mode, cell.Goroutines)
	if err != nil {
		return err
	}
	calib := min(cell.Duration/5, 200*time.Millisecond)
	if err := flag.CommandLine.Set("test.benchtime", calib.String()); err != nil {
		return err
	}
	r := testing.Benchmark(fn)
	if r.N == 0 {
		return fmt.Errorf("poolbench: cell %s failed (see stderr)", cell)
	}
	n := int(float64(cell.Duration) / max(float64(r.T)/float64(r.N), 1))
	n = max(n, 1)
	if err := flag.CommandLine.Set("test.benchtime", fmt.Sprintf("%dx", n)); err != nil {
		return err
	}
	type run struct {
		r     testing.BenchmarkResult
		cpuNs float64
		busy  float64
	}
	var runs []run
	for range max(cell.Count, 1) {
		before := selfCPU()
		idle0, total0 := schedCPU()
		r := testing.Benchmark(fn)
		if r.N == 0 {
			return fmt.Errorf("poolbench: cell %s failed (see stderr)", cell)
		}
		idle1, total1 := schedCPU()
		busy := 0.0
		if total1 > total0 {
			busy = 100 * (1 - (idle1-idle0)/(total1-total0))
		}
		// testing.Benchmark runs the body once with N=1 before the N run.
		runs = append(runs, run{r, float64(selfCPU()-before) / float64(r.N+1), busy})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].r.NsPerOp() < runs[j].r.NsPerOp() })
	med := runs[len(runs)/2]
	res := Result{
		Cell:        cell,
		NsPerOp:     float64(med.r.T.Nanoseconds()) / float64(med.r.N),
		CPUNsPerOp:  med.cpuNs,
		PBusy:       med.busy,
		Waits:       med.r.Extra["waits/op"],
		Locks:       med.r.Extra["locks/op"],
		VMs:         med.r.Extra["vms"],
		BytesPerOp:  med.r.AllocedBytesPerOp(),
		AllocsPerOp: med.r.AllocsPerOp(),
		Ops:         med.r.N,
	}
	return json.NewEncoder(w).Encode(res)
}

// schedCPU returns the Go runtime's idle and total P time in seconds. The
// runtime accumulates them at GC, hence the GC first.
func schedCPU() (idle, total float64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/cpu/classes/idle:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindFloat64 {
		return 0, 0
	}
	return s[0].Value.Float64(), s[1].Value.Float64()
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RunCell runs cell in a child process: exe with args (which must reach
// RunChild with the cell JSON appended) and GOMAXPROCS set to the cell's
// CPUs, and returns its result with peak RSS and CPU from the child's rusage.
func RunCell(ctx context.Context, exe string, args []string, cell Cell) (Result, error) {
	spec, err := json.Marshal(cell)
	if err != nil {
		return Result{}, err
	}
	cmd := exec.CommandContext(ctx, exe, append(append([]string{}, args...), string(spec))...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(cell.CPUs))
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("poolbench: start child for %s: %w", cell, err)
	}
	peak := make(chan float64, 1)
	stopSampling := make(chan struct{})
	go func() { peak <- sampleCPUPeak(cmd.Process.Pid, stopSampling) }()
	err = cmd.Wait()
	close(stopSampling)
	cpuPeak := <-peak
	wall := time.Since(start)
	if err != nil {
		return Result{}, fmt.Errorf("poolbench: child for %s: %w\n%s", cell, err, lastLines(stderr.String(), 20))
	}
	var res Result
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &res); err != nil {
		return Result{}, fmt.Errorf("poolbench: child for %s printed %q: %w", cell, stdout.String(), err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.MaxRSS = ru.Maxrss * 1024 // Linux reports KiB
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		res.CPUAvg = 100 * cpu.Seconds() / wall.Seconds()
	}
	res.CPUPeak = max(cpuPeak, res.CPUAvg)
	return res, nil
}

// sampleCPUPeak reads the child's CPU time from /proc every 250ms and
// returns the highest rate seen (100 = one core), 0 where /proc is missing.
func sampleCPUPeak(pid int, stop <-chan struct{}) float64 {
	const every = 250 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	prev, ok := procCPU(pid)
	prevAt := time.Now()
	best := 0.0
	for {
		select {
		case <-stop:
			return best
		case <-t.C:
		}
		cur, ok2 := procCPU(pid)
		at := time.Now()
		if !ok2 {
			continue
		}
		if !ok {
			prev, prevAt, ok = cur, at, true
			continue
		}
		// Rates over less than most of a window are noise (ticks that
		// queued up while this goroutine waited for a CPU).
		if at.Sub(prevAt) < every*4/5 {
			continue
		}
		rate := 100 * (cur - prev).Seconds() / at.Sub(prevAt).Seconds()
		best = max(best, min(rate, float64(100*runtime.NumCPU())))
		prev, prevAt = cur, at
	}
}

// procCPU is utime+stime of pid from /proc/<pid>/stat (clock ticks of 10ms).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces: utime and stime are fields 14 and 15 (1-based).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * 10 * time.Millisecond, true
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Grid lists the cells of strategies × modes × goroutines × cpus. Baselines
// run in hot mode only (they have no InvokeScriptFunc).
func Grid(strategies []string, modes []Mode, goroutines, cpus []int, d time.Duration, count int) []Cell {
	var cells []Cell
	for _, c := range cpus {
		for _, g := range goroutines {
			for _, s := range strategies {
				for _, m := range modes {
					if m != ModeHot && strings.HasPrefix(s, "simple-") {
						continue
					}
					cells = append(cells, Cell{Strategy: s, Mode: m, Goroutines: g, CPUs: c, Duration: d, Count: count})
				}
			}
		}
	}
	return cells
}

// Header are the table's columns, the report's plus ours.
var Header = []string{"strategy", "mode", "cpus", "goroutines", "ns/op", "CPU ns/op", "calls per CPU-s", "P busy %", "est. idle ns/op", "B/op", "allocs/op", "CPU avg %", "CPU peak %", "peak RSS MB", "waits/op", "locks/op", "VMs"}

func (r Result) row() []string {
	if r.Err != "" {
		return []string{r.Strategy, string(r.Mode), strconv.Itoa(r.CPUs), strconv.Itoa(r.Goroutines), "error: " + strings.ReplaceAll(firstLine(r.Err), "|", "/"), "", "", "", "", "", "", "", "", "", "", "", ""}
	}
	return []string{
		r.Strategy, string(r.Mode), strconv.Itoa(r.CPUs), strconv.Itoa(r.Goroutines),
		strconv.FormatFloat(r.NsPerOp, 'f', 0, 64),
		strconv.FormatFloat(r.CPUNsPerOp, 'f', 0, 64),
		strconv.FormatFloat(r.CallsPerCPUSecond(), 'f', 0, 64),
		strconv.FormatFloat(r.PBusy, 'f', 0, 64),
		strconv.FormatFloat(r.EstNsPerOp(), 'f', 0, 64),
		strconv.FormatInt(r.BytesPerOp, 10),
		strconv.FormatInt(r.AllocsPerOp, 10),
		strconv.FormatFloat(r.CPUAvg, 'f', 0, 64),
		strconv.FormatFloat(r.CPUPeak, 'f', 0, 64),
		strconv.FormatFloat(float64(r.MaxRSS)/(1<<20), 'f', 1, 64),
		strconv.FormatFloat(r.Waits, 'f', 4, 64),
		strconv.FormatFloat(r.Locks, 'f', 4, 64),
		strconv.FormatFloat(r.VMs, 'f', 0, 64),
	}
}

// CallsPerCPUSecond is how many calls (rows, in compute) one second of CPU
// time served: 1e9 / CPU ns/op. Unlike ns/op it does not improve when more
// CPUs run, so a drop from one CPU count to the next is work lost to
// contention.
func (r Result) CallsPerCPUSecond() float64 {
	if r.CPUNsPerOp <= 0 {
		return 0
	}
	return 1e9 / r.CPUNsPerOp
}

// EstNsPerOp estimates the wall ns/op the cell would show on an idle
// machine: its CPU time per op spread over the Ps it kept busy. On a machine
// shared with other work the OS gives the child only part of its CPUs, which
// inflates wall ns/op but not CPU time per op.
func (r Result) EstNsPerOp() float64 {
	if r.PBusy <= 0 || r.CPUs <= 0 {
		return r.NsPerOp
	}
	return r.CPUNsPerOp / (float64(r.CPUs) * r.PBusy / 100)
}

// WriteMarkdown writes results as a markdown table.
func WriteMarkdown(w io.Writer, results []Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "| %s |\n", strings.Join(Header, " | "))
	fmt.Fprintf(bw, "|%s\n", strings.Repeat("---|", len(Header)))
	for _, r := range results {
		fmt.Fprintf(bw, "| %s |\n", strings.Join(r.row(), " | "))
	}
	return bw.Flush()
}

// WriteCSV writes results as CSV with the Header columns.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	cw.Write(Header)
	for _, r := range results {
		cw.Write(r.row())
	}
	cw.Flush()
	return cw.Error()
}

// DefaultCPUs is 2 (the report's setting) and every power of two above it
// up to the machine's CPU count, and the count itself.
func DefaultCPUs() []int {
	n := runtime.NumCPU()
	cpus := []int{2}
	for c := 4; c < n; c *= 2 {
		cpus = append(cpus, c)
	}
	if n > 2 {
		cpus = append(cpus, n)
	}
	return cpus
}
