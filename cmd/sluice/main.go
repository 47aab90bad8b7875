// Command sluice is the CLI of the sluice ingestion engine: it wires flags to
// the packages that do the work (luavm, compute, rdb, server) and nothing more.
//
// Each subcommand lives in its own file and registers itself on rootCmd (or
// on a parent such as benchCmd) from an init function, so that adding a
// command touches one file.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/compute"
)

var rootCmd = &cobra.Command{
	Use:           "sluice",
	Short:         "sluice: ingestion engine and time-series store with Lua, plugin and built-in computed columns",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// benchCmd groups the benchmark reports (`sluice bench pool`, `sluice bench rdb`, ...).
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Run a benchmark report and print its table",
}

func init() {
	rootCmd.AddCommand(benchCmd)
}

func main() {
	// A child started to open a plugin before this process does (see
	// docs/compute.md) does that and exits here.
	compute.ServePluginCheck()
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
