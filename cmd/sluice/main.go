// Command sluice is the sluice command line: every command of package
// cmd/internal/cli, without the cold tier (compact.iceberg) and without Go
// plugin loading, so that it starts in milliseconds (docs/architecture.md).
// A config that needs either fails with an error naming cmd/sluice-full,
// the same command with both linked in.
package main

import (
	"os"

	"github.com/sluicedb/sluice/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Main("sluice", os.Args[1:]))
}
