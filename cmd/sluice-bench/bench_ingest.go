package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/bench/ingestbench"
)

func init() {
	var opts ingestbench.Options
	var cases string
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Benchmark HTTP ingest (0 computed columns, 1 Lua column, 1 plugin column) and a one-partition query",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			if cases != "" {
				opts.Cases = strings.Split(cases, ",")
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
	f.IntVar(&opts.QueryRows, "query-rows", 0, "rows in the queried partition (default 1000000)")
	f.StringVar(&cases, "cases", "", "comma-separated: none, lua, luajit (a binary built with -tags luajit), plugin, query (default all)")
	f.StringVar(&opts.Dir, "dir", "", "directory for the stores (default a temporary one)")
	f.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	rootCmd.AddCommand(cmd)
}
