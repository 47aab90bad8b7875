package table

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Logger receives Pebble's log lines at debug level; nil discards them.
	Logger *slog.Logger
	// CacheSize is Pebble's block cache in bytes; 0 means 64 MiB.
	CacheSize int64
	// Now returns the ingestion time given to rows without an event time
	// and the clock TTL is measured against; nil means time.Now.
	Now func() time.Time
	// FS is the filesystem Pebble uses; nil means the OS's. Crash tests
	// give a strict in-memory one (vfs.NewStrictMem) and reset it to what
	// was synced. The free-space guard (MinFreeBytes, ReserveBytes) looks
	// at the OS's filesystem, so it is off with any other FS.
	FS vfs.FS
	// MinFreeBytes is the space the store's filesystem keeps free: a write
	// that would leave less is refused with a *DiskFullError (ErrDiskFull)
	// before Pebble sees it (space.go). 0 means DefaultMinFreeBytes; a
	// negative value turns the guard off.
	MinFreeBytes int64
	// ReserveBytes is the size of the reserve file, released when the
	// disk fills anyway so that Pebble (and a restart) has room. 0 means
	// DefaultReserveBytes; negative means no reserve.
	ReserveBytes int64
	// MemTableSize is Pebble's memtable size; 0 means 32 MiB. The minimum
	// free space should stay above about four of them (a flush, the next
	// WAL's preallocation and a compaction's output).
	MemTableSize int64
	// SpaceCheckInterval is how often the free space is looked at in the
	// background (reserve, read-only reopen, logs); 0 means 1s.
	SpaceCheckInterval time.Duration
}

// seqReserve is how many sequence numbers one synced write of the seq key
// reserves: a restart skips the unused rest of a reservation.
const seqReserve = 1 << 16

// Store is one Pebble database holding any number of tables. It is safe for
// concurrent use.
type Store struct {
	db       *pebble.DB // REQUIRES: closeMu held (reopenWritable replaces it)
	popts    *pebble.Options
	cache    *pebble.Cache // db's block cache (the store and db hold a reference each)
	fsCloser io.Closer     // stops the disk health checker, after db is closed
	dir      string
	opts     Options

	space     *spaceGuard
	stopWatch chan struct{} // closed by Close: stops watchSpace
	watchDone chan struct{}
	stopOnce  sync.Once

	// closeMu is held shared by every operation that uses db and exclusively
	// by Close, so Close waits for in-flight appends and queries and nothing
	// touches db after it.
	closeMu sync.RWMutex
	closed  bool  // REQUIRES: closeMu held
	failed  error // why the store closed itself (reopenWritable); REQUIRES: closeMu held
	// failedClosed: Close released what a failed store still held.
	failedClosed bool // REQUIRES: closeMu held

	mu     sync.Mutex
	tables map[string]*Table // REQUIRES: mu held
	nextID uint32            // next table id; REQUIRES: mu held

	shrinkMu      sync.Mutex
	shrinks       int    // ShrinkCache calls not restored yet; REQUIRES: shrinkMu held
	shrinkRelease func() // releases the cache reservation; REQUIRES: shrinkMu held

	// Sequence numbers are handed out by an atomic counter: one lock per
	// batch (two with the hold's release), shared by every writer of the
	// store, was the second source of lock waits on the ingest path after
	// Pebble's commit pipeline. reserveMu serializes only the
	// synced reservations on disk, one per seqReserve numbers.
	nextSeq     atomic.Uint64 // the next sequence number to hand out
	reservedSeq atomic.Uint64 // sequences below are reserved on disk
	reserveMu   sync.Mutex    // held while a reservation is written
	// holds are the batches that reserved sequence numbers and have not
	// committed or been discarded yet (*seqHold keys, see seqHold).
	holds sync.Map

	// writerMu makes WriterID make one id when two tables ask at once.
	writerMu sync.Mutex
}

// A seqHold is the claim of one uncommitted batch (an Appender or a Batch)
// on the sequence numbers it reserved: from its first reservation until it
// commits or is discarded. waitSeqs uses it so that a compaction never
// decides "every block with sequence <= S is in the store" while a batch
// holding a lower sequence is still on its way to Pebble.
type seqHold struct {
	// first is 1 + the lowest sequence reserved, 0 while the batch is
	// between registering the hold and taking its first numbers (waitSeqs
	// then waits for it: it may hold a sequence below the one it returns).
	first atomic.Uint64
	done  chan struct{} // closed when the batch commits or is discarded
}

