// Package config is the server's YAML configuration: the tables (partition
// and event-time columns, schema, TTL, computed columns and filters,
// compaction), the storage directory and the listen addresses. Every field
// can be overridden by an environment variable (SLUICE_...), and Validate
// reports every problem at once so that one start shows all of them.
//
// It describes and validates only: plain structs, and the checks it can make
// alone. The packages that run a config own their options (stream's
// KafkaOptions, compute's Config, rdbtool's FilterSpec, coldapi's Config);
// package server builds them from these structs and reports the problems
// only they can find (docs/architecture.md). Of sluice it imports coltype
// alone (TestDescribesOnly).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicedb/sluice/coltype"
)

// Config is the whole server configuration.
type Config struct {
	Storage Storage `yaml:"storage"`
	Listen  Listen  `yaml:"listen"`
	Limits  Limits  `yaml:"limits"`
	Tables  []Table `yaml:"tables"`
	Cluster Cluster `yaml:"cluster"`
	Auth    Auth    `yaml:"auth"`
	Ingress Ingress `yaml:"ingress"`
	OTLP    OTLP    `yaml:"otlp"`

	// BaseDir resolves relative script paths in computed columns and
	// filters; Load sets it to the config file's directory. The storage and
	// compaction directories are relative to the working directory, as
	// operators expect of a server's data directory.
	BaseDir string `yaml:"-"`

	// Warnings are what Parse found suspicious but not wrong: environment
	// variables under SLUICE_ that override nothing (a mistyped name would
	// otherwise be ignored in silence). The server logs them at start.
	Warnings []string `yaml:"-"`
}

// Storage is where the embedded store lives.
type Storage struct {
	// Dir is the store's directory (default ./data, relative to the
	// working directory).
	Dir string `yaml:"dir"`
	// MinFreeBytes is the space the store's filesystem keeps free for the
	// store's own flushes and compactions: a write that would leave less
	// is refused (HTTP ingest gets 507, stream sources retry with backoff)
	// instead of ending the process. Default 256 MiB (table.
	// DefaultMinFreeBytes); negative turns the guard off.
	MinFreeBytes int64 `yaml:"min_free_bytes"`
	// ReserveBytes is the size of the reserve file (sluice.reserve in
	// dir) released when the disk fills anyway, and at a start on a full
	// disk; writes resume once it can be made again. Default 64 MiB;
	// negative: no reserve.
	ReserveBytes int64 `yaml:"reserve_bytes"`
}

// Listen are the addresses the server binds.
type Listen struct {
	// HTTP is the API address (default 127.0.0.1:8080).
	HTTP string `yaml:"http"`
	// Pprof turns on /debug/pprof/ on the API address.
	Pprof bool `yaml:"pprof"`
	// TLS, when its cert_file is set, serves the API over HTTPS only.
	TLS TLS `yaml:"tls"`
	// MaxConnections bounds the client connections open at once, so that
	// idle clients cannot take every file descriptor. At the bound, the
	// connection idle the longest (between requests, or one that sent no
	// request for a second) is closed to make room for the new one; when
	// none is, the new connection is closed at once. Default 1024, which
	// with the store's own files fits the usual 4096 descriptors (raise
	// the process's limit, `ulimit -n`, before raising this).
	MaxConnections int `yaml:"max_connections"`
	// IdleTimeout closes a keep-alive connection that has waited this long
	// for its next request (on grpc too: a connection without calls).
	// Default 2m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// GRPC is the address of the gRPC listener (Talaria's Ingress service
	// and OTLP logs); empty: none. It has the API's TLS (listen.tls) and
	// auth.
	GRPC string `yaml:"grpc"`
	// AllowUnauthenticated lets a server without auth listen beyond
	// loopback (it warns at every start); without it such a server
	// refuses to start.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated"`
}

// Ingress configures Talaria's Ingress service on listen.grpc.
type Ingress struct {
	// Table takes the calls that name no table (gRPC metadata
	// x-sluice-table), as Talaria's clients do not; empty: such a call is
	// refused.
	Table string `yaml:"table"`
}

