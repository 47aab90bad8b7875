package coldtier

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/rest" // registers the "rest" catalog type
	_ "github.com/apache/iceberg-go/catalog/sql"  // registers the "sql" catalog type
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers only the s3:// file IO: gocloud would link the GCS and Azure SDKs too
	itable "github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite" // the SQLite driver of the SQL catalog (pure Go)
)

// Config says where a table's cold tier lives.
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
}

// S3 is an S3-compatible endpoint. Credentials come from the AWS SDK's
// usual chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
// AWS_SESSION_TOKEN, AWS_PROFILE and ~/.aws/credentials) unless given here.
type S3 struct {
	Endpoint  string // e.g. http://127.0.0.1:7070; empty: AWS
	Region    string // default us-east-1
	PathStyle bool   // bucket in the path, as self-hosted servers want
	// AccessKeyID and SecretAccessKey override the chain.
	AccessKeyID, SecretAccessKey string
}

// Catalog is an Iceberg catalog.
type Catalog struct {
	// Type is "sql" (default) or "rest".
	Type string
	// URI: for sql, a SQLite file path (or "file:..." DSN); for rest, the
	// catalog's base URL. Default for sql: <StateDir>/iceberg-catalog.db.
	URI string
	// Name is the catalog name stored with each table (default "sluice").
	Name string
	// Namespace holds sluice's tables (default "sluice").
	Namespace string
	// Properties are passed to the catalog as they are (e.g. REST
	// credentials, "warehouse").
	Properties map[string]string
}

func (c *Config) defaults() error {
	if c.Warehouse == "" {
		return errors.New("coldtier: warehouse is empty")
	}
	if c.Catalog.Type == "" {
		c.Catalog.Type = "sql"
	}
	if c.Catalog.Name == "" {
		c.Catalog.Name = "sluice"
	}
	if c.Catalog.Namespace == "" {
		c.Catalog.Namespace = "sluice"
	}
	if c.S3.Region == "" {
		c.S3.Region = "us-east-1"
	}
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
	if c.Catalog.Type == "sql" && c.Catalog.URI == "" {
		if c.StateDir == "" {
			return errors.New("coldtier: sql catalog: no URI and no state directory")
		}
		c.Catalog.URI = filepath.Join(c.StateDir, "iceberg-catalog.db")
	}
	if !strings.HasPrefix(c.Warehouse, "s3://") {
		abs, err := filepath.Abs(c.Warehouse)
		if err != nil {
			return err
		}
		c.Warehouse = abs
	}
	return nil
}

// ioProps are the file IO properties (iceberg-go's io package), passed to
// the catalog so that every table it loads reads and writes with them.
func (c *Config) ioProps() iceberg.Properties {
	p := iceberg.Properties{}
	if strings.HasPrefix(c.Warehouse, "s3://") {
		p[icebergio.S3Region] = c.S3.Region
		if c.S3.Endpoint != "" {
			p[icebergio.S3EndpointURL] = c.S3.Endpoint
		}
		p[icebergio.S3ForceVirtualAddressing] = fmt.Sprint(!c.S3.PathStyle)
		if c.S3.AccessKeyID != "" {
			p[icebergio.S3AccessKeyID] = c.S3.AccessKeyID
			p[icebergio.S3SecretAccessKey] = c.S3.SecretAccessKey
		}
	}
	return p
}

// openCatalog opens the configured catalog with the IO properties.
func openCatalog(ctx context.Context, c *Config) (catalog.Catalog, error) {
	props := iceberg.Properties{}
	for k, v := range c.Catalog.Properties {
		props[k] = v
	}
	for k, v := range c.ioProps() {
		props[k] = v
	}
	props["metrics-reporter-impl"] = reporterName
	switch c.Catalog.Type {
	case "sql":
		props["type"] = "sql"
		props["sql.driver"] = "sqlite"
		props["sql.dialect"] = "sqlite"
		props["uri"] = sqliteDSN(c.Catalog.URI)
	case "rest":
		props["type"] = "rest"
		props["uri"] = c.Catalog.URI
	default:
		return nil, fmt.Errorf("coldtier: catalog type %q: want sql or rest", c.Catalog.Type)
	}
	cat, err := catalog.Load(ctx, c.Catalog.Name, props)
	if err != nil {
		return nil, fmt.Errorf("coldtier: open %s catalog %s: %w", c.Catalog.Type, c.Catalog.URI, err)
	}
	return cat, nil
}

// sqliteDSN makes a SQLite path a DSN that waits for a lock (two nodes, or
// a reader, on one catalog file) and uses the WAL journal.
func sqliteDSN(uri string) string {
	if strings.HasPrefix(uri, "file:") {
		return uri
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	return "file:" + uri + "?" + q.Encode()
}

// location is where a table's files go.
func (c *Config) location(name string) string {
	if strings.HasPrefix(c.Warehouse, "s3://") {
		return strings.TrimSuffix(c.Warehouse, "/") + "/" + c.Catalog.Namespace + "/" + name
	}
	return filepath.Join(c.Warehouse, c.Catalog.Namespace, name)
}

// loadOrCreate loads the Iceberg table of a sluice table, creating the
// namespace and the table (partitioned by day of the sort column) if they
// do not exist yet.
func loadOrCreate(ctx context.Context, cat catalog.Catalog, c *Config, name string, schema *iceberg.Schema, sortBy string) (*itable.Table, error) {
	ident := itable.Identifier{c.Catalog.Namespace, name}
	tbl, err := cat.LoadTable(ctx, ident)
	if err == nil {
		return tbl, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("coldtier: load table %s: %w", strings.Join(ident, "."), err)
	}
	ns := itable.Identifier{c.Catalog.Namespace}
	if ok, err := cat.CheckNamespaceExists(ctx, ns); err != nil {
		return nil, fmt.Errorf("coldtier: namespace %s: %w", c.Catalog.Namespace, err)
	} else if !ok {
		if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return nil, fmt.Errorf("coldtier: create namespace %s: %w", c.Catalog.Namespace, err)
		}
	}
	sortField, ok := schema.FindFieldByName(sortBy)
	if !ok {
		return nil, fmt.Errorf("coldtier: table %s: schema lacks the sortBy column %q", name, sortBy)
	}
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{sortField.ID}, FieldID: 1000, Name: sortBy + "_day", Transform: iceberg.DayTransform{},
	})
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
	tbl, err = cat.CreateTable(ctx, ident, schema,
		catalog.WithPartitionSpec(&spec), catalog.WithLocation(c.location(name)), catalog.WithProperties(props))
	if errors.Is(err, catalog.ErrTableAlreadyExists) { // another node created it first
		return cat.LoadTable(ctx, ident)
	}
	if err != nil {
		return nil, fmt.Errorf("coldtier: create table %s: %w", strings.Join(ident, "."), err)
	}
	return tbl, nil
}