// Open opens (creating it if needed) the store in dir.
//
// On a disk too full to replay the write-ahead log it releases the reserve
// file and, when that is not enough, opens the store read-only: queries
// work, writes get a *DiskFullError until the space is back (space.go).
func Open(dir string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = 64 << 20
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = 32 << 20
	}
	if opts.SpaceCheckInterval == 0 {
		opts.SpaceCheckInterval = defaultSpaceCheck
	}
	g := &spaceGuard{dir: dir, minFree: sizeOption(opts.MinFreeBytes, DefaultMinFreeBytes), reserve: sizeOption(opts.ReserveBytes, DefaultReserveBytes),
		largeBatch: opts.MemTableSize / 2}
	g.log = func(msg string, args ...any) {
		if opts.Logger != nil {
			opts.Logger.Warn(msg, append(args, "dir", dir)...)
		}
	}
	g.info = func(msg string, args ...any) {
		if opts.Logger != nil {
			opts.Logger.Info(msg, append(args, "dir", dir)...)
		}
	}
	if opts.FS != nil {
		// Another filesystem than the OS's (crash tests): Pebble makes the
		// directory there, and the guard, which asks the OS, is off.
		g.minFree, g.reserve = 0, 0
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("table: open store %s: %w", dir, err)
	}
	// The reserve is released before Pebble opens when the disk is too
	// full to replay the WAL and keep the minimum free; it is made again
	// (and writes resume) once the space allows.
	wal := walBytes(dir)
	readOnly := false
	if avail, _, ok := g.free(); ok && g.minFree > 0 {
		if avail < g.minFree+wal+openSlack {
			g.releaseReserve(fmt.Sprintf("opening on a full disk (%s free)", formatBytes(avail)))
			avail, _, _ = g.free()
		}
		readOnly = avail < wal+openSlack
	}
	cache := pebble.NewCache(opts.CacheSize)
	// The disk-health-checking FS starts a goroutine; Pebble v1.1.5 does
	// not stop it when Open fails (e.g. the directory is locked by another
	// process), so we create it and close it ourselves.
	base := opts.FS
	if base == nil {
		base = vfs.Default
	}
	healthFS, fsCloser := vfs.WithDiskHealthChecks(base, 5*time.Second, func(info vfs.DiskSlowInfo) {
		if opts.Logger != nil {
			opts.Logger.Warn("slow disk", "component", "pebble", "path", info.Path, "op", info.OpType.String(), "duration", info.Duration)
		}
	})
	// A write of Pebble's that meets ENOSPC anyway (the disk filled from
	// outside between two admissions) releases the reserve and is retried
	// once, instead of ending the process.
	fs := vfs.OnDiskFull(healthFS, func() { g.releaseReserve("Pebble met a full disk") })
	popts := &pebble.Options{
		FS:     fs,
		Cache:  cache,
		Logger: pebbleLogger{opts.Logger},
		// Block values are zstd-compressed already: Pebble's own snappy
		// would spend CPU for nothing.
		Levels:       make([]pebble.LevelOptions, 7),
		MemTableSize: uint64(opts.MemTableSize),
		ReadOnly:     readOnly,
	}
	for i := range popts.Levels {
		popts.Levels[i].Compression = pebble.NoCompression
	}
	popts.EnsureDefaults()
	db, err := pebble.Open(dir, popts)
	if err != nil && !readOnly && vfs.IsNoSpaceError(err) {
		// The replay needed more than the estimate: read-only needs none.
		popts.ReadOnly, readOnly = true, true
		db, err = pebble.Open(dir, popts)
	}
	if err != nil {
		fsCloser.Close()
		cache.Unref()
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
			// Pebble's LOCK file is held (flock): another process has the store open.
			return nil, fmt.Errorf("table: store %s is in use by another process (a running sluice serve, or a "+
				"sluice ingest/query on the same directory): stop it, or go through the server with --server: %w (%v)", dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("table: open store %s: %w", dir, err)
	}
	s := &Store{db: db, popts: popts, cache: cache, fsCloser: fsCloser, dir: dir, opts: opts, tables: map[string]*Table{}, nextID: 1}
	s.space = g
	s.space.readOnly.Store(readOnly)
	if readOnly {
		avail, _, _ := g.free()
		g.log("store opened read-only: the disk is too full to replay its write-ahead log; queries work, writes are refused until space is freed",
			"free", avail, "wal_bytes", wal)
	} else if g.reserve > 0 {
		s.space.makeReserve()
	}
	if err := s.load(); err != nil {
		db.Close()
		fsCloser.Close()
		cache.Unref()
		return nil, err
	}
	s.stopWatch, s.watchDone = make(chan struct{}), make(chan struct{})
	go s.watchSpace(opts.SpaceCheckInterval, s.stopWatch, s.watchDone)
	return s, nil
}

