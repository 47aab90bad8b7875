package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/bench/compact"
	"github.com/sluicedb/sluice/bench/ingestbench"
	"github.com/sluicedb/sluice/bench/poolbench"
)

// benchScalingCmd is `sluice bench scaling`: the scaling table of
// docs/perf/server.md in one command. Each piece is an existing report run at each CPU count: the
// ingest and query cases of `bench ingest --cpus` (a server process pinned
// to p cores, GOMAXPROCS=p, the HTTP clients on the other cores), the pool
// cells of `bench pool` (a child per cell, pinned likewise) and `bench
// compact` (in a child pinned likewise: hidden --compact-child).
var benchScalingCmd = &cobra.Command{
	Use:   "scaling",
	Short: "Print the scaling table: ingest, Lua pool, compaction and queries at each CPU count",
	Long: `Runs at each CPU count p of --cpus, each piece in a process pinned to cores 0..p-1 (taskset)
with GOMAXPROCS=p and the HTTP clients on the other cores when the machine has more:
HTTP ingest with no column and with one Lua column (bench ingest, 2p clients), the Lua pool's
default strategy and a plain sync.Pool (bench pool, --parallelism goroutines), a compaction
into Iceberg on a local S3 server (bench compact, --compact-rows rows), a one-partition
query and a query over 64 partitions (bench ingest's query cases, --query-rows rows); then
prints the table in markdown with rows per CPU-second beside rows/s.

A count above the machine's cores is skipped with a note, unless --above-cores runs it with
GOMAXPROCS above the cores (which shows contention, not scaling). The 16-core table:
  sluice-bench scaling --cpus 1,2,4,8,16`,
	Args: cobra.NoArgs,
	RunE: runBenchScaling,
}

var benchScaling struct {
	cpus         string
	duration     time.Duration
	queryRows    int
	compactRows  int
	parallelism  int
	aboveCores   bool
	dir          string
	compactChild int
}

func init() {
	f := benchScalingCmd.Flags()
	f.StringVar(&benchScaling.cpus, "cpus", "1,2,4,8,16", "comma-separated CPU counts")
	f.DurationVar(&benchScaling.duration, "duration", 5*time.Second, "time per ingest case and per pool cell")
	f.IntVar(&benchScaling.queryRows, "query-rows", 1_000_000, "rows stored for each query case")
	f.IntVar(&benchScaling.compactRows, "compact-rows", 2_000_000, "rows compacted")
	f.IntVar(&benchScaling.parallelism, "parallelism", 4000, "goroutines calling the Lua pool")
	f.BoolVar(&benchScaling.aboveCores, "above-cores", false, "run CPU counts above the machine's cores as GOMAXPROCS above them (contention, not scaling) instead of skipping them")
	f.StringVar(&benchScaling.dir, "dir", "", "directory for the stores (default temporary ones)")
	f.IntVar(&benchScaling.compactChild, "compact-child", 0, "internal: compact this many rows in this process and print the result as JSON")
	f.MarkHidden("compact-child")
	rootCmd.AddCommand(benchScalingCmd)
}

// The table's rows, in the order of docs/perf/server.md's scaling table, and
// the multi-partition range query.
const (
	rowIngestNone   = "HTTP ingest, no column: rows/s · server rows per CPU-second"
	rowIngestLua    = "same, one Lua column"
	rowIngestPerCPU = "ingest rows per CPU-second (no column), server and clients"
	rowPoolDefault  = "Lua pool, default strategy: ns/op · CPU ns/op"
	rowPoolSync     = "same, `simple-syncpool`"
	rowCompact      = "compaction: Parquet MB/s uploaded · rows/s · rows per CPU-second"
	rowQueryOne     = "one-partition query: rows/s · server rows per CPU-second"
	rowQueryRange   = "64-partition range query: rows/s · server rows per CPU-second"
)

var scalingRows = []string{rowIngestNone, rowIngestLua, rowIngestPerCPU, rowPoolDefault, rowPoolSync, rowCompact, rowQueryOne, rowQueryRange}

// scalingTable holds the cells measured, by row and CPU count.
type scalingTable struct {
	cpus  []int
	cells map[string]map[int]string
	notes []string
}

func (t *scalingTable) set(row string, p int, cell string) {
	if t.cells[row] == nil {
		t.cells[row] = map[int]string{}
	}
	t.cells[row][p] = cell
}

