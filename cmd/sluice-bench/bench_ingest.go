package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/bench/ingestbench"
)

func init() {
	var opts ingestbench.Options
	var cases, cpus string
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Benchmark HTTP ingest (0 computed columns, 1 Lua column, 1 plugin column), a one-partition query and a 64-partition range query",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			if cases != "" {
				opts.Cases = strings.Split(cases, ",")
			}
			for _, c := range strings.Split(cpus, ",") {
				if c = strings.TrimSpace(c); c == "" {
					continue
				}
				p, err := strconv.Atoi(c)
				if err != nil || p < 1 {
					return fmt.Errorf("--cpus %q: want CPU counts such as 1,2,4", cpus)
				}
				opts.CPUs = append(opts.CPUs, p)
			}
			opts.SluiceArgs = []string{"sluice"} // the server processes of --cpus: sluiceCmd in main.go
			if opts.Sluice != "" && !strings.Contains(filepath.Base(opts.Sluice), "sluice-bench") {
				opts.SluiceArgs = nil // a sluice binary
			}
			opts.Log = cmd.ErrOrStderr()
			res, err := ingestbench.Run(ctx, opts)
			fmt.Fprintln(cmd.OutOrStdout(), ingestbench.Format(res))
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&opts.Duration, "duration", 0, "time per ingest case (default 5s)")
	f.IntVar(&opts.Clients, "clients", 0, "concurrent HTTP clients (default 4)")
	f.IntVar(&opts.BatchRows, "batch", 0, "rows per batch (default 1000)")
	f.IntVar(&opts.Partitions, "partitions", 0, "distinct hashBy values per batch (default 10; 1000 = one-row blocks, the store's worst case)")
	f.IntVar(&opts.QueryRows, "query-rows", 0, "rows stored for a query case (default 1000000)")
	f.StringVar(&cases, "cases", "", "comma-separated: none, lua, luajit (a binary built with -tags luajit), plugin, query (one partition), range (every one of 64 partitions) (default all but range)")
	f.StringVar(&opts.Dir, "dir", "", "directory for the stores (default a temporary one)")
	f.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	f.StringVar(&opts.Sluice, "server", "", "with --cpus: the sluice or sluice-bench binary that serves (default this one), e.g. an older build to compare with in the same run")
	f.StringVar(&cpus, "cpus", "", "comma-separated server CPU counts (GOMAXPROCS), e.g. 1,2,4: each case runs once per count with the server in a process of its own, pinned to that many cores (taskset) and the clients to the others; prints the server's rows per CPU-second")
	rootCmd.AddCommand(cmd)
}