// OTLP configures OpenTelemetry log ingest (gRPC on listen.grpc, HTTP on
// POST /v1/logs).
type OTLP struct {
	// LogsTable stores the log records, a row each; empty: OTLP logs are
	// refused.
	LogsTable string `yaml:"logs_table"`
}

// TLS is the API listener's certificate and its policy on client
// certificates (PEM files). The certificate, its key and the client CA
// file are read again when they change (checked every reload_interval)
// and on SIGHUP: new handshakes get the new ones, established connections
// keep theirs, and files that do not load (a key that does not match, an
// expired certificate) are logged as an error while the previous
// certificate keeps serving. TLS 1.2 is the lowest version accepted.
type TLS struct {
	// CertFile is the server's certificate chain, leaf first.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the certificate's private key.
	KeyFile string `yaml:"key_file"`
	// ClientCAFile holds the CAs that client certificates must chain to.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is what the server asks of clients: none (the default
	// without client_ca_file), verify_if_given (the default with it: a
	// certificate sent is verified, a client without one goes on to the
	// other ways of authenticating) or require (a handshake without a
	// verified client certificate is refused).
	ClientAuth string `yaml:"client_auth"`
	// ReloadInterval is how often the files are checked for a change (by
	// size and modification time). Default 10s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// The values of listen.tls.client_auth.
const (
	ClientAuthNone          = "none"
	ClientAuthVerifyIfGiven = "verify_if_given"
	ClientAuthRequire       = "require"
)

// Limits bound what one client can cost the server.
type Limits struct {
	// MaxBodyBytes bounds a request body (after gzip decoding too);
	// larger bodies get 413. Default 64 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ReadTimeout bounds reading a whole request (headers and body), so a
	// slow client cannot hold an ingest slot. Default 30s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response; query streams are exempt
	// up to QueryTimeout. Default 60s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// QueryTimeout bounds one query. Default 5m.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// MaxInflight bounds the ingest batches being decoded, computed or
	// stored at once; one more gets 429 with Retry-After. Default 2×CPUs+2.
	MaxInflight int `yaml:"max_inflight"`
	// ShutdownTimeout bounds the graceful shutdown. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// IdempotencyTTL is how long an HTTP batch's Idempotency-Key is kept:
	// a retry with the same key and body within it gets the first answer
	// and stores nothing again. Default 24h; negative: the header is
	// ignored.
	IdempotencyTTL time.Duration `yaml:"idempotency_ttl"`
	// IdempotencyMaxKeys bounds the live Idempotency-Keys of one table
	// (each costs ~500 B of store until its TTL ends): a request with a
	// new key beyond it is refused (429), never stored without its key.
	// Default DefaultIdempotencyMaxKeys.
	IdempotencyMaxKeys int `yaml:"idempotency_max_keys"`
	// ScriptLogRate, ScriptLogBurst and ScriptMaxSeries are the log rate
	// limit and the series cap of every Lua function that sets none of
	// its own (log_rate, log_burst, max_series). 0: 10 lines a second,
	// 100 at once, 100 series; ScriptLogRate < 0: no limit.
	ScriptLogRate   float64 `yaml:"script_log_rate"`
	ScriptLogBurst  int     `yaml:"script_log_burst"`
	ScriptMaxSeries int     `yaml:"script_max_series"`
}

// Table is one time-series table.
type Table struct {
	Name string `yaml:"name"`
	// HashBy is the partition key column; empty puts every row in one
	// partition.
	HashBy string `yaml:"hashBy"`
	// SortBy is the event-time column; rows without it get their ingestion
	// time.
	SortBy string `yaml:"sortBy"`
	// PrimaryKey makes the table keep one row per value of these
	// columns, the latest (docs/upserts.md); empty: append-only. Fixed
	// when the table is created.
	PrimaryKey []string `yaml:"primary_key"`
	// Schema is the static schema; empty means inferred and widened as
	// rows arrive.
	Schema []Column `yaml:"schema"`
	// TTL drops data older than this (0 keeps it forever).
	TTL time.Duration `yaml:"ttl"`
	// BlockSpan is the time bucket of the store's blocks (default 1h; at
	// least 1s, dividing 24h; fixed when the table is created): the unit
	// of TTL, of a time-mode compaction's cut and of the hot retention,
	// and what a continuous cold tier's run reads keys of
	// (docs/cold-tier.md, "Freshness").
	BlockSpan time.Duration `yaml:"block_span"`
	// MaxColumns bounds an inferred schema (0: table.DefaultMaxColumns,
	// 1000); a row that would pass it goes to the dead-letter table.
	MaxColumns int `yaml:"max_columns"`
	// OnBadLine is what a malformed line does to its batch: "reject" (the
	// default: nothing of the batch is stored) or "skip" (the line is
	// reported and the rest stored).
	OnBadLine string `yaml:"on_bad_line"`
	// Computed columns, evaluated in this order, and filters, run before
	// them: as in `sluice compute` (config/compute.go).
	Computed []ComputedColumn `yaml:"computed"`
	Filters  []Filter         `yaml:"filters"`
	// Reload polls the script files and URLs of the computed columns and
	// filters this often and swaps changed versions in between batches
	// (0 = never; a version that fails to load is logged and the old one
	// keeps running).
	Reload  time.Duration `yaml:"reload"`
	Compact Compact       `yaml:"compact"`
	// Sources are streams (Kafka, NATS JetStream) the table consumes
	// besides HTTP (config/sources.go, docs/streams.md).
	Sources []Source `yaml:"sources"`
	// SchemaRegistry serves the schemas of the bodies sent to the table
	// over HTTP, or by `sluice ingest`, in a Schema Registry format
	// (framed messages, docs/streams.md), and of the registry dead
	// letters a replay decodes again.
	SchemaRegistry *SchemaRegistry `yaml:"schema_registry"`
	// RDB are the default filters and batch size of the Redis RDB
	// snapshots sent to the table (config/rdb.go, docs/rdb.md).
	RDB RDB `yaml:"rdb"`
}

// Column is one column of a static schema.
type Column struct {
	Name string `yaml:"name"`
	// Type is a compute type name or alias (int64, float64, string, bool,
	// timestamp, json, ...).
	Type string `yaml:"type"`
}

// Compact configures compaction to Parquet.
type Compact struct {
	// Interval between compaction runs; 0 turns compaction off.
	Interval time.Duration `yaml:"interval"`
	// After: data older than now-After is compacted (default 1h).
	After time.Duration `yaml:"after"`
	// Dir is the Parquet sink directory (files go to Dir/table/year=/...).
	Dir string `yaml:"dir"`
	// Remove drops compacted data from the hot store.
	Remove bool `yaml:"remove"`
	// Iceberg, when set, compacts into an Iceberg table instead of Dir.
	Iceberg *Iceberg `yaml:"iceberg"`
}

// Defaults.
const (
	DefaultHTTP            = "127.0.0.1:8080"
	DefaultStorageDir      = "data"
	DefaultMaxBodyBytes    = 64 << 20
	DefaultReadTimeout     = 30 * time.Second
	DefaultWriteTimeout    = 60 * time.Second
	DefaultQueryTimeout    = 5 * time.Minute
	DefaultShutdownTimeout = 30 * time.Second
	DefaultIdempotencyTTL  = 24 * time.Hour
	DefaultMaxConnections  = 1024
	DefaultIdleTimeout     = 2 * time.Minute
	DefaultTLSReload       = 10 * time.Second
	// DefaultIdempotencyMaxKeys: a key a second for a day, twice over
	// (~100 MB of store a table at most).
	DefaultIdempotencyMaxKeys = 200_000
	DefaultCompactAfter       = time.Hour
)

// Parse decodes YAML (unknown fields are errors: a typo must not silently
// drop a setting), applies environment overrides from env (nil means
// os.LookupEnv), fills defaults and validates. Every problem is reported at
// once.
func Parse(data []byte, env func(string) (string, bool)) (*Config, error) {
	cfg := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %w", locateSyntaxError(data, err))
	}
	var errs []error
	environ := []string(nil)
	if env == nil {
		env = os.LookupEnv
		environ = os.Environ()
	}
	known, err := applyEnv(cfg, env)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.Warnings = unknownEnv(environ, known)
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// yamlLine is the "yaml: line N: problem" of a syntax error.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// locateSyntaxError names the line a YAML syntax error is on. The parser
// reports the line where the enclosing block starts ("line 3: did not
// find expected key" for a key mis-indented on line 6); the first prefix
// of the document, in lines, that fails with the same problem ends at the
// line at fault.
func locateSyntaxError(data []byte, err error) error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	lines := bytes.SplitAfter(data, []byte("\n"))
	end := 0
	for k := 1; k <= len(lines); k++ {
		end += len(lines[k-1])
		if k < reported {
			continue
		}
		var n yaml.Node
		perr := yaml.Unmarshal(data[:end], &n)
		if perr == nil {
			continue
		}
		pm := yamlLine.FindStringSubmatch(perr.Error())
		if pm == nil || pm[2] != m[2] {
			return err // a prefix cut inside a value fails otherwise: keep what the parser said
		}
		if k == reported {
			return err
		}
		return fmt.Errorf("yaml: line %d: %s (in the block that starts on line %d: check the indentation of line %d)", k, m[2], reported, k)
	}
	return err
}

