package main

import (
	"fmt"
	"os"
	"os/signal"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/bench/compact"
)

func init() {
	var opts compact.Options
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Benchmark compaction into an Iceberg table on a local S3 server (versitygw) and a cold-range query, with DuckDB as reference",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			opts.Log = cmd.ErrOrStderr()
			res, err := compact.Run(ctx, opts)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), compact.Format(res))
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Rows, "rows", 0, "rows to compact (default 1000000)")
	f.IntVar(&opts.Days, "days", 0, "days the rows span (default 10)")
	f.IntVar(&opts.Users, "users", 0, "distinct hashBy values (default 100)")
	f.IntVar(&opts.RowGroupRows, "row-group-rows", 0, "rows per Parquet row group (default 131072)")
	f.BoolVar(&opts.Unsorted, "unsorted", false, "compact in the store's hash order instead of sorted by key (compact.iceberg.unsorted)")
	f.StringVar(&opts.Dir, "dir", "", "work directory (default a temporary one)")
	f.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the cold-range query to this file")
	f.StringVar(&opts.CompactProfile, "compact-cpuprofile", "", "write a CPU profile of the compaction to this file")
	f.IntVar(&opts.CPUs, "cpus", 0, "GOMAXPROCS during the compaction (default: unchanged; the fill and the query use the process's)")
	f.BoolVar(&opts.NoQuery, "no-query", false, "skip the cold-range query and DuckDB's read after the compaction")
	rootCmd.AddCommand(cmd)
}
