// Command sluice is the sluice command line: every command of package
// cmd/internal/cli, without the cold tier (compact.iceberg), Go plugin
// loading, SQS and the gRPC listener (listen.grpc), so that it starts in
// milliseconds and stays small (docs/architecture.md). A config that needs
// one of them fails with an error naming cmd/sluice-full, the same command
// with all of them linked in.
package main

import (
	"os"

	"github.com/sluicedb/sluice/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Main("sluice", os.Args[1:]))
}