// Load reads the config at path (see Parse); relative paths in it are
// resolved against the file's directory.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(data, nil)
	if cfg != nil {
		cfg.BaseDir = filepath.Dir(path)
	}
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func (c *Config) setDefaults() {
	if c.Storage.Dir == "" {
		c.Storage.Dir = DefaultStorageDir
	}
	if c.Listen.HTTP == "" {
		c.Listen.HTTP = DefaultHTTP
	}
	if c.Listen.MaxConnections == 0 {
		c.Listen.MaxConnections = DefaultMaxConnections
	}
	if c.Listen.IdleTimeout == 0 {
		c.Listen.IdleTimeout = DefaultIdleTimeout
	}
	if t := &c.Listen.TLS; t.Enabled() {
		if t.ClientAuth == "" {
			t.ClientAuth = ClientAuthNone
			if t.ClientCAFile != "" {
				t.ClientAuth = ClientAuthVerifyIfGiven
			}
		}
		if t.ReloadInterval == 0 {
			t.ReloadInterval = DefaultTLSReload
		}
	}
	l := &c.Limits
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.ReadTimeout == 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.QueryTimeout == 0 {
		l.QueryTimeout = DefaultQueryTimeout
	}
	if l.ShutdownTimeout == 0 {
		l.ShutdownTimeout = DefaultShutdownTimeout
	}
	if l.IdempotencyTTL == 0 {
		l.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if l.IdempotencyMaxKeys == 0 {
		l.IdempotencyMaxKeys = DefaultIdempotencyMaxKeys
	}
	for i := range c.Tables {
		t := &c.Tables[i]
		if t.OnBadLine == "" {
			t.OnBadLine = "reject"
		}
		if t.Compact.After == 0 {
			t.Compact.After = DefaultCompactAfter
		}
	}
}

// Table returns the table named name.
func (c *Config) Table(name string) (*Table, bool) {
	for i := range c.Tables {
		if c.Tables[i].Name == name {
			return &c.Tables[i], true
		}
	}
	return nil, false
}

// Validate checks the whole config and reports every problem at once: every
// problem it can find alone. What only the packages that run a config can
// check (a computed column's error policy and func, an RDB filter's key
// types and glob) is checked as the server builds their options from it
// (server.ValidateOptions).
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Storage.Dir == "" {
		add("storage.dir: empty")
	}
	if _, _, err := net.SplitHostPort(c.Listen.HTTP); err != nil {
		add("listen.http %q: %v", c.Listen.HTTP, err)
	}
	if c.Listen.MaxConnections < 0 {
		add("listen.max_connections: negative (%d)", c.Listen.MaxConnections)
	}
	if c.Listen.IdleTimeout < 0 {
		add("listen.idle_timeout: negative (%v)", c.Listen.IdleTimeout)
	}
	if c.Listen.GRPC != "" {
		if _, _, err := net.SplitHostPort(c.Listen.GRPC); err != nil {
			add("listen.grpc %q: %v", c.Listen.GRPC, err)
		}
	}
	errs = append(errs, c.Listen.TLS.validate()...)
	for _, ref := range [][2]string{{"ingress.table", c.Ingress.Table}, {"otlp.logs_table", c.OTLP.LogsTable}} {
		if ref[1] != "" && !slices.ContainsFunc(c.Tables, func(t Table) bool { return t.Name == ref[1] }) {
			add("%s: no table %q", ref[0], ref[1])
		}
	}
	l := c.Limits
	if l.MaxBodyBytes < 0 {
		add("limits.max_body_bytes: negative (%d)", l.MaxBodyBytes)
	}
	for name, d := range map[string]time.Duration{"read_timeout": l.ReadTimeout, "write_timeout": l.WriteTimeout, "query_timeout": l.QueryTimeout, "shutdown_timeout": l.ShutdownTimeout} {
		if d < 0 {
			add("limits.%s: negative (%v)", name, d)
		}
	}
	if l.MaxInflight < 0 {
		add("limits.max_inflight: negative (%d)", l.MaxInflight)
	}
	if l.IdempotencyMaxKeys < 0 {
		add("limits.idempotency_max_keys: negative (%d)", l.IdempotencyMaxKeys)
	}
	errs = append(errs, c.Cluster.validate()...)
	errs = append(errs, c.Auth.validate()...)
	if len(c.Tables) == 0 {
		add("tables: none configured")
	}
	seen := map[string]bool{}
	for i, t := range c.Tables {
		where := fmt.Sprintf("tables[%d] %q", i, t.Name)
		switch {
		case t.Name == "":
			add("%s: name is empty", where)
		case !validName(t.Name):
			add("%s: name must be letters, digits, _ or - (it is a URL path segment and a directory)", where)
		case seen[t.Name]:
			add("%s: duplicate table name", where)
		}
		seen[t.Name] = true
		cols := map[string]bool{}
		for j, col := range t.Schema {
			cw := fmt.Sprintf("%s: schema[%d] %q", where, j, col.Name)
			if col.Name == "" {
				add("%s: name is empty", cw)
			} else if cols[col.Name] {
				add("%s: duplicate column", cw)
			}
			cols[col.Name] = true
			if _, err := coltype.Parse(col.Type); err != nil {
				add("%s: %v", cw, err)
			}
		}
		for j, cc := range t.Computed {
			cols[cc.Name] = true
			errs = append(errs, cc.S3.Check(fmt.Sprintf("%s: computed[%d] %q: s3", where, j, cc.Name))...)
		}
		for j, f := range t.Filters {
			errs = append(errs, f.S3.Check(fmt.Sprintf("%s: filters[%d] %q: s3", where, j, f.Name))...)
		}
		if len(t.Schema) > 0 {
			for _, k := range []struct{ field, col string }{{"hashBy", t.HashBy}, {"sortBy", t.SortBy}} {
				if k.col != "" && !cols[k.col] {
					add("%s: %s %q is neither in the schema nor a computed column", where, k.field, k.col)
				}
			}
		}
		if t.TTL < 0 {
			add("%s: ttl: negative (%v)", where, t.TTL)
		}
		if t.Reload < 0 {
			add("%s: reload: negative (%v)", where, t.Reload)
		}
		if t.MaxColumns < 0 {
			add("%s: max_columns: negative (%d)", where, t.MaxColumns)
		}
		if t.OnBadLine != "reject" && t.OnBadLine != "skip" {
			add("%s: on_bad_line %q: want reject or skip", where, t.OnBadLine)
		}
		if t.BlockSpan != 0 && (t.BlockSpan < time.Second || (24*time.Hour)%t.BlockSpan != 0) {
			add("%s: block_span %v: must be at least 1s and divide 24h", where, t.BlockSpan)
		}
		cp := t.Compact
		if cp.Interval < 0 || cp.After < 0 {
			add("%s: compact: negative interval or after", where)
		}
		if cp.Interval > 0 && cp.Dir == "" && cp.Iceberg == nil {
			add("%s: compact.dir: required when compact.interval is set (or compact.iceberg)", where)
		}
		errs = append(errs, t.validateSources(where)...)
		errs = append(errs, cp.Iceberg.validate(where)...)
		if cp.Iceberg != nil && !cp.Iceberg.Continuous && !cp.Remove {
			// A query reads the Iceberg table beside the store: it must tell
			// the store's committed rows from the others, which only a
			// continuous tier's committed-sequence mark, or remove, allows.
			add("%s: compact.remove: false needs compact.iceberg.continuous: true: in time mode the store keeps the rows it compacted with no record of which (a late row older than the watermark is never compacted), so a query could not read the Iceberg table and the store with each row once; set continuous: true, or remove: true", where)
		}
		errs = append(errs, t.RDB.validate(where)...)
		errs = append(errs, t.validatePrimaryKey(where, cols)...)
	}
	return errors.Join(errs...)
}

