package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/bench/poolbench"
)

// benchPoolCmd is `sluice bench pool`: the Lua VM pool grid of the published
// report, each cell in a child process of this same binary (the hidden
// --child flag) so that peak RSS and CPU are that cell's own.
var benchPoolCmd = &cobra.Command{
	Use:   "pool",
	Short: "Benchmark the Lua VM pool strategies (the published report's grid), one child process per cell",
	Long: `Runs the report's script (helloLua calling a Go function, precompiled) through every pool
strategy and the simple baseline pools, at each parallelism (goroutines) and CPU count, each cell
in its own child process (GOMAXPROCS = the cell's CPUs), and prints per cell ns/op, CPU ns/op and
calls per CPU-second (1e9 / CPU ns/op: it stays flat as CPUs are added unless they contend), B/op,
allocs/op, CPU use, peak RSS, and for luavm's strategies the share of calls that waited for a VM
and the VMs created. --cpus 2,4,8,16 gives the scaling table; on a machine with fewer cores, the
counts above its core count show contention, not scaling.

The default run takes a couple of minutes; --long runs the full grid (1000/2000/4000 goroutines,
5s per cell, median of 3).`,
	RunE: runBenchPool,
}

var benchPool struct {
	duration    time.Duration
	parallelism string
	cpus        string
	strategies  string
	modes       string
	count       int
	long        bool
	csvPath     string
	mdPath      string
	child       string
}

func init() {
	f := benchPoolCmd.Flags()
	f.DurationVar(&benchPool.duration, "duration", time.Second, "benchmark time per cell")
	f.StringVar(&benchPool.parallelism, "parallelism", "4000", "comma-separated goroutine counts")
	f.StringVar(&benchPool.cpus, "cpus", "", "comma-separated GOMAXPROCS values (default 2 and the machine's CPUs)")
	f.StringVar(&benchPool.strategies, "strategies", strings.Join(append(append([]string{}, poolbench.Strategies...), poolbench.Baselines...), ","),
		"comma-separated strategies: default, none, variable, core<N>+unlimited, core<N>+block, core<N>+max<M>+block, simple-syncpool, simple-readme, simple-chan<N>, simple-core<N>+close")
	f.StringVar(&benchPool.modes, "modes", "hot", "comma-separated: hot (Do+Call1) and/or report (InvokeScriptFunc returning []any)")
	f.IntVar(&benchPool.count, "count", 1, "runs per cell (the median is reported)")
	f.BoolVar(&benchPool.long, "long", false, "the full grid: --parallelism 1000,2000,4000 --duration 5s --count 3 --modes hot,report")
	f.StringVar(&benchPool.csvPath, "csv", "", "also write the table as CSV to this file")
	f.StringVar(&benchPool.mdPath, "md", "", "also write the table as markdown to this file")
	f.StringVar(&benchPool.child, "child", "", "internal: run one cell (JSON) and print its result")
	f.MarkHidden("child")
	rootCmd.AddCommand(benchPoolCmd)
}

func runBenchPool(cmd *cobra.Command, args []string) error {
	if benchPool.child != "" {
		var cell poolbench.Cell
		if err := json.Unmarshal([]byte(benchPool.child), &cell); err != nil {
			return fmt.Errorf("bench pool: --child: %w", err)
		}
		return poolbench.RunChild(cell, cmd.OutOrStdout())
	}
	if benchPool.long {
		fl := cmd.Flags()
		if !fl.Changed("parallelism") {
			benchPool.parallelism = "1000,2000,4000"
		}
		if !fl.Changed("duration") {
			benchPool.duration = 5 * time.Second
		}
		if !fl.Changed("count") {
			benchPool.count = 3
		}
		if !fl.Changed("modes") {
			benchPool.modes = "hot,report"
		}
	}
	goroutines, err := ints(benchPool.parallelism)
	if err != nil {
		return fmt.Errorf("bench pool: --parallelism: %w", err)
	}
	cpus := poolbench.DefaultCPUs()
	if benchPool.cpus != "" {
		if cpus, err = ints(benchPool.cpus); err != nil {
			return fmt.Errorf("bench pool: --cpus: %w", err)
		}
	}
	var modes []poolbench.Mode
	for _, m := range strings.Split(benchPool.modes, ",") {
		modes = append(modes, poolbench.Mode(strings.TrimSpace(m)))
	}
	cells := poolbench.Grid(strings.Split(benchPool.strategies, ","), modes, goroutines, cpus, benchPool.duration, benchPool.count)
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench pool: find own binary: %w", err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "sluice bench pool: %d cells, %v each (x%d)\n", len(cells), benchPool.duration, benchPool.count)
	var results []poolbench.Result
	for i, cell := range cells {
		fmt.Fprintf(cmd.ErrOrStderr(), "[%d/%d] %s\n", i+1, len(cells), cell)
		res, err := poolbench.RunCell(context.Background(), exe, []string{"pool", "--child"}, cell)
		if err != nil {
			res = poolbench.Result{Cell: cell, Err: err.Error()}
			fmt.Fprintln(cmd.ErrOrStderr(), err)
		}
		results = append(results, res)
	}
	if err := poolbench.WriteMarkdown(out, results); err != nil {
		return err
	}
	for _, w := range []struct {
		path  string
		write func(*os.File) error
	}{
		{benchPool.csvPath, func(f *os.File) error { return poolbench.WriteCSV(f, results) }},
		{benchPool.mdPath, func(f *os.File) error { return poolbench.WriteMarkdown(f, results) }},
	} {
		if w.path == "" {
			continue
		}
		f, err := os.Create(w.path)
		if err != nil {
			return fmt.Errorf("bench pool: %w", err)
		}
		if err := w.write(f); err != nil {
			f.Close()
			return fmt.Errorf("bench pool: write %s: %w", w.path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("bench pool: %w", err)
		}
	}
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
