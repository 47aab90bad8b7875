// Package cli is the command tree of the sluice binaries: it wires flags to
// the packages that do the work (luavm, compute, rdbtool, server) and nothing
// more. cmd/sluice and cmd/sluice-full run the same tree; they differ only
// in what their main links in (see docs/architecture.md): sluice-full
// registers the cold tier (package coldtier) and Go plugin loading, which
// sluice leaves out to start in milliseconds.
//
// Each subcommand lives in its own file and registers itself on rootCmd from
// an init function, so that adding a command touches one file.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/internal/coldapi"
	"github.com/sluicedb/sluice/internal/grpcapi"
	"github.com/sluicedb/sluice/stream"
)

var rootCmd = &cobra.Command{
	Use:           "sluice",
	Short:         "sluice: ingestion engine and time-series store with Lua, plugin and built-in computed columns",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// Main runs the command line args (os.Args[1:]) as the binary called name
// and returns the process's exit status.
func Main(name string, args []string) int {
	rootCmd.Use = name
	rootCmd.SetArgs(args)
	if err := rootCmd.Execute(); err != nil {
		printError(os.Stderr, name, err)
		return 1
	}
	return 0
}

// printError prints err, and for a feature this binary was built without,
// which binary has it.
func printError(w io.Writer, name string, err error) {
	fmt.Fprintf(w, "%s: %v\n", name, err)
	if errors.Is(err, compute.ErrNoPlugins) || errors.Is(err, coldapi.ErrNotLinked) || errors.Is(err, stream.ErrNoSQS) || errors.Is(err, grpcapi.ErrNotLinked) {
		fmt.Fprintln(w, "hint: sluice-full is the same command with the cold tier (compact.iceberg), Go plugins, SQS (an s3 source's queue) and the gRPC listener (listen.grpc) linked in:\n"+
			"      go run ./cmd/sluice-full ..., or go build -o sluice-full ./cmd/sluice-full (docs/architecture.md)")
	}
}
