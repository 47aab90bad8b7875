package config

import (
	"fmt"
	"strings"
	"time"
)

// Iceberg sends a table's compaction to an Apache Iceberg table (package
// coldtier, docs/cold-tier.md) instead of loose Parquet files under
// compact.dir.
type Iceberg struct {
	// Warehouse is "s3://bucket/prefix" or a local directory; the table's
	// files go under <warehouse>/<namespace>/<table>.
	Warehouse string `yaml:"warehouse"`
	// S3 is the object store of an s3:// warehouse. Credentials come from
	// the AWS environment variables, AWS_PROFILE or ~/.aws/credentials.
	S3 IcebergS3 `yaml:"s3"`
	// Catalog registers the table; default: a SQL catalog in the SQLite
	// file <storage.dir>/iceberg-catalog.db. A SQL catalog's uri may also
	// be a PostgreSQL connection string (postgres:// URL or libpq's
	// "host=... dbname=..." form; credentials from it, or from PGUSER,
	// PGPASSWORD, ~/.pgpass).
	Catalog IcebergCatalog `yaml:"catalog"`
	// Node names this server in the snapshots it commits (default: the
	// host name); nodes sharing a table need distinct names.
	Node string `yaml:"node"`
	// RowGroupRows bounds the rows per Parquet row group (default 131072);
	// a run's memory is bounded apart (docs/cold-tier.md).
	RowGroupRows int `yaml:"row_group_rows"`
	// Unsorted writes files in the store's hash order instead of sorted by
	// the hashBy value (faster compaction for tables of millions of keys;
	// see docs/cold-tier.md).
	Unsorted bool `yaml:"unsorted"`
	// Continuous commits by sequence: each compact.interval, every row
	// stored since the last commit, whatever its event time; compact.after
	// and remove then only say how long committed rows stay in the hot
	// store (docs/cold-tier.md, "Freshness").
	Continuous bool `yaml:"continuous"`
	// OrphanInterval is how often the server deletes orphan files: data
	// files of runs killed between their upload and their commit, which no
	// snapshot references (default 24h; negative: never). Each pass lists
	// the table's whole location, so keep it rare.
	OrphanInterval time.Duration `yaml:"orphan_interval"`
	// OrphanAge is how old an unreferenced file must be before it is
	// deleted (default 72h), also the least older_than an on-demand
	// cleanup may ask for. sluice's own uploads in flight are kept
	// whatever the age (their runs' in-flight markers name them,
	// docs/cold-tier.md "Orphan cleanup"); the age is the margin for
	// everything else, so it must exceed MinOrphanAge: the longest read
	// lease plus the longest compaction run.
	OrphanAge time.Duration `yaml:"orphan_age"`
	// Maintain is the table's maintenance: small files rewritten into
	// large ones, manifests merged, old snapshots expired
	// (docs/cold-tier.md, "Maintenance").
	Maintain IcebergMaintain `yaml:"maintain"`
}

// IcebergMaintain configures the maintenance of a table's Iceberg table;
// zero fields take the defaults below.
type IcebergMaintain struct {
	// Interval is how often the server runs it (default 1h; negative:
	// never; `sluice compact --maintain` and POST
	// /v1/tables/{t}/maintain run it on demand).
	Interval time.Duration `yaml:"interval"`
	// TargetFileBytes is the size of the files the rewrite writes (default
	// 128 MiB); a file under 3/4 of it is small.
	TargetFileBytes int64 `yaml:"target_file_bytes"`
	// MinInputFiles: a day partition is rewritten once it has this many
	// small files (default 2).
	MinInputFiles int `yaml:"min_input_files"`
	// KeepSnapshots is how many of the newest snapshots are always kept
	// (default 100).
	KeepSnapshots int `yaml:"keep_snapshots"`
	// SnapshotAge: an older snapshot is kept while it was the current one
	// less than this long ago (default 1h): longer than any reader's scan.
	SnapshotAge time.Duration `yaml:"snapshot_age"`
	// MetadataVersions is how many earlier metadata files are kept
	// (default 100).
	MetadataVersions int `yaml:"metadata_versions"`
	// DeleteFiles: a pass also runs once this node's runs have committed
	// this many position delete files since its last pass (a keyed
	// table's; 0, the default, or negative: the interval only). Every
	// query reads every delete file until a pass applies it, so a keyed
	// table committing every few seconds needs passes far more often than
	// the interval; it is off by default because a pass that overlaps a
	// run can leave an updated key's old row (docs/upserts.md,
	// "Maintenance").
	DeleteFiles int `yaml:"delete_files"`
}

