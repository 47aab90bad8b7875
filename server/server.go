// Package server is sluice's HTTP server: ingest (POST
// /v1/tables/{table}/rows), streamed queries, describe endpoints,
// Prometheus metrics, health and readiness, the compaction and TTL
// schedulers, and a graceful shutdown that loses no acknowledged batch.
//
// A batch is acknowledged (200) only after the table's Append returned,
// which is after the batch is synced to disk; a batch that fails is stored
// not at all. Ingest is bounded by ingest.Queue: a request that finds every
// slot taken gets 429 with Retry-After instead of waiting in memory.
//
// In a cluster the server is each node's HTTP side: it reads its own
// store and cold tier for a cluster query, a member's answer and a read
// lease, and serves the cluster's routes. How nodes coordinate is package
// cluster's (finding the members, the fan-out, the request bodies between
// a coordinator and its members, the merge of their answers, the share of
// source offsets), with key routing in cluster/keyroute and the read
// leases' bookkeeping in cluster/leases.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/cluster/keyroute"
	"github.com/sluicedb/sluice/cluster/leases"
	"github.com/sluicedb/sluice/coltype"
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
	// ProcessLog makes Logger the process's log too: slog's default and
	// the standard log package, where libraries write (iceberg-go's
	// warnings) and where nothing else would make their lines JSON. It is
	// process-wide, so it is for the process that is the server: `sluice
	// serve` sets it.
	ProcessLog bool
	// ReloadSignals, when set, reloads every table's scripts
	// (ReloadScripts) and the listener's TLS files each time a value
	// arrives while Serve runs: `sluice serve` relays SIGHUP here. Signals
	// that arrive before Serve wait in the channel.
	ReloadSignals <-chan os.Signal
	// MemberTLS, when set, is the TLS config of the requests this node
	// sends to the other members (their CA, this node's client
	// certificate); nil means the config's cluster.tls, and without it
	// Go's defaults.
	MemberTLS *tls.Config
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
	// metrics serves /metrics from the server's registry (metrics.go).
	metrics http.Handler

	// scriptMetrics are the series scripts make with stats (scripts.go).
	scriptMetrics *luavm.ScriptMetrics

	tables map[string]*tableState // immutable after New
	names  []string               // sorted table names

	// bodyBytes is the memory reserved by request bodies being read or
	// ingested; bodyBudget bounds it (max_inflight × (max_body_bytes +
	// bodySlack)).
	bodyBytes  atomic.Int64
	bodyBudget int64

	reloadSignals <-chan os.Signal // Options.ReloadSignals

	// tls is the listener's TLS (listener.go), set by Serve.
	tls listenerTLS

	// nodeID, members and fanout serve cluster queries (cluster.go);
	// members is nil without a cluster config.
	nodeID  string
	members cluster.Members
	fanout  *cluster.Fanout
	// router routes key queries of key_partitioned tables
	// (cluster/keyroute); nil when there are none or no cluster config.
	router *keyroute.Router
	leases *leases.Table // read leases (cluster/leases)

	// authn authenticates requests; nil without an auth: config (auth.go).
	authn *auth.Authenticator
	audit *auditLog
	// memberTransport signs every request to another member (auth.go).
	memberTransport http.RoundTripper

	ready     atomic.Bool  // false before Serve and once shutdown starts
	throttled atomic.Int64 // ingest requests answered 429
	idem      idempotency  // Idempotency-Key requests (idempotency.go)
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
	// replayMu, of a dead-letter table, is held by a replay of its
	// dead letters (replay.go).
	replayMu sync.Mutex
	// routingOff is set once key routing is off for the table
	// (cluster/keyroute).
	routingOff atomic.Bool
	// degraded, when not empty, is why the table's computed columns or
	// filters did not load at start: the table is read-only (writes get
	// ErrTableDegraded, its sources do not start) until a restart loads
	// them. Immutable after New.
	degraded string

	compactRuns, compactErrors, expireRuns atomic.Int64
	compactRows                            atomic.Int64
	lastCompact                            atomic.Int64 // unix ns of the last successful compaction's watermark
	// deleteFilesSincePass counts the position delete files committed
	// since the last maintenance pass began; maintainDue asks the
	// maintenance loop for a pass (maintain.go).
	deleteFilesSincePass atomic.Int64
	maintainDue          chan struct{}
	cold                 coldapi.Tier // nil: compaction to compact.dir, or none
	coldHealth           *coldHealth  // with cold: its runs' failures and lag (coldhealth.go)

	// compute is cfg's computed columns and filters as package compute
	// takes them (options.go).
	compute compute.Config
	// registries decode framed bodies and registry dead letters (framed.go).
	registries registryDecoders
}

