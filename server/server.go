// Package server is sluice's HTTP server: ingest (POST
// /v1/tables/{table}/rows), streamed queries, describe endpoints,
// Prometheus metrics, health and readiness, the compaction and TTL
// schedulers, and a graceful shutdown that loses no acknowledged batch.
//
// A batch is acknowledged (200) only after the table's Append returned,
// which is after the batch is synced to disk; a batch that fails is stored
// not at all. Ingest is bounded by ingest.Queue: a request that finds every
// slot taken gets 429 with Retry-After instead of waiting in memory.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/internal/coldapi"
	"github.com/sluicedb/sluice/luavm"
	"github.com/sluicedb/sluice/stream"
	"github.com/sluicedb/sluice/table"
)

// Options are the runtime dependencies of a Server; the zero value is usable.
type Options struct {
	// Logger receives structured logs; nil means JSON to stderr at info.
	Logger *slog.Logger
	// StorageDir, when set, replaces the config's storage.dir (a test's
	// temporary directory, `sluice serve --data`).
	StorageDir string
	// Now is the clock of the schedulers; nil means time.Now.
	Now func() time.Time
	// SetMemoryLimit sets the Go runtime's soft memory limit from
	// MemoryBound (unless GOMEMLIMIT is set), which is what makes the
	// documented bound hold for RSS. It is process-wide, so it is for the
	// process that is the server: `sluice serve` sets it.
	SetMemoryLimit bool
}

// Server owns the store, one ingest pipeline per table and the HTTP API.
type Server struct {
	cfg   *config.Config
	log   *slog.Logger
	now   func() time.Time
	store *table.Store
	lua   *luavm.Manager
	jit   compute.ScriptEngine // the LuaJIT engine, nil without it
	queue *ingest.Queue
	// sources are the tables' stream sources (streams.go).
	sources *stream.Runner

	tables map[string]*tableState // immutable after New
	names  []string               // sorted table names

	// bodyBytes is the memory reserved by request bodies being read or
	// ingested; bodyBudget bounds it (max_inflight × (max_body_bytes +
	// bodySlack)).
	bodyBytes  atomic.Int64
	bodyBudget int64

	ready     atomic.Bool  // false before Serve and once shutdown starts
	throttled atomic.Int64 // ingest requests answered 429
	startedAt time.Time

	closeOnce sync.Once
	closeErr  error
}

// tableState is one configured table and what serves it.
type tableState struct {
	cfg    config.Table
	table  *table.Table
	pipe   *ingest.Pipeline
	proc   *compute.Processor // nil when the table has no computed columns or filters
	schema map[string]compute.Type
	policy ingest.Policy
	// deadLetter is the table's dead-letter table, when a policy uses it.
	deadLetter *tableState

	compactRuns, compactErrors, expireRuns atomic.Int64
	compactRows                            atomic.Int64
	lastCompact                            atomic.Int64 // unix ns of the last successful compaction's watermark
	cold                                   coldapi.Tier // nil: compaction to compact.dir, or none
}

