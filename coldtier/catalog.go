package coldtier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/rest" // registers the "rest" catalog type
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers only the s3:// file IO: gocloud would link the GCS and Azure SDKs too
	itable "github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
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
	// Unsorted writes a day's rows in the store's partition-hash order
	// instead of sorted by the hashBy value, and new tables declare no
	// sort order. Sorting costs a first pass over each day that reads one
	// block per key: negligible with blocks of many rows, about half the
	// compaction speed when nearly every block holds one row (millions of
	// keys); sorted files let readers skip row groups by key.
	Unsorted bool
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
	// URI: for sql, a SQLite file path (or "file:..." DSN) or a
	// PostgreSQL connection string (a postgres:// or postgresql:// URL, or
	// libpq's keyword/value form "host=... dbname=..."; what it leaves out
	// comes from the PG* environment variables and ~/.pgpass); for rest,
	// the catalog's base URL. Default for sql: <StateDir>/iceberg-catalog.db.
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
	if c.Catalog.Type == "sql" {
		if _, err := SQLBackendOf(c.Catalog.URI); err != nil {
			return err
		}
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
		backend, err := SQLBackendOf(c.Catalog.URI)
		if err != nil {
			return nil, err
		}
		if backend == PostgreSQL {
			return openPostgres(ctx, c, props)
		}
		props["type"] = "sql"
		props[sqlcat.DriverKey] = "sqlite"
		props[sqlcat.DialectKey] = string(sqlcat.SQLite)
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

// SQLBackend is the database a SQL catalog lives in.
type SQLBackend int

const (
	SQLite     SQLBackend = iota // a file, through modernc.org/sqlite
	PostgreSQL                   // a server, through pgx
)

// ErrCatalogURI is returned for a SQL catalog URI that names neither a
// SQLite file nor a PostgreSQL database.
var ErrCatalogURI = errors.New("coldtier: sql catalog uri")

// SQLBackendOf tells which database a SQL catalog URI names: a
// postgres:// or postgresql:// URL, or a libpq keyword/value string (its
// first keyword is one of libpq's: host=, dbname=, user=, service=, ...),
// is PostgreSQL; another scheme is an error; anything else is a SQLite
// path or "file:" DSN.
func SQLBackendOf(uri string) (SQLBackend, error) {
	if strings.HasPrefix(uri, "postgres://") || strings.HasPrefix(uri, "postgresql://") {
		return PostgreSQL, nil
	}
	if scheme, _, ok := strings.Cut(uri, "://"); ok {
		return 0, fmt.Errorf("%w: unknown scheme %q: want postgres:// or postgresql:// (PostgreSQL), libpq's \"host=... dbname=...\" form, or a SQLite file path", ErrCatalogURI, scheme)
	}
	if key, _, ok := strings.Cut(strings.TrimSpace(uri), "="); ok && libpqKeywords[strings.TrimSpace(key)] {
		return PostgreSQL, nil
	}
	return SQLite, nil
}

// libpqKeywords are libpq's connection keywords
// (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS):
// a URI starting "keyword=" is a keyword/value connection string.
var libpqKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "password": true,
	"passfile": true, "connect_timeout": true, "client_encoding": true, "options": true,
	"application_name": true, "fallback_application_name": true, "keepalives": true, "sslmode": true,
	"sslcert": true, "sslkey": true, "sslrootcert": true, "sslpassword": true, "service": true,
	"target_session_attrs": true, "channel_binding": true, "gssencmode": true, "krbsrvname": true,
}

// pgConnectTimeout bounds connecting to the catalog's server when neither
// the connection string (connect_timeout) nor PGCONNECT_TIMEOUT does:
// iceberg-go runs its first statements without a deadline, so a server
// that drops packets would otherwise hang Open for minutes.
const pgConnectTimeout = 10 * time.Second

// openPostgres opens a SQL catalog on PostgreSQL through pgx's
// database/sql driver: the connection string goes through pgx's libpq-style
// parsing (PG* environment variables, ~/.pgpass, the service file fill in
// what it leaves out), a ping names the server when it cannot be reached,
// then iceberg-go's SQL catalog with bun's PostgreSQL dialect creates its
// tables (iceberg_tables, iceberg_namespace_properties) if they are missing.
func openPostgres(ctx context.Context, c *Config, props iceberg.Properties) (catalog.Catalog, error) {
	pgcfg, err := pgx.ParseConfig(c.Catalog.URI)
	if err != nil {
		// pgx redacts the password of the string it quotes.
		return nil, fmt.Errorf("%w: PostgreSQL connection string: %w", ErrCatalogURI, err)
	}
	if pgcfg.ConnectTimeout == 0 {
		pgcfg.ConnectTimeout = pgConnectTimeout
	}
	where := pgServer(pgcfg.Config)
	db := stdlib.OpenDB(*pgcfg)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("coldtier: sql catalog on %s: %w", where, err)
	}
	props[sqlcat.DialectKey] = string(sqlcat.Postgres)
	var cat *sqlcat.Catalog
	for attempt := 1; ; attempt++ {
		cat, err = sqlcat.NewCatalog(c.Catalog.Name, db, sqlcat.Postgres, props)
		// Two nodes starting together on a new database both run CREATE
		// TABLE IF NOT EXISTS; PostgreSQL lets one of them fail (see
		// createRace): the tables exist then, and the next try finds them.
		if err == nil || !createRace(err) || attempt == 5 {
			break
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("coldtier: sql catalog on %s: %w", where, err)
	}
	return &pgCatalog{Catalog: cat, db: db}, nil
}