// New opens the store and every table of cfg and loads their computed
// columns and filters, reporting every problem at once. Nothing listens
// until Serve.
func New(ctx context.Context, cfg *config.Config, opts Options) (*Server, error) {
	if err := validate(cfg); err != nil {
		return nil, err
	}
	// Before the store is opened: a binary without the gRPC listener
	// cannot serve this config at all.
	if err := checkGRPC(cfg); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: opts.Logger, now: opts.Now, tables: map[string]*tableState{}, startedAt: time.Now(), reloadSignals: opts.ReloadSignals}
	if s.log == nil {
		s.log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	if opts.ProcessLog {
		slog.SetDefault(s.log)
	}
	s.nodeID = newNodeID()
	s.fanout = &cluster.Fanout{NodeTimeout: cfg.Cluster.NodeTimeout}
	members, err := clusterMembers(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	s.members = members
	memberTLS := opts.MemberTLS
	if memberTLS == nil {
		if memberTLS, err = clientTLS(cfg.Cluster.TLS); err != nil {
			return nil, fmt.Errorf("cluster.%w", err)
		}
	}
	if err := s.setupAuth(cfg, memberTLS); err != nil {
		return nil, err
	}
	s.leases = s.newLeases()
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
	store, err := table.Open(dir, table.Options{Logger: s.log.With("component", "pebble"),
		MinFreeBytes: cfg.Storage.MinFreeBytes, ReserveBytes: cfg.Storage.ReserveBytes})
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
	s.metrics = s.metricsHandler()
	return s, nil
}

func (s *Server) openTable(ctx context.Context, tc config.Table) (*tableState, error) {
	ts := &tableState{cfg: tc, compute: computeConfig(tc), schema: map[string]compute.Type{}, maintainDue: make(chan struct{}, 1)}
	ts.policy, _ = ingest.ParsePolicy(tc.OnBadLine) // validated
	tcfg := table.Config{Name: tc.Name, HashBy: tc.HashBy, SortBy: tc.SortBy, TTL: tc.TTL, BlockSpan: tc.BlockSpan, PrimaryKey: tc.PrimaryKey}
	for _, c := range tc.Schema {
		typ, err := coltype.Parse(c.Type)
		if err != nil {
			return nil, fmt.Errorf("schema column %q: %w", c.Name, err)
		}
		ts.schema[c.Name] = typ
		tcfg.Columns = append(tcfg.Columns, table.Column{Name: c.Name, Type: table.StoredType(typ)})
	}
	if len(tc.Schema) > 0 {
		// A static schema holds the computed columns too, with their
		// declared types, unless the schema lists them itself.
		for _, cc := range tc.Computed {
			if _, listed := ts.schema[cc.Name]; listed {
				continue
			}
			typ, err := coltype.Parse(cc.Type)
			if err != nil {
				return nil, fmt.Errorf("computed column %q: %w", cc.Name, err)
			}
			tcfg.Columns = append(tcfg.Columns, table.Column{Name: cc.Name, Type: table.StoredType(typ)})
		}
	}
	if len(tc.Computed) > 0 || len(tc.Filters) > 0 {
		p, err := compute.New(ctx, ts.compute, s.computeOptions(tc))
		if err != nil {
			// The config is valid (checked before), so this is a script
			// or plugin that does not load: a file changed since the last
			// start (a reload refused it while the server ran), a URL
			// down. One table's script must not keep every other table
			// and source of the node down: the table starts degraded,
			// readable but refusing writes, and says why in /readyz.
			// `sluice serve --check` is the way to fail before a start.
			ts.degraded = err.Error()
			s.log.Error("table degraded: its computed columns or filters did not load; it refuses writes until a restart loads them", "table", tc.Name, "error", err)
		} else {
			ts.proc = p
		}
	}
	t, err := s.store.Table(tcfg)
	if err != nil {
		if ts.proc != nil {
			ts.proc.Close()
		}
		return nil, err
	}
	t.SetMaxColumns(tc.MaxColumns)
	// An Iceberg column never widens from long to double or string: a
	// column's type is fixed by its first value, and a row that does not
	// fit is a dead letter (docs/streams.md, evolution policy).
	iceberg := tc.Compact.Iceberg != nil
	t.SetFixedTypes(iceberg)
	ts.table = t
	ts.pipe = &ingest.Pipeline{Table: appender{t}, Compute: ts.proc, RowOf: schemaErrorRow}
	if ts.compute.UsesDeadLetter() || len(tc.Sources) > 0 || ts.policy == ingest.Skip || iceberg {
		// The dead-letter output of a table is the table <name>_deadletter
		// (time-ordered, one partition), queried like any other. Stream
		// sources add the message's origin (streams.go).
		dcfg := table.Config{Name: tc.Name + DeadLetterSuffix, SortBy: "time"}
		dschema := map[string]coltype.Type{}
		for _, c := range deadLetterColumns(tc) {
			typ, err := coltype.Parse(c.Type)
			if err != nil {
				if ts.proc != nil {
					ts.proc.Close()
				}
				return nil, fmt.Errorf("dead-letter table: column %q: %w", c.Name, err)
			}
			dschema[c.Name] = typ
			dcfg.Columns = append(dcfg.Columns, table.Column{Name: c.Name, Type: table.StoredType(typ)})
		}
		dt, err := s.store.Table(dcfg)
		if err != nil {
			if ts.proc != nil {
				ts.proc.Close()
			}
			return nil, fmt.Errorf("dead-letter table: %w", err)
		}
		ts.pipe.DeadLetters = appender{dt}
		dts := &tableState{cfg: config.Table{Name: dcfg.Name, SortBy: "time"}, table: dt, schema: dschema}
		if tc.Compact.Iceberg != nil {
			// The dead letters go to the Iceberg table <name>_deadletter
			// beside the main one, committed as the main table's rows are
			// (the same catalog, namespace, schedule and commit protocol):
			// its users see what the table could not take, and it outlives
			// the node's store (docs/streams.md, "Dead letters and replay").
			dts.cfg.Compact = tc.Compact
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

// Handler is the HTTP API: the routes of Server.routes, each behind the
// permission it states (auth.go).
func (s *Server) Handler() http.Handler {
	return s.newMux(s.routes())
}

// Serve serves the API on ln until ctx is done, then shuts down gracefully:
// readiness goes false, the listener closes (no new connections), in-flight
// batches finish and are acknowledged, the schedulers stop, and the store is
// flushed and closed. It returns after Close.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.checkExposure(ln.Addr()); err != nil {
		ln.Close()
		s.Close()
		return err
	}
	var err error
	if s.tls, err = loadTLS(s.cfg); err != nil {
		ln.Close()
		s.Close()
		return fmt.Errorf("server: %w", err)
	}
	gln, gl, err := s.listenGRPC()
	if err != nil {
		ln.Close()
		s.Close()
		return fmt.Errorf("server: %w", err)
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	ln, conns := s.serveListener(bg, ln, &wg)
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: min(s.cfg.Limits.ReadTimeout, 10*time.Second),
		ReadTimeout:       s.cfg.Limits.ReadTimeout,
		// WriteTimeout is set per response (queries stream for longer).
		IdleTimeout: s.cfg.Listen.IdleTimeout,
		ConnState:   conns.connState,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.startSchedulers(bg, &wg)
	if s.reloadSignals != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.reloadOnSignal(bg)
		}()
	}
	if s.authn != nil {
		wg.Go(func() { s.authn.Watch(bg, tokensPoll, s.logTokensReload) })
	}
	s.router.Run(bg, &wg)
	s.sources.Start(bg)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	stopGRPC := func(context.Context) {}
	if gln != nil {
		stopGRPC = serveGRPC(gl, gln, &wg, s.log)
		s.log.Info("serving gRPC", "addr", gln.Addr().String())
	}
	s.ready.Store(true)
	s.log.Info("serving", "addr", ln.Addr().String(), "tls", s.tls.config != nil, "tables", s.names, "storage", s.cfg.Storage.Dir)
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
	stopGRPC(sctx)
	s.leases.EndAll() // a lease's hold would keep the last compaction waiting
	stopBG()
	if err := s.awaitStopped(sctx, &wg); err != nil {
		// Something (a script that does not stop, a plugin) still runs
		// and may still write: the store is not closed under it. Every
		// acknowledged batch and stream position is on disk already (a
		// batch is synced before it is acknowledged), so this exit is a
		// crash that loses nothing.
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	s.log.Info("stopped")
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// ErrShutdownTimeout: Serve gave up waiting for ingest, sources or
// schedulers to stop within limits.shutdown_timeout, and returned without
// closing the store.
var ErrShutdownTimeout = errors.New("server: shutdown timed out")

// awaitStopped waits, until ctx is done, for the schedulers (wg), the
// stream sources and the ingest batches in flight to stop. When ctx ends
// first it logs and returns what still runs, wrapping ErrShutdownTimeout.
func (s *Server) awaitStopped(ctx context.Context, wg *sync.WaitGroup) error {
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		s.sources.Wait()
		close(stopped)
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stopped:
			if s.queue.Len() == 0 {
				return nil
			}
			// The schedulers and sources are done but batches are still
			// queued: wait for them alone, until ctx ends.
			stopped = nil
			continue
		case <-tick.C:
			if stopped == nil && s.queue.Len() == 0 {
				return nil
			}
			continue
		case <-ctx.Done():
			select { // the last look: did everything stop as time ran out?
			case <-stopped:
				if s.queue.Len() == 0 {
					return nil
				}
				stopped = nil
			default:
				if stopped == nil && s.queue.Len() == 0 {
					return nil
				}
			}
		}
		var what []string
		if running := s.sources.Running(); len(running) > 0 {
			what = append(what, "sources "+strings.Join(running, ", "))
		}
		if n := s.queue.Len(); n > 0 {
			what = append(what, fmt.Sprintf("%d ingest batches", n))
		}
		if stopped != nil && len(what) == 0 {
			what = append(what, "the schedulers (compaction, TTL, reload)")
		}
		for _, c := range s.stuckCalls() {
			what = append(what, c.String())
		}
		err := fmt.Errorf("%w after %v: still running: %s; exiting without closing the store (acknowledged data is on disk)", ErrShutdownTimeout, s.cfg.Limits.ShutdownTimeout, strings.Join(what, "; "))
		s.log.Error("shutdown: gave up waiting", "shutdown_timeout", s.cfg.Limits.ShutdownTimeout.String(), "error", err)
		return err
	}
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
		if c, ok := s.memberTransport.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections() // the connections to the other members
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// ErrTableDegraded is wrapped by writes to a table whose computed columns or
// filters did not load at start (HTTP 503).
var ErrTableDegraded = errors.New("table degraded")

// degradedError is the error of a write to a degraded table.
func (ts *tableState) degradedError() error {
	return fmt.Errorf("%w: table %q refuses writes: its computed columns or filters did not load at start (%s); fix them and restart the server", ErrTableDegraded, ts.cfg.Name, ts.degraded)
}

// ReloadScripts polls every table's script files and URLs once, as the
// `reload:` loop does: a changed version is loaded and swapped in, a broken
// one is logged and counted and the old one keeps running. It returns every
// failure. A degraded table is not retried: it loads at the next start.
func (s *Server) ReloadScripts(ctx context.Context) error {
	var errs []error
	for _, n := range s.names {
		ts := s.tables[n]
		if ts.degraded != "" {
			errs = append(errs, ts.degradedError())
			continue
		}
		if ts.proc == nil {
			continue
		}
		if err := ts.proc.Reload(ctx); err != nil {
			errs = append(errs, fmt.Errorf("table %q: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// reloadOnSignal calls ReloadScripts for each value of s.reloadSignals
// until ctx is done.
func (s *Server) reloadOnSignal(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-s.reloadSignals:
			s.reloadTokens()
			s.log.Info("signal: reloading scripts", "signal", fmt.Sprint(sig))
			s.reloadTLS()
			if err := s.ReloadScripts(ctx); err != nil {
				s.log.Error("signal: scripts reloaded, with failures (the old versions keep running)", "signal", fmt.Sprint(sig), "error", err)
				continue
			}
			s.log.Info("signal: scripts reloaded", "signal", fmt.Sprint(sig))
		}
	}
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
	if err := validate(cfg); err != nil {
		return err
	}
	lua := luavm.NewManager(luavm.Options{})
	defer lua.Close()
	errs := append(checkColdTiers(cfg), checkS3Queues(cfg)...)
	if err := checkGRPC(cfg); err != nil {
		errs = append(errs, err)
	}
	if err := checkListenExposure(ctx, cfg); err != nil {
		errs = append(errs, err)
	}
	if _, err := loadTLS(cfg); err != nil {
		errs = append(errs, err)
	}
	for _, tc := range cfg.Tables {
		if len(tc.Computed) == 0 && len(tc.Filters) == 0 {
			continue
		}
		p, err := compute.New(ctx, computeConfig(tc), compute.Options{Lua: lua, BaseDir: cfg.BaseDir, S3: tableS3(tc)})
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