// Defaults of the maintenance (the others are coldtier's).
const DefaultMaintainInterval = time.Hour

// MaintainDeleteFiles is delete_files, negative read as 0 (0: the
// interval only).
func (m *IcebergMaintain) MaintainDeleteFiles() int {
	return max(m.DeleteFiles, 0)
}

// MaintainInterval is the maintenance's interval with the default applied
// (0: never).
func (m *IcebergMaintain) MaintainInterval() time.Duration {
	switch {
	case m.Interval < 0:
		return 0
	case m.Interval == 0:
		return DefaultMaintainInterval
	}
	return m.Interval
}

// Defaults and bounds of the orphan cleanup.
const (
	DefaultOrphanInterval = 24 * time.Hour
	DefaultOrphanAge      = 72 * time.Hour
	// MaxLeaseTTL is the longest read lease a server grants (the
	// server's MaxLeaseTTL): while one lives, no node commits, so an
	// upload may wait that long for its commit.
	MaxLeaseTTL = time.Hour
	// MaxCompactionRun is how long after its start a compaction run (or
	// a maintenance step) may still commit (coldtier.MaxRunDuration,
	// lease waits included); past it the run abandons its files.
	MaxCompactionRun = 6 * time.Hour
	// MinOrphanAge is the bound orphan_age must exceed: an unreferenced
	// file younger than a lease and a run may be an upload whose commit
	// is still to come.
	MinOrphanAge = MaxLeaseTTL + MaxCompactionRun
)

// Orphans returns the orphan cleanup's interval (0: never) and age, with
// the defaults applied.
func (i *Iceberg) Orphans() (interval, age time.Duration) {
	interval, age = i.OrphanInterval, i.OrphanAge
	switch {
	case interval < 0:
		interval = 0
	case interval == 0:
		interval = DefaultOrphanInterval
	}
	if age == 0 {
		age = DefaultOrphanAge
	}
	return interval, age
}

// IcebergS3 is an S3-compatible endpoint.
type IcebergS3 struct {
	Endpoint  string `yaml:"endpoint"`   // e.g. http://127.0.0.1:7070; empty: AWS
	Region    string `yaml:"region"`     // default us-east-1
	PathStyle bool   `yaml:"path_style"` // bucket in the URL path (self-hosted servers)
}

// IcebergCatalog is an Iceberg catalog: "sql" (a SQLite file or a
// PostgreSQL database) or "rest".
type IcebergCatalog struct {
	Type       string            `yaml:"type"`
	URI        string            `yaml:"uri"`
	Name       string            `yaml:"name"`
	Namespace  string            `yaml:"namespace"`
	Properties map[string]string `yaml:"properties"`
	// Token is a rest catalog's bearer token; Credential its OAuth2
	// client credentials, "client_id:client_secret", which iceberg-go
	// exchanges for tokens at the catalog's token endpoint (or the
	// oauth2-server-uri property's, with the scope property's scope).
	// Both are read when the catalog is opened.
	Token      Secret `yaml:"token"`
	Credential Secret `yaml:"credential"`
	// Password is a PostgreSQL catalog's password, instead of one inside
	// the uri (which then must not hold one). The server's certificate is
	// checked as the uri says: sslmode=verify-full and sslrootcert=<CA
	// file> (docs/security.md, "Outbound").
	Password Secret `yaml:"password"`
}

// secretProperties are catalog properties that hold secrets: they belong
// in the catalog's Secret fields, since properties are plain strings that
// any dump of the config shows.
var secretProperties = []string{"token", "credential", "password"}

