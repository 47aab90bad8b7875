// Package catalog opens the Iceberg catalog that registers sluice's cold
// tables (the SQL catalog on SQLite or PostgreSQL, or the REST catalog
// protocol) with the file IO of the warehouse their files go to, and
// creates a sluice table's Iceberg table on first use. It is the part of
// the cold tier that knows where things live; package coldtier writes the
// tables, package coldread reads them.
package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	icat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest" // registers the "rest" catalog type
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/io/gocloud/blobfs"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers only the s3:// file IO: gocloud would link the GCS and Azure SDKs too
	"github.com/apache/iceberg-go/metrics"
	itable "github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gocloud.dev/blob"
	_ "modernc.org/sqlite" // the SQLite driver of the SQL catalog (pure Go)
)

// Location says where sluice's Iceberg tables live: the warehouse their
// files go to and the catalog that registers them.
type Location struct {
	// Warehouse is the root under which tables are written:
	// "s3://bucket/prefix" or a local directory. A table's data and
	// metadata go to Warehouse/<namespace>/<table>.
	Warehouse string
	// S3 configures the object store when Warehouse is s3://.
	S3 S3
	// Catalog is the Iceberg catalog the tables are registered in.
	Catalog Config
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

// Config is an Iceberg catalog.
type Config struct {
	// Type is "sql" (default) or "rest".
	Type string
	// URI: for sql, a SQLite file path (or "file:..." DSN) or a
	// PostgreSQL connection string (a postgres:// or postgresql:// URL, or
	// libpq's keyword/value form "host=... dbname=..."; what it leaves out
	// comes from the PG* environment variables and ~/.pgpass); for rest,
	// the catalog's base URL. Default for sql: <stateDir>/iceberg-catalog.db
	// (Location.Defaults).
	URI string
	// Name is the catalog name stored with each table (default "sluice").
	Name string
	// Namespace holds sluice's tables (default "sluice").
	Namespace string
	// Properties are passed to the catalog as they are (e.g.
	// "warehouse", "scope", "oauth2-server-uri").
	Properties map[string]string
	// Token and Credential, when set, return a rest catalog's bearer token
	// or its OAuth2 client credentials ("client_id:client_secret"), read
	// at Open; they take the place of the "token" and "credential"
	// properties. Password, when set, returns a PostgreSQL catalog's
	// password. Errors name where the secret was looked for, never a
	// value.
	Token, Credential, Password func() (string, error) `json:"-"`
}

// Defaults fills in what l leaves out and checks it: a SQL catalog
// without a URI goes to stateDir/iceberg-catalog.db, a local warehouse
// becomes an absolute path.
func (l *Location) Defaults(stateDir string) error {
	if l.Warehouse == "" {
		return errors.New("coldtier: warehouse is empty")
	}
	if l.Catalog.Type == "" {
		l.Catalog.Type = "sql"
	}
	if l.Catalog.Name == "" {
		l.Catalog.Name = "sluice"
	}
	if l.Catalog.Namespace == "" {
		l.Catalog.Namespace = "sluice"
	}
	if l.S3.Region == "" {
		l.S3.Region = "us-east-1"
	}
	if l.Catalog.Type == "sql" && l.Catalog.URI == "" {
		if stateDir == "" {
			return errors.New("coldtier: sql catalog: no URI and no state directory")
		}
		l.Catalog.URI = filepath.Join(stateDir, "iceberg-catalog.db")
	}
	if l.Catalog.Type == "sql" {
		if _, err := SQLBackendOf(l.Catalog.URI); err != nil {
			return err
		}
	}
	if !strings.HasPrefix(l.Warehouse, "s3://") {
		abs, err := filepath.Abs(l.Warehouse)
		if err != nil {
			return err
		}
		l.Warehouse = abs
	}
	return nil
}

// ioProps are the file IO properties (iceberg-go's io package), passed to
// the catalog so that every table it loads reads and writes with them.
func (l *Location) ioProps() iceberg.Properties {
	p := iceberg.Properties{}
	if strings.HasPrefix(l.Warehouse, "s3://") {
		p[icebergio.S3Region] = l.S3.Region
		if l.S3.Endpoint != "" {
			p[icebergio.S3EndpointURL] = l.S3.Endpoint
		}
		p[icebergio.S3ForceVirtualAddressing] = fmt.Sprint(!l.S3.PathStyle)
		if l.S3.AccessKeyID != "" {
			p[icebergio.S3AccessKeyID] = l.S3.AccessKeyID
			p[icebergio.S3SecretAccessKey] = l.S3.SecretAccessKey
		}
	}
	return p
}

// Open opens the catalog of l (Defaults applied) with the warehouse's file
// IO. The tables it loads report their commits to reporter, when given:
// iceberg-go builds a catalog's reporter from a factory registered by name
// in its own registry, so Open registers reporter under a name of its own
// for this catalog and the catalog's Close removes it; no registry of
// sluice's sits between a table and its counters.
func Open(ctx context.Context, l Location, reporter metrics.Reporter) (icat.Catalog, error) {
	props := iceberg.Properties{}
	for k, v := range l.Catalog.Properties {
		props[k] = v
	}
	for k, v := range l.ioProps() {
		props[k] = v
	}
	var deregister func() error
	if reporter != nil {
		name := "sluice-coldtier-" + uuid.NewString()
		metrics.Register(name, func(map[string]string) (metrics.Reporter, error) { return reporter, nil })
		deregister = func() error { metrics.Deregister(name); return nil }
		props[metrics.ReporterImplKey] = name
	}
	cat, err := open(ctx, l, props)
	if err != nil {
		if deregister != nil {
			deregister()
		}
		return nil, err
	}
	if deregister == nil {
		return cat, nil
	}
	return &reporting{Catalog: cat, deregister: deregister}, nil
}

func open(ctx context.Context, l Location, props iceberg.Properties) (icat.Catalog, error) {
	switch l.Catalog.Type {
	case "sql":
		backend, err := SQLBackendOf(l.Catalog.URI)
		if err != nil {
			return nil, err
		}
		if backend == PostgreSQL {
			return openPostgres(ctx, l.Catalog, props)
		}
		props["type"] = "sql"
		props[sqlcat.DriverKey] = "sqlite"
		props[sqlcat.DialectKey] = string(sqlcat.SQLite)
		props["uri"] = sqliteDSN(l.Catalog.URI)
	case "rest":
		props["type"] = "rest"
		props["uri"] = l.Catalog.URI
		for key, secret := range map[string]func() (string, error){"token": l.Catalog.Token, "credential": l.Catalog.Credential} {
			if secret == nil {
				continue
			}
			v, err := secret()
			if err != nil {
				return nil, fmt.Errorf("coldtier: rest catalog %s: %w", key, err)
			}
			props[key] = v
		}
	default:
		return nil, fmt.Errorf("coldtier: catalog type %q: want sql or rest", l.Catalog.Type)
	}
	cat, err := icat.Load(ctx, l.Catalog.Name, props)
	if err != nil && (errors.Is(err, rest.ErrUnauthorized) || errors.Is(err, rest.ErrOAuthError)) {
		// iceberg-go's text is the server's ("NotAuthorizedException: ...",
		// or the token endpoint's "invalid_client: ..."): say what it means.
		return nil, fmt.Errorf("coldtier: open %s catalog %s: %w (catalog.token or catalog.credential): %w", l.Catalog.Type, l.Catalog.URI, ErrUnauthorized, err)
	}
	if err != nil {
		return nil, fmt.Errorf("coldtier: open %s catalog %s: %w", l.Catalog.Type, l.Catalog.URI, err)
	}
	return cat, nil
}

// ErrUnauthorized: the catalog refused the credentials it was opened with
// (or asked for some and got none).
var ErrUnauthorized = errors.New("unauthorized")

// reporting is a catalog whose commit reporter Open registered; Close
// closes the catalog and removes the registration.
type reporting struct {
	icat.Catalog
	deregister func() error
}

func (r *reporting) Close() error {
	var err error
	if cl, ok := r.Catalog.(interface{ Close() error }); ok {
		err = cl.Close()
	}
	return errors.Join(err, r.deregister())
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
func openPostgres(ctx context.Context, c Config, props iceberg.Properties) (icat.Catalog, error) {
	pgcfg, err := pgx.ParseConfig(c.URI)
	if err != nil {
		// pgx redacts the password of the string it quotes.
		return nil, fmt.Errorf("%w: PostgreSQL connection string: %w", ErrCatalogURI, err)
	}
	if c.Password != nil {
		if pgcfg.Password != "" {
			return nil, fmt.Errorf("%w: a password both in the PostgreSQL connection string and in catalog.password", ErrCatalogURI)
		}
		if pgcfg.Password, err = c.Password(); err != nil {
			return nil, fmt.Errorf("coldtier: sql catalog password: %w", err)
		}
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
		cat, err = sqlcat.NewCatalog(c.Name, db, sqlcat.Postgres, props)
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
func (l *Location) location(name string) string {
	if strings.HasPrefix(l.Warehouse, "s3://") {
		return strings.TrimSuffix(l.Warehouse, "/") + "/" + l.Catalog.Namespace + "/" + name
	}
	return filepath.Join(l.Warehouse, l.Catalog.Namespace, name)
}

// LoadOrCreate loads the Iceberg table of a sluice table from cat (opened
// for l), creating the namespace and the table (partitioned by day of the
// sort column, with the table properties props) if they do not exist yet.
//
// The table declares the sort order hashBy ascending, nulls first: a run
// reads the store with table.Query.ByKey, so each file's rows are sorted
// by key and its row groups' statistics let readers skip by key.
func LoadOrCreate(ctx context.Context, cat icat.Catalog, l Location, name string, schema *iceberg.Schema, sortBy, hashBy string, props iceberg.Properties) (*itable.Table, error) {
	ident := itable.Identifier{l.Catalog.Namespace, name}
	tbl, err := cat.LoadTable(ctx, ident)
	if err == nil {
		return tbl, nil
	}
	if !errors.Is(err, icat.ErrNoSuchTable) {
		return nil, fmt.Errorf("coldtier: load table %s: %w", strings.Join(ident, "."), err)
	}
	ns := itable.Identifier{l.Catalog.Namespace}
	if ok, err := cat.CheckNamespaceExists(ctx, ns); err != nil {
		return nil, fmt.Errorf("coldtier: namespace %s: %w", l.Catalog.Namespace, err)
	} else if !ok {
		if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, icat.ErrNamespaceAlreadyExists) {
			// Another node created it at the same time. iceberg-go tells
			// that case by re-reading inside its failed transaction, which
			// under SERIALIZABLE or REPEATABLE READ still does not see
			// the winner: look again in a new one.
			if ok, cerr := cat.CheckNamespaceExists(ctx, ns); cerr != nil || !ok {
				return nil, fmt.Errorf("coldtier: create namespace %s: %w", l.Catalog.Namespace, err)
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
	opts := []icat.CreateTableOpt{icat.WithPartitionSpec(&spec), icat.WithLocation(l.location(name)), icat.WithProperties(props)}
	if hashField, ok := schema.FindFieldByName(hashBy); ok && hashBy != "" {
		order, err := itable.NewSortOrder(1, []itable.SortField{{
			SourceIDs: []int{hashField.ID}, Transform: iceberg.IdentityTransform{},
			Direction: itable.SortASC, NullOrder: itable.NullsFirst,
		}})
		if err != nil {
			return nil, fmt.Errorf("coldtier: table %s: sort order: %w", name, err)
		}
		opts = append(opts, icat.WithSortOrder(order))
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
		if errors.Is(err, icat.ErrTableAlreadyExists) { // another node created it first
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

// Upload sizes of LeanUploads: S3's smallest part (5 MiB), two in flight.
const (
	leanPartBytes     = 5 << 20
	leanPartsInFlight = 2
)

// LeanUploads wraps a table's file IO so that the files it creates on S3
// are uploaded in parts of 5 MiB, two at a time, instead of the AWS
// transfer manager's default 8 MiB parts, five at a time (iceberg-go
// creates its files with gocloud's default writer options): a file of the
// maintenance rewrite (up to target_file_bytes, 128 MiB by default) then
// holds ~15 MiB of parts rather than ~48 MiB. Other file IO is returned as
// it is.
func LeanUploads(fsF itable.FSysF) itable.FSysF {
	return func(ctx context.Context) (icebergio.IO, error) {
		fs, err := fsF(ctx)
		if err != nil {
			return nil, err
		}
		if bfs, ok := fs.(*blobfs.FileIO); ok {
			return leanUploadIO{bfs, ctx}, nil
		}
		return fs, nil
	}
}

// leanUploadIO is iceberg-go's gocloud file IO (every method of it) with
// Create giving the writer smaller and fewer parts in flight.
type leanUploadIO struct {
	*blobfs.FileIO
	ctx context.Context // the IO's, as iceberg-go's own Create uses
}

func (l leanUploadIO) Create(name string) (icebergio.FileWriter, error) {
	return l.NewWriter(l.ctx, name, true, &blob.WriterOptions{
		BufferSize:     leanPartBytes,
		MaxConcurrency: leanPartsInFlight,
	})
}