// fail fills row's cell at p with the error, noted in full below the table.
func (t *scalingTable) fail(row string, p int, err error) {
	t.set(row, p, "error (note)")
	t.notes = append(t.notes, fmt.Sprintf("%s at %d CPUs: %v", row, p, err))
}

// markdown renders the table; a cell nothing filled is "–".
func (t *scalingTable) markdown() string {
	var b strings.Builder
	b.WriteString("| work |")
	for i, p := range t.cpus {
		if i == 0 {
			fmt.Fprintf(&b, " %d core%s |", p, map[bool]string{true: "", false: "s"}[p == 1])
		} else {
			fmt.Fprintf(&b, " %d |", p)
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(t.cpus)) + "\n")
	for _, row := range scalingRows {
		b.WriteString("| " + row + " |")
		for _, p := range t.cpus {
			cell := t.cells[row][p]
			if cell == "" {
				cell = "–"
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	for _, n := range t.notes {
		b.WriteString("\n- " + n)
	}
	if len(t.notes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// perCPU is rate, or what a run too short for /proc's 10 ms CPU ticks
// left it.
func perCPU(v float64) string {
	if v == 0 {
		return "(under 10 ms of CPU)"
	}
	return rate(v)
}

// rate writes a per-second figure short: 331k, 1.36M.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func runBenchScaling(cmd *cobra.Command, _ []string) error {
	if benchScaling.compactChild > 0 {
		return compactChild(cmd)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	cpus, err := ints(benchScaling.cpus)
	if err != nil {
		return fmt.Errorf("bench scaling: --cpus: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench scaling: find own binary: %w", err)
	}
	logw := cmd.ErrOrStderr()
	cores := runtime.NumCPU()
	t := &scalingTable{cells: map[string]map[int]string{}}
	for _, p := range cpus {
		if p > cores && !benchScaling.aboveCores {
			fmt.Fprintf(logw, "skipping %d CPUs: the machine has %d cores (--above-cores runs it as GOMAXPROCS=%d)\n", p, cores, p)
			t.notes = append(t.notes, fmt.Sprintf("%d CPUs skipped: this machine has %d cores", p, cores))
			continue
		}
		t.cpus = append(t.cpus, p)
		if p > cores {
			t.notes = append(t.notes, fmt.Sprintf("**%d CPUs ran as GOMAXPROCS=%d on %d cores: contention, not scaling**", p, p, cores))
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "sluice-bench scaling --cpus %s: %d cores (%s), ingest %v per case with 2p clients, pool %d goroutines %v per cell, compaction of %d rows, queries of %d rows\n\n",
		benchScaling.cpus, cores, cpuModel(), benchScaling.duration, benchScaling.parallelism, benchScaling.duration, benchScaling.compactRows, benchScaling.queryRows)
	load0 := loadAverage()
	for _, p := range t.cpus {
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(logw, "== %d CPUs: ingest and queries\n", p)
		scalingIngest(ctx, t, p, self, logw)
		fmt.Fprintf(logw, "== %d CPUs: Lua pool\n", p)
		scalingPool(ctx, t, p, self)
		fmt.Fprintf(logw, "== %d CPUs: compaction\n", p)
		scalingCompact(ctx, t, p, self, logw)
	}
	t.notes = append(t.notes, pinningNote(cores), fmt.Sprintf("load average %s at the start, %s at the end (a loaded machine lowers rows/s, much less the rows per CPU-second)", load0, loadAverage()))
	fmt.Fprint(cmd.OutOrStdout(), t.markdown())
	for _, row := range scalingRows {
		for _, p := range t.cpus {
			if c := t.cells[row][p]; c == "" || strings.HasPrefix(c, "error") {
				return errors.New("bench scaling: some cells are missing or failed (see the notes)")
			}
		}
	}
	return nil
}

// scalingIngest fills the ingest and query rows at p CPUs (bench ingest
// --cpus p --clients 2p --cases none,lua,query,range).
func scalingIngest(ctx context.Context, t *scalingTable, p int, self string, logw io.Writer) {
	opts := ingestbench.Options{
		Duration: benchScaling.duration, Clients: 2 * p, QueryRows: benchScaling.queryRows,
		Cases: []string{"none", "lua", "query", "range"}, CPUs: []int{p},
		Sluice: self, SluiceArgs: []string{"sluice"}, Log: logw,
	}
	if benchScaling.dir != "" {
		opts.Dir = filepath.Join(benchScaling.dir, fmt.Sprintf("ingest-%d", p))
	}
	res, err := ingestbench.Run(ctx, opts)
	rows := map[string]string{"none": rowIngestNone, "lua": rowIngestLua, "query": rowQueryOne, "range": rowQueryRange}
	for _, r := range res {
		row := rows[r.Case]
		if r.Rows == 0 {
			t.fail(row, p, errors.New(r.Note))
			continue
		}
		t.set(row, p, rate(r.RowsPerSec)+" · "+perCPU(r.ServerRowsPerCPUSec))
		if r.Case == "none" {
			t.set(rowIngestPerCPU, p, rate(r.RowsPerCPUSec))
		}
	}
	if err != nil {
		for _, row := range []string{rowIngestNone, rowIngestLua, rowIngestPerCPU, rowQueryOne, rowQueryRange} {
			if t.cells[row][p] == "" {
				t.fail(row, p, err)
			}
		}
	}
}

// scalingPool fills the pool rows at p CPUs (bench pool --cpus p
// --strategies default,simple-syncpool).
func scalingPool(ctx context.Context, t *scalingTable, p int, self string) {
	exe, args := pinned(p, self, "pool", "--child")
	for _, c := range []struct{ strategy, row string }{{"default", rowPoolDefault}, {"simple-syncpool", rowPoolSync}} {
		cell := poolbench.Cell{Strategy: c.strategy, Mode: poolbench.ModeHot, Goroutines: benchScaling.parallelism, CPUs: p, Duration: benchScaling.duration, Count: 1}
		res, err := poolbench.RunCell(ctx, exe, args, cell)
		if err != nil {
			t.fail(c.row, p, err)
			continue
		}
		t.set(c.row, p, fmt.Sprintf("%.0f · %.0f", res.NsPerOp, res.CPUNsPerOp))
	}
}

// scalingCompact fills the compaction row at p CPUs: bench compact
// --no-query in a child pinned to p cores.
func scalingCompact(ctx context.Context, t *scalingTable, p int, self string, logw io.Writer) {
	exe, args := pinned(p, self, "scaling", "--compact-child", strconv.Itoa(benchScaling.compactRows))
	if benchScaling.dir != "" {
		args = append(args, "--dir", filepath.Join(benchScaling.dir, fmt.Sprintf("compact-%d", p)))
	}
	c := exec.CommandContext(ctx, exe, args...)
	c.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(p))
	c.Stderr = logw
	out, err := c.Output()
	if err != nil {
		t.fail(rowCompact, p, fmt.Errorf("compaction child: %w", err))
		return
	}
	var r compact.Result
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil || r.Rows == 0 {
		t.fail(rowCompact, p, fmt.Errorf("compaction child printed %q: %v", out, err))
		return
	}
	t.set(rowCompact, p, fmt.Sprintf("%.1f · %s · %s", r.CompactMBPerSecond, rate(r.CompactRowsPerSecond), rate(float64(r.Rows)/max(r.CompactCPUSeconds, 1e-9))))
}

// compactChild is the hidden --compact-child: bench compact --no-query in
// this process, its result as JSON on the last line.
func compactChild(cmd *cobra.Command) error {
	res, err := compact.Run(cmd.Context(), compact.Options{Rows: benchScaling.compactChild, NoQuery: true, Dir: benchScaling.dir, Log: cmd.ErrOrStderr()})
	if err != nil {
		return err
	}
	return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
}

// pinned is the command that runs self with args on cores 0..p-1 (taskset),
// or on any core when the machine has no more than p or lacks taskset.
func pinned(p int, self string, args ...string) (string, []string) {
	if taskset, err := exec.LookPath("taskset"); err == nil && p < runtime.NumCPU() {
		return taskset, append([]string{"-c", fmt.Sprintf("0-%d", p-1), self}, args...)
	}
	return self, args
}

// pinningNote says where each piece ran.
func pinningNote(cores int) string {
	if _, err := exec.LookPath("taskset"); err != nil {
		return "taskset not found: nothing was pinned, servers and clients shared the cores"
	}
	return fmt.Sprintf("each piece ran with GOMAXPROCS=p pinned to cores 0..p-1 (taskset), the HTTP clients on the cores above; at p=%d (no core left) server and clients shared the cores", cores)
}

// loadAverage is the 1-minute load average (/proc/loadavg), "?" without it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
