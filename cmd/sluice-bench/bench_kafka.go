package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	kafkabench "github.com/sluicedb/sluice/bench/kafka"
)

func init() {
	var opts kafkabench.Options
	var cases, brokers string
	cmd := &cobra.Command{
		Use:   "kafka",
		Short: "Benchmark Kafka consumption (no computed column, one Lua column, 2 nodes), produce-to-queryable latency, and HTTP ingest of the same rows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			if cases != "" {
				opts.Cases = strings.Split(cases, ",")
			}
			if brokers != "" {
				opts.Brokers = strings.Split(brokers, ",")
			}
			opts.Log = cmd.ErrOrStderr()
			opts.SluiceArgs = []string{"sluice"} // the nodes: sluiceCmd in main.go
			res, err := kafkabench.Run(ctx, opts)
			fmt.Fprintln(cmd.OutOrStdout(), kafkabench.Format(res))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", "", "comma-separated brokers of an existing cluster (default: start one from scripts/install-kafka's jars)")
	f.IntVar(&opts.Rows, "rows", 0, "messages pre-produced per throughput case (default 1000000)")
	f.IntVar(&opts.Partitions, "partitions", 0, "partitions per topic (default 4)")
	f.IntVar(&opts.Users, "users", 0, "distinct hashBy values (default 10, as bench ingest; 1000 = mostly one-row blocks)")
	f.IntVar(&opts.Rate, "rate", 0, "rows/s offered in the latency and steady cases (default 50000)")
	f.DurationVar(&opts.LatencyFor, "latency-for", 0, "length of the latency and steady cases (default 10s)")
	f.StringVar(&cases, "cases", "", "comma-separated: none, lua, http, latency, 2nodes, steady, avro, protobuf, json_schema (default all but steady, avro, protobuf and json_schema; steady: --rate rows/s for --latency-for, the node's CPU per row at that rate; avro, protobuf, json_schema: none's rows in the Schema Registry wire format)")
	f.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the first node of each consuming case to this file (suffixed .case)")
	f.DurationVar(&opts.ProfileFor, "cpuprofile-for", 0, "length of the --cpuprofile profile, from the first row stored (default 3s; a longer one than the case ends when the node stops)")
	f.StringVar(&opts.Sluice, "sluice", "", "another sluice-bench build to run as the nodes (default this one): before and after in one command")
	f.StringVar(&opts.Dir, "dir", "", "directory for the broker and stores (default a temporary one)")
	rootCmd.AddCommand(cmd)
}
