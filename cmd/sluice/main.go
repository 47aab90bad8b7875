// Command sluice is the sluice command line: every command of package
// cmd/internal/cli, without the cold tier (compact.iceberg) and without Go
// plugin loading, so that it starts in milliseconds (docs/architecture.md).
// cmd/sluice-full is the same command with both linked in.
package main

import (
	"os"

	"github.com/sluicedb/sluice/compute"

	"github.com/sluicedb/sluice/cmd/internal/cli"
)

func main() {
	// A child started to open a plugin before this process does (see
	// docs/compute.md) does that and exits here.
	compute.ServePluginCheck()
	os.Exit(cli.Main("sluice", os.Args[1:]))
}
