// Command sluice-bench runs the benchmark reports of docs/ (pool, rdb,
// ingest, kafka, compact, and scaling: a table of them at each CPU
// count) and prints their tables. It is a binary of its own so that the
// product, sluice, does not carry what the reports start and build: the test servers of internal/coldtest (versitygw) and
// internal/testkafka, compute/plugbuild and package testing. `sluice bench
// REPORT` runs this binary when it is installed beside sluice.
//
// Each report lives in its own file and registers itself on rootCmd from an
// init function.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/cmd/internal/cli"
	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/compute/goplugin"
)

var rootCmd = &cobra.Command{
	Use:           "sluice-bench",
	Short:         "Run a sluice benchmark report and print its table",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// sluiceCmd is the whole sluice command tree under `sluice-bench sluice`:
// the kafka report runs its nodes as `sluice-bench sluice serve ...`, so
// that they are this build (same tags, same code) without a second binary.
var sluiceCmd = &cobra.Command{
	Use:                "sluice [command]",
	Short:              "Run a sluice command (the kafka report's nodes)",
	Hidden:             true,
	DisableFlagParsing: true,
	RunE: func(_ *cobra.Command, args []string) error {
		os.Exit(cli.Main("sluice", args))
		return nil
	},
}

func init() {
	rootCmd.AddCommand(sluiceCmd)
}

func main() {
	compute.EnablePlugins(goplugin.Open) // the ingest report's plugin case
	// A child started to open a plugin before this process does (see
	// docs/compute.md; the ingest report's plugin case) does that and exits
	// here.
	compute.ServePluginCheck()
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-bench:", err)
		os.Exit(1)
	}
}