// New opens the store and every table of cfg and loads their computed
// columns and filters, reporting every problem at once. Nothing listens
// until Serve.
func New(ctx context.Context, cfg *config.Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: opts.Logger, now: opts.Now, tables: map[string]*tableState{}, startedAt: time.Now()}
	if s.log == nil {
		s.log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, w := range cfg.Warnings {
		s.log.Warn("config: " + w)
	}
	inflight := cfg.Limits.MaxInflight
	if inflight == 0 {
		inflight = 2*runtime.GOMAXPROCS(0) + 2
	}
	s.queue = ingest.NewQueue(inflight)
	s.bodyBudget = int64(inflight) * (cfg.Limits.MaxBodyBytes + bodySlack)
	if opts.SetMemoryLimit && os.Getenv("GOMEMLIMIT") == "" {
		// The live memory of ingest is bounded (bodies by the budget, the
		// batches in slots by encoding them in parts); a soft limit makes
		// the collector keep the heap near it instead of letting it grow
		// to twice the live memory (GOGC), so the bound holds for RSS.
		// GOMEMLIMIT, when set, takes precedence. An eighth is left for
		// what the runtime does not count (C allocations, page rounding).
		bound := MemoryBound(cfg.Limits.MaxBodyBytes, inflight)
		debug.SetMemoryLimit(bound - bound/8)
	}
	dir := cfg.Storage.Dir
	if opts.StorageDir != "" {
		dir = opts.StorageDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("server: storage dir: %w", err)
	}
	store, err := table.Open(dir, table.Options{Logger: s.log.With("component", "pebble")})
	if err != nil {
		return nil, fmt.Errorf("server: open store %s: %w", dir, err)
	}
	s.store = store
	s.lua = luavm.NewManager(luavm.Options{})
	// one LuaJIT engine for every table's `engine: luajit` functions; nil in
	// a binary built without it (such functions then fail to load)
	if jit, err := compute.NewLuaJITEngine(); err == nil {
		s.jit = jit
	}
	var errs []error
	for _, tc := range cfg.Tables {
		ts, err := s.openTable(ctx, tc)
		if err != nil {
			errs = append(errs, fmt.Errorf("table %q: %w", tc.Name, err))
			continue
		}
		if _, clash := s.tables[tc.Name]; clash {
			errs = append(errs, fmt.Errorf("table %q: the name is taken by another table's dead-letter table", tc.Name))
			continue
		}
		s.tables[tc.Name] = ts
		s.names = append(s.names, tc.Name)
		if d := ts.deadLetter; d != nil {
			if _, clash := s.tables[d.cfg.Name]; clash {
				errs = append(errs, fmt.Errorf("table %q: its dead-letter table %q is also configured", tc.Name, d.cfg.Name))
				continue
			}
			s.tables[d.cfg.Name] = d
			s.names = append(s.names, d.cfg.Name)
		}
	}
	sort.Strings(s.names)
	errs = append(errs, s.openColdTiers(ctx, dir)...)
	if err := errors.Join(errs...); err == nil {
		errs = append(errs, s.openSources())
	}
	if err := errors.Join(errs...); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) openTable(ctx context.Context, tc config.Table) (*tableState, error) {
	ts := &tableState{cfg: tc, schema: map[string]compute.Type{}}
	ts.policy, _ = ingest.ParsePolicy(tc.OnBadLine) // validated
	tcfg := table.Config{Name: tc.Name, HashBy: tc.HashBy, SortBy: tc.SortBy, TTL: tc.TTL}
	for _, c := range tc.Schema {
		typ, err := table.ParseType(c.Type)
		if err != nil {
			return nil, err
		}
		ct, _ := compute.ParseType(c.Type)
		ts.schema[c.Name] = ct
		tcfg.Columns = append(tcfg.Columns, table.Column{Name: c.Name, Type: typ})
	}
	if len(tc.Schema) > 0 {
		// A static schema holds the computed columns too, with their
		// declared types, unless the schema lists them itself.
		for _, cc := range tc.Computed {
			if _, listed := ts.schema[cc.Name]; listed {
				continue
			}
			typ, err := table.ParseType(cc.Type)
			if err != nil {
				return nil, fmt.Errorf("computed column %q: %w", cc.Name, err)
			}
			tcfg.Columns = append(tcfg.Columns, table.Column{Name: cc.Name, Type: typ})
		}
	}
	if len(tc.Computed) > 0 || len(tc.Filters) > 0 {
		p, err := compute.New(ctx, tc.Config, compute.Options{Lua: s.lua, LuaJIT: s.jit, BaseDir: s.cfg.BaseDir, Logger: s.log.With("table", tc.Name)})
		if err != nil {
			return nil, err
		}
		ts.proc = p
	}
	t, err := s.store.Table(tcfg)
	if err != nil {
		if ts.proc != nil {
			ts.proc.Close()
		}
		return nil, err
	}
	ts.table = t
	ts.pipe = &ingest.Pipeline{Table: appender{t}, Compute: ts.proc, RowOf: schemaErrorRow}
	if tc.UsesDeadLetter() || len(tc.Sources) > 0 {
		// The dead-letter output of a table is the table <name>_deadletter
		// (time-ordered, one partition), queried like any other. Stream
		// sources add the message's origin (streams.go).
		dcfg := table.Config{Name: tc.Name + DeadLetterSuffix, SortBy: "time"}
		for _, c := range deadLetterColumns(tc) {
			typ, _ := table.ParseType(c.Type)
			dcfg.Columns = append(dcfg.Columns, table.Column{Name: c.Name, Type: typ})
		}
		dt, err := s.store.Table(dcfg)
		if err != nil {
			if ts.proc != nil {
				ts.proc.Close()
			}
			return nil, fmt.Errorf("dead-letter table: %w", err)
		}
		ts.pipe.DeadLetters = appender{dt}
		dts := &tableState{cfg: config.Table{Name: dcfg.Name, SortBy: "time"}, table: dt, schema: map[string]compute.Type{}}
		for _, c := range deadLetterColumns(tc) {
			dts.schema[c.Name], _ = compute.ParseType(c.Type)
		}
		dts.pipe = &ingest.Pipeline{Table: appender{dt}, RowOf: schemaErrorRow}
		ts.deadLetter = dts
	}
	return ts, nil
}