// createRace tells the error of a CREATE TABLE IF NOT EXISTS that lost
// to a concurrent one: IF NOT EXISTS is checked before the table's row
// type is inserted, so the loser fails with unique_violation (on
// pg_type_typname_nsp_index), duplicate_object ("type ... already
// exists") or duplicate_table, depending on where the two meet.
func createRace(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "23505", "42710", "42P07":
		return true
	}
	return false
}

// pgServer names the server(s) a PostgreSQL config connects to, with the
// database and user but never the password.
func pgServer(cfg pgconn.Config) string {
	addr := func(host string, port uint16) string {
		if strings.HasPrefix(host, "/") {
			return fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
		}
		return net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	hosts := []string{addr(cfg.Host, cfg.Port)}
	for _, fb := range cfg.Fallbacks {
		if a := addr(fb.Host, fb.Port); !slices.Contains(hosts, a) {
			hosts = append(hosts, a)
		}
	}
	return fmt.Sprintf("PostgreSQL %s (database %q, user %q)", strings.Join(hosts, ","), cfg.Database, cfg.User)
}

// pgCatalog is the SQL catalog with the connection pool it runs on, which
// iceberg-go leaves to its opener to close.
type pgCatalog struct {
	*sqlcat.Catalog
	db *sql.DB
}

func (p *pgCatalog) Close() error {
	return errors.Join(p.Catalog.Close(), p.db.Close())
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
//
// The table declares the sort order hashBy ascending, nulls first: a run
// reads the store with table.Query.ByKey, so each file's rows are sorted
// by key and its row groups' statistics let readers skip by key.
func loadOrCreate(ctx context.Context, cat catalog.Catalog, c *Config, name string, schema *iceberg.Schema, sortBy, hashBy string) (*itable.Table, error) {
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
			// Another node created it at the same time. iceberg-go tells
			// that case by re-reading inside its failed transaction, which
			// under SERIALIZABLE or REPEATABLE READ still does not see
			// the winner: look again in a new one.
			if ok, cerr := cat.CheckNamespaceExists(ctx, ns); cerr != nil || !ok {
				return nil, fmt.Errorf("coldtier: create namespace %s: %w", c.Catalog.Namespace, err)
			}
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
	opts := []catalog.CreateTableOpt{catalog.WithPartitionSpec(&spec), catalog.WithLocation(c.location(name)), catalog.WithProperties(props)}
	if hashField, ok := schema.FindFieldByName(hashBy); ok && hashBy != "" {
		order, err := itable.NewSortOrder(1, []itable.SortField{{
			SourceIDs: []int{hashField.ID}, Transform: iceberg.IdentityTransform{},
			Direction: itable.SortASC, NullOrder: itable.NullsFirst,
		}})
		if err != nil {
			return nil, fmt.Errorf("coldtier: table %s: sort order: %w", name, err)
		}
		opts = append(opts, catalog.WithSortOrder(order))
	}
	// Two nodes creating the table at once: the loser gets
	// ErrTableAlreadyExists, or, on SQLite in WAL mode, SQLITE_BUSY at once
	// (a read transaction that must become a write one does not wait for
	// busy_timeout, which would deadlock). Either way the table may exist
	// now: load it, else try again a few times.
	for attempt := 1; ; attempt++ {
		tbl, err = cat.CreateTable(ctx, ident, schema, opts...)
		if err == nil {
			return tbl, nil
		}
		if errors.Is(err, catalog.ErrTableAlreadyExists) { // another node created it first
			return cat.LoadTable(ctx, ident)
		}
		if loaded, lerr := cat.LoadTable(ctx, ident); lerr == nil {
			return loaded, nil
		}
		if attempt == 5 || ctx.Err() != nil {
			return nil, fmt.Errorf("coldtier: create table %s: %w", strings.Join(ident, "."), err)
		}
		select {
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
