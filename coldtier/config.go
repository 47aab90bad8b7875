package coldtier

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/apache/iceberg-go"
	icat "github.com/apache/iceberg-go/catalog"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier/catalog"
)

// Config says where a table's cold tier lives and how it is written.
type Config struct {
	// Warehouse is the root under which tables are written:
	// "s3://bucket/prefix" or a local directory. A table's data and
	// metadata go to Warehouse/<namespace>/<table>.
	Warehouse string
	// S3 configures the object store when Warehouse is s3://.
	S3 S3
	// Catalog is the Iceberg catalog the table is registered in.
	Catalog Catalog
	// Node names this writer in the snapshot summaries it commits
	// (sluice.node); default: the host name. Two nodes writing to the same
	// Iceberg table must have different names.
	Node string
	// StateDir holds the record of a run in flight (pending-<table>.json);
	// the server uses its storage directory.
	StateDir string
	// RowGroupRows bounds the rows of one Parquet row group; default
	// 131072. A run streams batches of at most 32768 rows into it and
	// holds two of them (rowReader), whatever this is.
	RowGroupRows int
	// Unsorted writes a day's rows in the store's partition-hash order
	// instead of sorted by the hashBy value, and new tables declare no
	// sort order. Sorting costs a first pass over each day that reads one
	// block per key: negligible with blocks of many rows, about half the
	// compaction speed when nearly every block holds one row (millions of
	// keys); sorted files let readers skip row groups by key.
	Unsorted bool
	// Logger receives the AWS SDK's own log lines (S3 file IO); nil
	// leaves the SDK's default, which writes plain text to stderr.
	Logger *slog.Logger `json:"-"`
}

// S3 is an S3-compatible endpoint (package catalog opens the file IO).
type S3 = catalog.S3

// Catalog is an Iceberg catalog (package catalog opens it).
type Catalog = catalog.Config

func (c *Config) defaults() error {
	loc := c.location()
	if err := loc.Defaults(c.StateDir); err != nil {
		return err
	}
	c.Warehouse, c.S3, c.Catalog = loc.Warehouse, loc.S3, loc.Catalog
	if c.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("coldtier: node name: %w", err)
		}
		c.Node = h
	}
	if c.RowGroupRows <= 0 {
		c.RowGroupRows = 1 << 17
	}
	return nil
}

func (c *Config) location() catalog.Location {
	return catalog.Location{Warehouse: c.Warehouse, S3: c.S3, Catalog: c.Catalog}
}

// openCatalog opens the configured catalog; its tables report their
// commits (iceberg-go's own retries) into counters.
func openCatalog(ctx context.Context, c *Config, counters *Counters) (icat.Catalog, error) {
	return catalog.Open(ctx, c.location(), retryReporter{counters})
}

// loadOrCreate loads the Iceberg table of a sluice table, creating it with
// the writer's properties if it does not exist yet (catalog.LoadOrCreate).
func loadOrCreate(ctx context.Context, cat icat.Catalog, c *Config, name string, schema *iceberg.Schema, sortBy, hashBy string) (*itable.Table, error) {
	props := iceberg.Properties{
		// Conflicts with another node's commit are retried by iceberg-go
		// (reload the table, re-check, rebuild the manifest list).
		itable.CommitNumRetriesKey:        "20",
		itable.CommitMinRetryWaitMsKey:    "20",
		itable.CommitMaxRetryWaitMsKey:    "2000",
		"write.parquet.compression-codec": "zstd",
	}
	for k, v := range writeProps(c.RowGroupRows) {
		props[k] = v
	}
	return catalog.LoadOrCreate(ctx, cat, c.location(), name, schema, sortBy, hashBy, props)
}