func (c *IcebergCatalog) validateSecrets(where string) []error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(where+": compact.iceberg.catalog."+format, args...))
	}
	for _, k := range secretProperties {
		if _, ok := c.Properties[k]; ok {
			add("properties.%s: a secret in plain properties; give it as catalog.%s: {env: NAME} or {file: PATH}", k, k)
		}
	}
	if c.Type == "rest" && c.Password.IsSet() {
		add("password: for a sql catalog on PostgreSQL; a rest catalog takes token or credential")
	}
	if c.Type != "rest" && (c.Token.IsSet() || c.Credential.IsSet()) {
		add("token and credential: for a rest catalog")
	}
	if c.Token.IsSet() && c.Credential.IsSet() {
		add("token and credential: set one")
	}
	errs = append(errs, c.Token.Check(where+": compact.iceberg.catalog.token")...)
	errs = append(errs, c.Credential.Check(where+": compact.iceberg.catalog.credential")...)
	return append(errs, c.Password.Check(where+": compact.iceberg.catalog.password")...)
}

func (i *Iceberg) validate(where string) []error {
	if i == nil {
		return nil
	}
	var errs []error
	if i.Warehouse == "" {
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.warehouse: empty (s3://bucket/prefix or a directory)", where))
	}
	if strings.HasPrefix(i.Warehouse, "s3://") && len(strings.TrimPrefix(i.Warehouse, "s3://")) == 0 {
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.warehouse %q: no bucket", where, i.Warehouse))
	}
	switch i.Catalog.Type {
	case "", "sql":
		if err := sqlCatalogURI(i.Catalog.URI); err != nil {
			errs = append(errs, fmt.Errorf("%s: compact.iceberg.catalog.uri: %w", where, err))
		}
	case "rest":
		if i.Catalog.URI == "" {
			errs = append(errs, fmt.Errorf("%s: compact.iceberg.catalog.uri: required for a rest catalog", where))
		}
	default:
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.catalog.type %q: want sql or rest", where, i.Catalog.Type))
	}
	errs = append(errs, i.Catalog.validateSecrets(where)...)
	switch {
	case i.OrphanAge < 0:
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.orphan_age: negative", where))
	case i.OrphanAge > 0 && i.OrphanAge <= MinOrphanAge:
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.orphan_age %v: must exceed %v, the longest read lease (%v) plus the longest compaction run (%v): a younger unreferenced file may be an upload whose commit is still to come",
			where, i.OrphanAge, MinOrphanAge, MaxLeaseTTL, MaxCompactionRun))
	}
	m := i.Maintain
	for _, f := range []struct {
		key string
		bad bool
	}{
		{"target_file_bytes", m.TargetFileBytes < 0 || (m.TargetFileBytes > 0 && m.TargetFileBytes < 1<<20)},
		{"min_input_files", m.MinInputFiles < 0},
		{"keep_snapshots", m.KeepSnapshots < 0},
		{"snapshot_age", m.SnapshotAge < 0},
		{"metadata_versions", m.MetadataVersions < 0},
	} {
		if f.bad {
			errs = append(errs, fmt.Errorf("%s: compact.iceberg.maintain.%s: negative (or, for target_file_bytes, under 1 MiB)", where, f.key))
		}
	}
	if i.RowGroupRows < 0 {
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.row_group_rows: negative", where))
	}
	return errs
}

// sqlCatalogURI checks the scheme of a SQL catalog's uri: postgres:// or
// postgresql://, or none (a SQLite path, or libpq's keyword/value string).
// The rest of a PostgreSQL connection string (hosts, ports, options, which
// libpq lets list several hosts) is parsed by package coldtier when it
// opens the catalog. The error never quotes the uri, which may hold a
// password.
func sqlCatalogURI(uri string) error {
	scheme, _, ok := strings.Cut(uri, "://")
	if !ok || scheme == "postgres" || scheme == "postgresql" {
		return nil
	}
	return fmt.Errorf("unknown scheme %q: want postgres:// or postgresql:// (PostgreSQL), libpq's \"host=... dbname=...\" form, or a SQLite file path", scheme)
}
