// Package coldapi is the cold tier as the server sees it: the interface of
// one table's cold tier, what opening one takes, and the registration of
// the implementation.
//
// The server imports this package, never coldtier: coldtier links
// iceberg-go, arrow-go and the cloud SDKs (880 packages, a 176 MB binary
// whose substrait init alone took 80-290 ms and 33 MB at every start). A
// binary that serves compact.iceberg imports coldtier, whose init registers
// it here (as database/sql drivers do); one that does not, the lean sluice,
// fails such a table with ErrNotLinked. See docs/architecture.md.
package coldapi

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/table"
)

// ErrNotLinked: no cold tier is registered in this binary.
var ErrNotLinked = errors.New("this binary is built without the cold tier (compact.iceberg)")

// Tier is one table's cold tier (coldtier.Compactor).
type Tier interface {
	// Compact moves the rows older than watermark into the Iceberg table;
	// remove deletes them from the hot store after the commit.
	Compact(ctx context.Context, watermark time.Time, remove bool) (Stats, error)
	// DeleteOrphanFiles deletes the unreferenced files older than olderThan.
	DeleteOrphanFiles(ctx context.Context, olderThan time.Duration) ([]string, error)
	// Maintain rewrites small files, merges manifests and expires old
	// snapshots of the Iceberg table (coldtier.Compactor.Maintain).
	Maintain(ctx context.Context, opts MaintainOptions) (MaintainStats, error)
	// QueryValues answers q from both tiers; cold says the compacted rows
	// were removed from the hot store (compact.remove).
	QueryValues(ctx context.Context, q table.Query, cold bool, emit func([]table.Column, []any) error) error
	// Hold holds the tier's lock shared until release: no commit and no
	// local step of a run happens in between (a cluster query holds every
	// node's tier before any reads, docs/cluster.md). The wait ends with
	// ctx.
	Hold(ctx context.Context) (release func(), err error)
	// QueryValuesHeld is QueryValues under a Hold (it does not take the
	// lock again: a second shared lock can wait behind a waiting commit,
	// which waits for the first). hotOnly answers with the hot store's
	// rows that the Iceberg table lacks (a cluster query's tier=hot).
	QueryValuesHeld(ctx context.Context, q table.Query, cold, hotOnly bool, emit func([]table.Column, []any) error) error
	// TableColumns are the Iceberg table's columns (none before its first
	// commit): a query may name them though this node's store lacks them.
	TableColumns(ctx context.Context) ([]table.Column, error)
	// Counters are the totals since the tier was opened.
	Counters() Counters
	Close() error
}

// Config says where a table's cold tier lives (coldtier.Config).
type Config struct {
	Warehouse    string
	S3           S3
	Catalog      Catalog
	Node         string
	StateDir     string // the storage directory: the catalog's default and the record of a run in flight
	RowGroupRows int
	Unsorted     bool
	// Continuous commits by sequence (coldtier.Options.Continuous).
	Continuous bool
	// Logger takes the log lines of the tier's libraries (the AWS SDK's),
	// which would otherwise write plain text to stderr.
	Logger *slog.Logger `json:"-"`
}

// S3 is an S3-compatible endpoint (coldtier.S3).
type S3 struct {
	Endpoint, Region string
	PathStyle        bool
}

// Catalog is the Iceberg catalog a table is registered in (coldtier.Catalog).
type Catalog struct {
	Type, URI, Name, Namespace string
	Properties                 map[string]string
	// Token, Credential and Password return the catalog's secrets when
	// set (catalog.Config). They are functions, read at each connection,
	// and never encoded (a config passed as JSON carries no secret).
	Token, Credential, Password func() (string, error) `json:"-"`
}

// Stats describe one compaction run (coldtier.Stats).
type Stats struct {
	Rows, Bytes, Files int64
	Watermark          time.Time // rows before it were compacted
	SnapshotID         int64     // 0: nothing committed
	Recovered          bool      // the run finished a crashed run first
	DeleteFiles        int64     // position delete files committed (a keyed table's)
}

// Counters are a tier's totals, read at scrape time (coldtier.Counters).
type Counters struct {
	BytesUploaded, Files, Rows, CommitRetries, OrphanFiles, Recoveries int64
	// RowsSkipped: rows left out because another store committed them.
	RowsSkipped int64
	// The maintenance's totals (coldtier.MaintainCounters).
	MaintainRuns, FilesRewritten, SnapshotsExpired, ExpiredFilesDeleted int64
}

// MaintainOptions configure one maintenance pass (coldtier.MaintainOptions;
// zero fields take its defaults).
type MaintainOptions struct {
	TargetFileBytes                  int64
	MinInputFiles                    int
	KeepSnapshots                    int
	SnapshotAge                      time.Duration
	MetadataVersions                 int
	NoRewrite, NoManifests, NoExpire bool
}

// MaintainStats say what a maintenance pass did (coldtier.MaintainStats).
type MaintainStats struct {
	Partitions, FilesRewritten, FilesWritten int
	PartitionsDeferred                       int
	RowsRewritten                            int64
	BytesRewritten, BytesWritten             int64
	ManifestsMerged, ManifestsNew            int
	SnapshotsExpired, FilesDeleted           int
	Snapshots, DataFiles, Manifests          int
}

// Opener opens a table's cold tier.
type Opener func(ctx context.Context, cfg Config, t *table.Table) (Tier, error)

var opener atomic.Pointer[Opener]

// Register makes open the cold tier of this process; coldtier's init calls
// it.
func Register(open Opener) { opener.Store(&open) }

// Linked reports whether a cold tier is registered.
func Linked() bool { return opener.Load() != nil }

// Open opens a table's cold tier with the registered Opener, or fails with
// ErrNotLinked.
func Open(ctx context.Context, cfg Config, t *table.Table) (Tier, error) {
	open := opener.Load()
	if open == nil {
		return nil, ErrNotLinked
	}
	return (*open)(ctx, cfg, t)
}

// coldDoneKey is the context key of WithColdDone's function.
type coldDoneKey struct{}

// WithColdDone returns ctx carrying done, which a Tier's query calls once
// it has emitted the Iceberg table's rows (at once when it reads none) and
// before the store's. A caller
// that filters the store's rows by their source offsets (a cluster query's
// share of each node) tells the tiers apart by it: an Iceberg row carries
// the source columns too (a keyed table's), and the share does not apply
// to it.
func WithColdDone(ctx context.Context, done func()) context.Context {
	return context.WithValue(ctx, coldDoneKey{}, done)
}

// ColdDone is the function WithColdDone put into ctx, or nil.
func ColdDone(ctx context.Context) func() {
	done, _ := ctx.Value(coldDoneKey{}).(func())
	return done
}