// sizeOption is an Options size: 0 means def, negative means off (0).
func sizeOption(v, def int64) uint64 {
	switch {
	case v == 0:
		return uint64(def)
	case v < 0:
		return 0
	}
	return uint64(v)
}

// load reads the sequence reservation and the table ids in use.
func (s *Store) load() error {
	v, closer, err := s.db.Get(seqKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("table: read sequence: %w", err)
	default:
		if len(v) != 8 {
			closer.Close()
			return &CorruptionError{Key: seqKey, Reason: "sequence is not 8 bytes"}
		}
		s.nextSeq.Store(binary.BigEndian.Uint64(v))
		s.reservedSeq.Store(binary.BigEndian.Uint64(v))
		closer.Close()
	}
	lo, hi := metaKey(""), metaKey("\xff")
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("table: list tables: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		var m tableMeta
		if err := json.Unmarshal(it.Value(), &m); err != nil {
			return &CorruptionError{Key: slices.Clone(it.Key()), Reason: "table metadata", Err: err}
		}
		if m.ID >= s.nextID {
			s.nextID = m.ID + 1
		}
	}
	return it.Error()
}

// nextSeqs returns the first of n fresh sequence numbers, reserving more on
// disk (synced) when the current reservation runs out.
//
// h, when not nil, is the batch's hold: its first reservation registers it,
// and the batch must call releaseSeqs(h) once it has committed or been
// discarded. A hold is used by one goroutine at a time.
func (s *Store) nextSeqs(n int, h *seqHold) (uint64, error) {
	register := h != nil && h.done == nil
	if register {
		// Registered before the numbers are taken: a waitSeqs that returns
		// a sequence above them finds the hold (see seqHold.first).
		h.done = make(chan struct{})
		s.holds.Store(h, struct{}{})
	}
	end := s.nextSeq.Add(uint64(n))
	first := end - uint64(n)
	switch reserved := s.reservedSeq.Load(); {
	case end > reserved:
		if err := s.reserveSeqs(end); err != nil {
			// The numbers are skipped; the hold stays until released.
			return 0, err
		}
	case end > reserved-seqReserve/2 && s.reserveMu.TryLock():
		// Half the reservation is used: the batch that sees it first
		// extends it, while the others go on with numbers still
		// reserved (they waited for the synced write otherwise). A
		// failure here fails no batch: its numbers are reserved, and the
		// next batch past the reservation tries again and reports it.
		_ = s.reserveLocked(end)
		s.reserveMu.Unlock()
	}
	if register {
		h.first.Store(first + 1)
	}
	return first, nil
}

// reserveSeqs makes the reservation on disk (synced) cover the sequences
// below end before any of them is used.
func (s *Store) reserveSeqs(end uint64) error {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	if end <= s.reservedSeq.Load() {
		return nil // another batch's reservation covers it
	}
	return s.reserveLocked(end)
}

// reserveLocked reserves seqReserve numbers beyond those handed out (at
// least end). REQUIRES: reserveMu held.
func (s *Store) reserveLocked(end uint64) error {
	r := max(s.nextSeq.Load(), end) + seqReserve
	if err := s.setSync(seqKey, binary.BigEndian.AppendUint64(nil, r), false); err != nil {
		return fmt.Errorf("table: reserve sequence numbers: %w", err)
	}
	s.reservedSeq.Store(r)
	return nil
}