// validatePrimaryKey checks primary_key's columns (cols: the static
// schema's and computed columns, when the schema is static) and refuses
// what a keyed table does not support yet (docs/upserts.md, "Refused for
// now").
func (t Table) validatePrimaryKey(where string, cols map[string]bool) []error {
	if len(t.PrimaryKey) == 0 {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: primary_key: "+format, append([]any{where}, args...)...))
	}
	seen := map[string]bool{}
	for _, k := range t.PrimaryKey {
		switch {
		case k == "":
			add("an empty column name")
		case seen[k]:
			add("column %q twice", k)
		case strings.HasPrefix(k, "_sluice_"):
			add("column %q: sluice's own columns (_sluice_...) cannot be a key", k)
		case len(t.Schema) > 0 && !cols[k]:
			add("column %q is neither in the schema nor a computed column", k)
		}
		seen[k] = true
	}
	if t.Compact.Dir != "" {
		add("compact.dir is not supported on a keyed table yet: loose Parquet files cannot express that a later row replaces an earlier one; leave compaction off")
	}
	for i, src := range t.Sources {
		if src.S3 != nil {
			add("sources[%d].s3 is not supported on a keyed table yet: an object is staged and ingested whole, outside the appends that keep the key index", i)
		}
	}
	if t.Compact.Iceberg != nil {
		// The cold key index encodes the key types a data file and the
		// store hold alike; the newer column types are not among them yet.
		for _, c := range t.Schema {
			if !slices.Contains(t.PrimaryKey, c.Name) {
				continue
			}
			if typ, err := coltype.Parse(c.Type); err == nil {
				switch typ.Kind() {
				case coltype.Int64, coltype.Int32, coltype.Float64, coltype.String, coltype.Bool, coltype.Timestamp, coltype.JSON:
				default:
					add("column %q of type %s cannot be the key of a table with compact.iceberg yet (int64, int32, float64, string, bool and timestamp keys can)", c.Name, typ)
				}
			}
		}
	}
	if t.Compact.Iceberg != nil && !t.Compact.Iceberg.Continuous {
		add("compact.iceberg needs continuous: true on a keyed table: its runs commit the store's changes (new rows and deletes) by sequence, in the order the store applied them; set compact.iceberg.continuous: true")
	}
	return errs
}

func validName(s string) bool {
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// validate checks the TLS section's shape; whether the files load is
// checked as the server starts (serve --check too).
func (t TLS) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("listen.tls."+format, args...)) }
	if !t.Enabled() {
		if t.KeyFile != "" || t.ClientCAFile != "" || t.ClientAuth != "" {
			add("cert_file: empty, but the section sets other keys (TLS needs a certificate)")
		}
		return errs
	}
	if t.KeyFile == "" {
		add("key_file: empty (the certificate's private key is required)")
	}
	switch t.ClientAuth {
	case ClientAuthNone:
	case ClientAuthVerifyIfGiven, ClientAuthRequire:
		if t.ClientCAFile == "" {
			add("client_auth %s: client_ca_file is empty (client certificates are verified against it)", t.ClientAuth)
		}
	default:
		add("client_auth %q: not none, verify_if_given or require", t.ClientAuth)
	}
	if t.ReloadInterval < 0 {
		add("reload_interval: negative (%v)", t.ReloadInterval)
	}
	return errs
}
