// Command sluice-full is sluice with the cold tier and Go plugins linked
// in: the same commands (package cmd/internal/cli), plus tables with
// compact.iceberg (package coldtier: iceberg-go, arrow-go, the AWS SDK),
// query answers as Arrow streams (format=arrow), computed columns that
// are Go plugins (package plugin), an S3 source's SQS queue and the gRPC
// listener (listen.grpc: server/grpclisten, grpc-go). Each makes every
// start of a binary slower and larger (docs/architecture.md), so the lean
// sluice leaves them out and says to use this one when a config needs them.
package main

import (
	"os"

	"github.com/sluicedb/sluice/cmd/internal/cli"
	_ "github.com/sluicedb/sluice/coldtier" // registers the cold tier (coldapi)
	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/compute/goplugin"
	_ "github.com/sluicedb/sluice/internal/arrowformat" // registers format=arrow (rowformat)
	_ "github.com/sluicedb/sluice/server/grpclisten"    // registers listen.grpc (grpcapi)
	"github.com/sluicedb/sluice/stream"
	"github.com/sluicedb/sluice/stream/sqsqueue"
)

func main() {
	compute.EnablePlugins(goplugin.Open)
	stream.EnableSQS(sqsqueue.Open)
	// A child started to open a plugin before this process does (see
	// docs/compute.md) does that and exits here.
	compute.ServePluginCheck()
	os.Exit(cli.Main("sluice-full", os.Args[1:]))
}