// schemaErrorRow is the row a table error is about.
func schemaErrorRow(err error) (int, bool) {
	var se *table.SchemaError
	if errors.As(err, &se) {
		return se.Row, true
	}
	return 0, false
}

// appender adapts *table.Table to ingest.Appender.
// DeadLetterSuffix names a table's dead-letter table: events -> events_deadletter.
const DeadLetterSuffix = "_deadletter"

type appender struct{ t *table.Table }

func (a appender) Append(ctx context.Context, rows []ingest.Row) error { return a.t.Append(ctx, rows) }

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tables/{table}/rows", s.handleRows)
	mux.HandleFunc("GET /v1/tables/{table}/query", s.handleQuery)
	mux.HandleFunc("POST /v1/tables/{table}/query", s.handleQuery)
	mux.HandleFunc("GET /v1/tables", s.handleTables)
	mux.HandleFunc("GET /v1/tables/{table}", s.handleTable)
	mux.HandleFunc("GET /v1/tables/{table}/schema", s.handleSchema)
	mux.HandleFunc("POST /v1/tables/{table}/compact", s.handleCompact)
	mux.HandleFunc("POST /v1/tables/{table}/orphans", s.handleOrphans)
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.handleReady)
	if s.cfg.Listen.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Serve serves the API on ln until ctx is done, then shuts down gracefully:
// readiness goes false, the listener closes (no new connections), in-flight
// batches finish and are acknowledged, the schedulers stop, and the store is
// flushed and closed. It returns after Close.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: min(s.cfg.Limits.ReadTimeout, 10*time.Second),
		ReadTimeout:       s.cfg.Limits.ReadTimeout,
		// WriteTimeout is set per response (queries stream for longer).
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	s.startSchedulers(bg, &wg)
	s.sources.Start(bg)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.ready.Store(true)
	s.log.Info("serving", "addr", ln.Addr().String(), "tables", s.names, "storage", s.cfg.Storage.Dir)
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	s.ready.Store(false)
	s.log.Info("shutting down: no new connections, finishing in-flight batches")
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.Limits.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Error("shutdown: in-flight requests did not finish in time", "error", err)
		hs.Close()
	}
	stopBG()
	wg.Wait()
	s.sources.Wait()
	if err := s.Close(); err != nil {
		return err
	}
	s.log.Info("stopped")
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// Close closes the processors, the Lua runtime and the store (which flushes
// it). Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, ts := range s.tables {
			if ts.proc != nil {
				errs = append(errs, ts.proc.Close())
			}
		}
		errs = append(errs, s.closeColdTiers()...)
		if s.lua != nil {
			errs = append(errs, s.lua.Close())
		}
		if s.jit != nil {
			errs = append(errs, s.jit.Close())
		}
		if s.store != nil {
			errs = append(errs, s.store.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Tables returns the configured table names, sorted.
func (s *Server) Tables() []string { return append([]string(nil), s.names...) }

// ListenAndServe listens on the config's listen.http address and serves
// until ctx is done (see Serve).
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen.HTTP)
	if err != nil {
		s.Close()
		return fmt.Errorf("server: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Check validates cfg and loads every table's computed columns and filters
// (compiling scripts, opening plugins, fetching URLs) without opening the
// store, reporting every problem at once: `sluice serve --check`.
func Check(ctx context.Context, cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	lua := luavm.NewManager(luavm.Options{})
	defer lua.Close()
	errs := checkColdTiers(cfg)
	for _, tc := range cfg.Tables {
		if len(tc.Computed) == 0 && len(tc.Filters) == 0 {
			continue
		}
		p, err := compute.New(ctx, tc.Config, compute.Options{Lua: lua, BaseDir: cfg.BaseDir})
		if err != nil {
			errs = append(errs, fmt.Errorf("table %q: %w", tc.Name, err))
			continue
		}
		p.Close()
	}
	return errors.Join(errs...)
}

// NewBatch starts an atomic append in parts (ingest.BatchAppender).
func (a appender) NewBatch() (ingest.AppendBatch, error) { return a.t.NewAppender() }