// releaseSeqs ends h's claim (after its batch committed or was discarded).
// It is a no-op for a hold that never reserved anything or was released.
func (s *Store) releaseSeqs(h *seqHold) {
	if h.done == nil {
		return
	}
	if _, ok := s.holds.LoadAndDelete(h); ok {
		close(h.done)
	}
}

// waitSeqs returns once every batch that reserved a sequence number before
// the call has committed or been discarded, so every sequence handed out
// before it is either in Pebble or never will be. It returns the first
// sequence not handed out at the call: blocks written later have a
// sequence at least that.
func (s *Store) waitSeqs(ctx context.Context) (uint64, error) {
	next := s.nextSeq.Load()
	var wait []chan struct{}
	s.holds.Range(func(k, _ any) bool {
		h := k.(*seqHold)
		if first := h.first.Load(); first == 0 || first-1 < next {
			wait = append(wait, h.done)
		}
		return true
	})
	for _, done := range wait {
		select {
		case <-done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return next, nil
}

// Close waits for in-flight operations, then flushes and closes the
// database. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.stopOnce.Do(func() {
		close(s.stopWatch)
		<-s.watchDone
	})
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		if s.failed != nil && !s.failedClosed {
			// reopenWritable closed the database already.
			s.failedClosed = true
			s.fsCloser.Close()
			s.cache.Unref()
			return s.failed
		}
		return ErrClosed
	}
	s.closed = true
	defer s.cache.Unref()
	defer s.fsCloser.Close()
	var ferr error
	if !s.space.readOnly.Load() {
		ferr = s.db.Flush()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("table: close store %s: %w", s.dir, err)
	}
	if ferr != nil {
		return fmt.Errorf("table: flush store %s: %w", s.dir, ferr)
	}
	return nil
}

// use takes the shared close lock; callers defer the returned release.
func (s *Store) use() (release func(), err error) {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return nil, ErrClosed
	}
	return s.closeMu.RUnlock, nil
}

// Tables returns the names of the tables stored, sorted.
func (s *Store) Tables() ([]string, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	lo, hi := metaKey(""), metaKey("\xff")
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var names []string
	for it.First(); it.Valid(); it.Next() {
		names = append(names, string(it.Key()[2:]))
	}
	return names, it.Error()
}

// DiskUsage estimates the bytes the store takes on disk.
func (s *Store) DiskUsage() (uint64, error) {
	release, err := s.use()
	if err != nil {
		return 0, err
	}
	defer release()
	return s.db.EstimateDiskUsage([]byte{0}, []byte{0xff})
}

// Config describes a table.
type Config struct {
	Name string
	// HashBy is the partition key column; "" puts every row in one
	// partition. Fixed once the table exists (keys depend on it).
	HashBy string
	// SortBy is the event-time column, stored as a timestamp; a row
	// without it gets the ingestion time (see ParseTime for the accepted
	// forms). "" means every row gets its ingestion time in column "time".
	SortBy string
	// Columns is a static schema; empty means the schema is inferred and
	// widened as rows arrive (int64 → float64 → string; other mixes give
	// string), unless Table.SetFixedTypes keeps each column's first type.
	Columns []Column
	// TTL drops data older than now-TTL (0 keeps it forever): queries hide
	// it at once and Expire deletes it by range deletions.
	TTL time.Duration
	// BlockSpan is the time bucket of a block: a block holds rows of one
	// partition whose event times fall in one bucket. 0 means one hour. It
	// is fixed when the table is created. It must divide 24h so that
	// compaction's daily files take whole blocks.
	BlockSpan time.Duration
	// PrimaryKey makes the table keyed: it keeps one row per value of
	// these columns, the latest (docs/upserts.md). nil: append-only. It is
	// fixed when the table is created.
	PrimaryKey []string
}

// tableMeta is the persisted description of a table (JSON under metaKey).
type tableMeta struct {
	ID        uint32        `json:"id"`
	Name      string        `json:"name"`
	HashBy    string        `json:"hash_by"`
	SortBy    string        `json:"sort_by"`
	Static    bool          `json:"static"`
	Schema    []Column      `json:"schema"`
	TTL       time.Duration `json:"ttl"`
	SpanNanos int64         `json:"span_ns"`
	// CompactedThrough is the watermark of the last compaction that kept
	// the data (unix ns); the next one starts there.
	CompactedThrough int64 `json:"compacted_through,omitempty"`
	// PrimaryKey is Config.PrimaryKey, fixed at creation.
	PrimaryKey []string `json:"primary_key,omitempty"`
}

const defaultSortBy = "time"

// Table returns the table described by cfg, creating it if it does not
// exist. An existing table keeps its HashBy, SortBy and BlockSpan (a
// different value is an error); its TTL and static schema are replaced by
// cfg's (a static schema may only widen existing column types).
func (s *Store) Table(cfg Config) (*Table, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	if cfg.Name == "" {
		return nil, errors.New("table: config without a name")
	}
	if cfg.SortBy == "" {
		cfg.SortBy = defaultSortBy
	}
	if cfg.BlockSpan == 0 {
		cfg.BlockSpan = time.Hour
	}
	if cfg.BlockSpan < time.Second || (24*time.Hour)%cfg.BlockSpan != 0 {
		return nil, fmt.Errorf("table %s: block span %v must be at least 1s and divide 24h", cfg.Name, cfg.BlockSpan)
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("table %s: negative ttl %v", cfg.Name, cfg.TTL)
	}
	seen := map[string]bool{}
	for _, c := range cfg.Columns {
		if c.Name == "" || !validType(c.Type) || seen[c.Name] {
			return nil, fmt.Errorf("table %s: column %q: empty, duplicate or of unknown type %v", cfg.Name, c.Name, c.Type)
		}
		seen[c.Name] = true
	}
	if err := validateKey(cfg); err != nil {
		return nil, err
	}
	if len(cfg.Columns) > 0 {
		if !seen[cfg.SortBy] {
			return nil, fmt.Errorf("table %s: static schema lacks the sortBy column %q", cfg.Name, cfg.SortBy)
		}
		if cfg.HashBy != "" && !seen[cfg.HashBy] {
			return nil, fmt.Errorf("table %s: static schema lacks the hashBy column %q", cfg.Name, cfg.HashBy)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tables[cfg.Name]; ok {
		if err := t.reconfigure(cfg, false); err != nil {
			return nil, err
		}
		return t, nil
	}
	create := false
	m := tableMeta{Name: cfg.Name, HashBy: cfg.HashBy, SortBy: cfg.SortBy, TTL: cfg.TTL, SpanNanos: int64(cfg.BlockSpan)}
	v, closer, err := s.db.Get(metaKey(cfg.Name))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		create = true
		m.ID = s.nextID
		s.nextID++
		m.PrimaryKey = slices.Clone(cfg.PrimaryKey)
		m.Schema = []Column{{Name: cfg.SortBy, Type: Timestamp}}
		if len(cfg.Columns) > 0 {
			m.Static = true
			m.Schema = slices.Clone(cfg.Columns)
		}
	case err != nil:
		return nil, fmt.Errorf("table %s: read metadata: %w", cfg.Name, err)
	default:
		err := json.Unmarshal(v, &m)
		closer.Close()
		if err != nil {
			return nil, &CorruptionError{Key: metaKey(cfg.Name), Reason: "table metadata", Err: err}
		}
	}
	t := &Table{store: s, meta: m, id: m.ID, name: m.Name, hashBy: m.HashBy, sortBy: m.SortBy, span: m.SpanNanos,
		key: slices.Clone(m.PrimaryKey), keyLock: make(chan struct{}, 1)}
	if len(m.PrimaryKey) > 0 {
		t.entries = &entryCache{}
		t.marks = &markCache{}
		t.sparse = &sparseBlocks{scan: true} // the marks stored before the open are not noted
	}
	t.setSchema(m.Schema)
	if err := t.reconfigure(cfg, create); err != nil {
		return nil, err
	}
	s.tables[cfg.Name] = t
	return t, nil
}

// pebbleLogger sends Pebble's logs to slog at debug level (fatal stays
// fatal: Pebble calls it on unrecoverable corruption).
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l != nil {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.l != nil {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
