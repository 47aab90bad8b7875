package compute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/luavm"
)

// ErrRejected is wrapped by the error Process returns when a function with
// the reject policy failed: the whole batch is rejected.
var ErrRejected = errors.New("batch rejected")

// ErrClosed: Process was called after Close.
var ErrClosed = errors.New("compute: processor closed")

// ErrNilResult: a function returned nil (or Lua nil) for a column that is
// not nullable.
var ErrNilResult = errors.New("function returned nil for a non-nullable column")

// Options are the runtime dependencies of a Processor. The zero Options is
// usable for configs without Lua.
type Options struct {
	// Lua runs the Lua functions; required when the config has any.
	Lua *luavm.Manager
	// LuaConfig is the script config of every Lua function (pool strategy,
	// sandbox); a function's `timeout` overrides its Timeout.
	LuaConfig luavm.ScriptConfig
	// LuaJIT runs the functions with `engine: luajit`; nil means one created
	// at the first such function (NewLuaJITEngine) and closed by Close.
	LuaJIT ScriptEngine
	// BaseDir resolves relative paths in `func` (normally the config's
	// directory); empty means the working directory.
	BaseDir string
	// HTTPClient fetches http(s) and s3 sources; nil means a client with a
	// 30s timeout.
	HTTPClient *http.Client
	// S3 says where s3:// sources are read from when their column or filter
	// has no s3 section of its own (the server gives the table's cold-tier
	// endpoint); nil means the environment's settings.
	S3 *S3Options
	// PluginDir stores downloaded plugins under their content hash; empty
	// means $TMPDIR/sluice-plugins.
	PluginDir string
	// Logger receives sampled function errors and reload events; nil
	// discards them.
	Logger *slog.Logger
	// LogFirst errors of each function are logged, then one in LogEvery.
	// Zero means 5 and 1000.
	LogFirst, LogEvery int
	// Table names the table in the metric series of scripts' stats calls.
	Table string
	// ScriptMetrics exports the series of scripts' stats calls (and what
	// their caps dropped); nil keeps them unexported.
	ScriptMetrics *luavm.ScriptMetrics
	// ScriptLimits are the log rate limit and series cap of the Lua
	// functions that set none of their own.
	ScriptLimits ScriptLimits
}

// Processor applies one table's filters and computed columns to batches of
// rows. It is safe for concurrent use; Reload swaps new function versions in
// between batches.
type Processor struct {
	opts    Options
	fetcher *fetcher
	log     *slog.Logger

	// mu is held for reading while a batch runs and for writing while a
	// reloaded function is swapped in, so a batch sees one version of each.
	mu      sync.RWMutex
	filters []*function
	columns []*function

	reloadMu sync.Mutex // serialises Reload
	ownLua   bool       // opts.Lua was created by New: Close closes it
	jit      jitEngines // the engine of `engine: luajit` functions
}

// function is one configured column or filter.
type function struct {
	name     string
	filter   bool
	typ      Type // columns only
	policy   Policy
	nullable bool
	funcName string
	timeout  time.Duration
	allow    []string // Lua libraries beyond the sandbox
	budget   Budget   // Lua: per batch
	src      Source
	s3       *S3Options // where an s3:// src is read; nil: Options.S3
	engine   string     // Lua engine: "" (gopher-lua) or EngineLuaJIT
	// host is what the Lua function's log, stats and sluice.config reach,
	// across its versions (nil for plugins and built-ins)
	host *luavm.Host

	handler Handler    // REQUIRES: Processor.mu held (R to call, W to swap)
	version [32]byte   // content hash of the running version; guarded like handler
	fetch   fetchState // REQUIRES: Processor.reloadMu held

	stats functionStats
}

type functionStats struct {
	calls, errors, nulls, dropped, rejected, deadLettered, filteredOut atomic.Int64
	reloads, reloadErrors                                              atomic.Int64
	lastError                                                          atomic.Pointer[string]
}

// Stats are the counters of one column or filter since New.
type Stats struct {
	Name   string
	Filter bool
	Loader string
	Source string
	// Calls counts rows evaluated; Errors counts failures (including type
	// errors and nil results); the next four split the failures by the
	// policy applied.
	Calls, Errors, Nulls, Dropped, Rejected, DeadLettered int64
	// FilteredOut counts rows a filter returned false for.
	FilteredOut int64
	// Reloads counts new versions swapped in; ReloadErrors versions that
	// failed to load while the old one kept running.
	Reloads, ReloadErrors int64
	LastError             string
}

// DeadLetter is a row a function failed on under the deadletter policy,
// annotated with where and why.
type DeadLetter struct {
	Row    map[string]any `json:"row"`
	Column string         `json:"column"`
	Filter bool           `json:"filter,omitempty"`
	Loader string         `json:"loader"`
	Source string         `json:"source"`
	Error  string         `json:"error"`
}

// Batch is the outcome of Process.
type Batch struct {
	// Rows are the rows kept, in input order, with the computed columns set.
	Rows []map[string]any
	// DeadLetters are the rows routed to the dead-letter output.
	DeadLetters []DeadLetter
	// Errors are every failure in the batch, whatever the policy did.
	Errors []*Error
}

// New loads every function of cfg (reading files, fetching URLs, compiling
// scripts, opening plugins) and reports every problem at once: those of the
// config's shape and those of loading every function whose config is sound.
// If opts.Lua is nil and the config has Lua functions, New creates a
// luavm.Manager that Close closes.
func New(ctx context.Context, cfg Config, opts Options) (*Processor, error) {
	if opts.LogFirst == 0 {
		opts.LogFirst = 5
	}
	if opts.LogEvery == 0 {
		opts.LogEvery = 1000
	}
	p := &Processor{
		opts:    opts,
		fetcher: &fetcher{client: opts.HTTPClient, baseDir: opts.BaseDir, pluginDir: opts.PluginDir},
		log:     opts.Logger,
	}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.opts.Lua == nil && cfg.hasLua() {
		p.opts.Lua = luavm.NewManager(luavm.Options{})
		p.ownLua = true
	}
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, fc := range cfg.Filters {
		policy, perr := parsePolicy(fc.OnError, true)
		src, serr := ResolveSource(fc.Func)
		f := &function{name: fc.Name, filter: true, typ: Bool, policy: policy, funcName: fc.FuncName, timeout: fc.Timeout, allow: fc.Allow, budget: fc.Budget, src: src, s3: fc.S3, engine: fc.Engine}
		if serr == nil && src.Loader() == "lua" {
			f.host = p.newHost(f, fc.ScriptHost)
		}
		if perr == nil && serr == nil && fc.Name != "" && (!src.Plugin || fc.FuncName != "") {
			if err := p.load(ctx, f); err != nil {
				errs = append(errs, err)
			}
		}
		p.filters = append(p.filters, f)
	}
	for _, cc := range cfg.Computed {
		typ, terr := coltype.Parse(cc.Type)
		policy, perr := parsePolicy(cc.OnError, false)
		src, serr := ResolveSource(cc.Func)
		f := &function{name: cc.Name, typ: typ, policy: policy, nullable: cc.Nullable, funcName: cc.FuncName, timeout: cc.Timeout, allow: cc.Allow, budget: cc.Budget, src: src, s3: cc.S3, engine: cc.Engine}
		if serr == nil && src.Loader() == "lua" {
			f.host = p.newHost(f, cc.ScriptHost)
		}
		if terr == nil && perr == nil && serr == nil && cc.Name != "" && (!src.Plugin || cc.FuncName != "") {
			if err := p.load(ctx, f); err != nil {
				errs = append(errs, err)
			}
		}
		p.columns = append(p.columns, f)
	}
	if err := errors.Join(errs...); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// OpenFile loads the config at path and builds its Processor, resolving
// relative paths in `func` against the config's directory (unless
// opts.BaseDir is set).
func OpenFile(ctx context.Context, path string, opts Options) (*Processor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("compute config: %w", err)
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if opts.BaseDir == "" {
		opts.BaseDir = filepath.Dir(path)
	}
	p, err := New(ctx, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func (c Config) hasLua() bool {
	for _, f := range c.Computed {
		if s, err := ResolveSource(f.Func); err == nil && s.Loader() == "lua" {
			return true
		}
	}
	for _, f := range c.Filters {
		if s, err := ResolveSource(f.Func); err == nil && s.Loader() == "lua" {
			return true
		}
	}
	return false
}

func (f *function) errorf(row int, err error) *Error {
	return &Error{Column: f.name, Filter: f.filter, Loader: f.src.Loader(), Source: f.src.String(), Row: row, Err: err}
}

// s3options is where f's s3:// source is read: its own s3 section, else
// the processor's default.
func (f *function) s3options(def *S3Options) *S3Options {
	if f.s3 != nil {
		return f.s3
	}
	return def
}

// load builds f's first handler.
func (p *Processor) load(ctx context.Context, f *function) error {
	var h Handler
	var err error
	switch f.src.Kind {
	case SourceBuiltin:
		h, err = NewBuiltin().Load(f.src.URL)
	case SourceInline:
		h, err = p.newLua(ctx, f, f.src.Code)
	default:
		var got fetched
		got, f.fetch, _, err = p.fetcher.fetch(ctx, f.src, f.s3options(p.opts.S3), fetchState{})
		if err == nil {
			h, err = p.build(ctx, f, got)
			f.version = got.hash
		}
	}
	if err != nil {
		return f.errorf(-1, err)
	}
	f.handler = h
	return nil
}

// build makes the handler of one fetched version.
func (p *Processor) build(ctx context.Context, f *function, got fetched) (Handler, error) {
	if f.src.Plugin {
		return NewPlugin(f.funcName).open(got.path, got.hash)
	}
	return p.newLua(ctx, f, string(got.data))
}

// Reload polls every file, URL and S3 source once; a changed source is loaded
// and swapped in between batches. A version that fails to load is reported
// (returned, logged, counted in ReloadErrors) and the old one keeps running.
func (p *Processor) Reload(ctx context.Context) error {
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	var errs []error
	for _, f := range p.all() {
		if f.src.Kind != SourceFile && f.src.Kind != SourceHTTP && f.src.Kind != SourceS3 {
			continue
		}
		got, st, changed, err := p.fetcher.fetch(ctx, f.src, f.s3options(p.opts.S3), f.fetch)
		if err == nil && !changed {
			f.fetch = st
			continue
		}
		var h Handler
		if err == nil {
			h, err = p.build(ctx, f, got)
		}
		if err != nil {
			e := f.errorf(-1, fmt.Errorf("reload: %w", err))
			f.stats.reloadErrors.Add(1)
			msg := e.Error()
			f.stats.lastError.Store(&msg)
			p.log.Error("compute: new version not loaded, the old one keeps running", "column", f.name, "filter", f.filter, "loader", f.src.Loader(), "source", f.src.String(), "error", err)
			// Remember what was seen so that one bad version is reported
			// once, not at every poll; a later fix changes the hash again.
			if st.have {
				f.fetch = st
			}
			errs = append(errs, e)
			continue
		}
		p.mu.Lock()
		old := f.handler
		f.handler, f.version = h, got.hash
		p.mu.Unlock()
		f.fetch = st
		f.stats.reloads.Add(1)
		closeHandler(old)
		p.log.Info("compute: new version swapped in", "column", f.name, "filter", f.filter, "loader", f.src.Loader(), "source", f.src.String())
	}
	return errors.Join(errs...)
}

// Watch calls Reload every interval until ctx is done. Files are polled, not
// watched with inotify: one mechanism serves files and URLs, and polling sees
// editors' rename-on-save and Kubernetes ConfigMap symlink swaps that an
// inotify watch on the old inode misses.
func (p *Processor) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = p.Reload(ctx) // failures are logged and counted
		}
	}
}

func (p *Processor) all() []*function {
	return append(append([]*function(nil), p.filters...), p.columns...)
}

// Close releases every function's resources (Lua scripts).
func (p *Processor) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.all() {
		if f.handler != nil {
			closeHandler(f.handler)
			f.handler = nil
		}
		if f.host != nil {
			f.host.Close()
			f.host = nil
		}
	}
	p.closeEngines()
	if p.ownLua {
		p.ownLua = false
		return p.opts.Lua.Close()
	}
	return nil
}

func closeHandler(h Handler) {
	if c, ok := h.(io.Closer); ok {
		_ = c.Close()
	}
}

// Stats returns the counters of every filter and column, filters first.
func (p *Processor) Stats() []Stats {
	var out []Stats
	for _, f := range p.all() {
		s := Stats{
			Name: f.name, Filter: f.filter, Loader: f.src.Loader(), Source: f.src.String(),
			Calls: f.stats.calls.Load(), Errors: f.stats.errors.Load(), Nulls: f.stats.nulls.Load(),
			Dropped: f.stats.dropped.Load(), Rejected: f.stats.rejected.Load(), DeadLettered: f.stats.deadLettered.Load(),
			FilteredOut: f.stats.filteredOut.Load(), Reloads: f.stats.reloads.Load(), ReloadErrors: f.stats.reloadErrors.Load(),
		}
		if m := f.stats.lastError.Load(); m != nil {
			s.LastError = *m
		}
		out = append(out, s)
	}
	return out
}

// Process applies the filters, then the computed columns in order, to rows.
// Rows are changed in place (computed columns set; Lua scripts and plugins
// may also change other fields). The returned Batch.Rows reuses rows' array.
// If a function with the reject policy fails, Process returns an error
// wrapping ErrRejected (and the *Error) and the batch must not be stored.
func (p *Processor) Process(ctx context.Context, rows []map[string]any) (Batch, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var b Batch
	alive := make([]bool, len(rows))
	idx := make([]int, 0, len(rows)) // indexes of the rows still alive
	for i := range rows {
		alive[i] = true
		idx = append(idx, i)
	}
	sub := make([]map[string]any, 0, len(rows))
	out := make([]any, len(rows))
	errs := make([]error, len(rows))
	for _, f := range p.all() {
		if len(idx) == 0 {
			break
		}
		sub = sub[:0]
		for _, i := range idx {
			sub = append(sub, rows[i])
		}
		o, e := out[:len(sub)], errs[:len(sub)]
		clear(o)
		clear(e)
		f.evaluate(withRowsAt(ctx, idx), sub, o, e)
		f.stats.calls.Add(int64(len(sub)))
		kept := idx[:0]
		for j, i := range idx {
			v, err := o[j], e[j]
			if err == nil {
				v, err = f.check(v)
			}
			if err == nil {
				if f.filter {
					if v == false {
						f.stats.filteredOut.Add(1)
						alive[i] = false
						continue
					}
				} else {
					rows[i][f.name] = v
				}
				kept = append(kept, i)
				continue
			}
			fe := f.errorf(i, err)
			b.Errors = append(b.Errors, fe)
			p.failed(f, fe, func() map[string]any { return rows[i] })
			switch f.policy {
			case PolicyNull:
				f.stats.nulls.Add(1)
				rows[i][f.name] = nil
				kept = append(kept, i)
			case PolicyKeep:
				kept = append(kept, i)
			case PolicyDrop:
				f.stats.dropped.Add(1)
				alive[i] = false
			case PolicyDeadLetter:
				f.stats.deadLettered.Add(1)
				alive[i] = false
				b.DeadLetters = append(b.DeadLetters, DeadLetter{Row: rows[i], Column: f.name, Filter: f.filter, Loader: fe.Loader, Source: fe.Source, Error: err.Error()})
			case PolicyReject:
				f.stats.rejected.Add(1)
				return b, fmt.Errorf("%w: %w", ErrRejected, fe)
			}
		}
		idx = kept
	}
	n := 0
	for i, r := range rows {
		if alive[i] {
			rows[n] = r
			n++
		}
	}
	b.Rows = rows[:n]
	return b, nil
}

// evaluate runs f on rows, through the batch interface when there is one.
func (f *function) evaluate(ctx context.Context, rows []map[string]any, out []any, errs []error) {
	if f.handler == nil {
		for i := range errs {
			errs[i] = ErrClosed
		}
		return
	}
	if bh, ok := f.handler.(BatchHandler); ok {
		if err := bh.Values(ctx, rows, out, errs); err != nil {
			for i := range errs {
				out[i], errs[i] = nil, err
			}
		}
		return
	}
	valuesOneByOne(f.handler, rows, out, errs)
}

// check coerces a result to the function's type.
func (f *function) check(v any) (any, error) {
	if v == nil {
		if f.nullable && !f.filter {
			return nil, nil
		}
		if f.filter {
			return nil, errors.New("filter returned nil, want a bool")
		}
		return nil, ErrNilResult
	}
	if f.filter {
		if _, ok := v.(bool); !ok {
			return nil, fmt.Errorf("%w: filter returned %T, want a bool", ErrType, v)
		}
		return v, nil
	}
	return Coerce(v, f.typ)
}

// maxLoggedRow caps the JSON of a row in an error log line.
const maxLoggedRow = 1024

// failed counts a failure and logs a sample of them with the row (made
// only for the errors logged).
func (p *Processor) failed(f *function, e *Error, rowOf func() map[string]any) {
	n := f.stats.errors.Add(1)
	msg := e.Error()
	f.stats.lastError.Store(&msg)
	if n > int64(p.opts.LogFirst) && n%int64(p.opts.LogEvery) != 0 {
		return
	}
	row := rowOf()
	js, err := AppendJSONRow(nil, row, nil)
	if err != nil {
		js, _ = json.Marshal(fmt.Sprint(row))
	}
	if len(js) > maxLoggedRow {
		js = append(js[:maxLoggedRow], "..."...)
	}
	p.log.Warn("compute: function failed", "column", f.name, "filter", f.filter, "loader", e.Loader, "source", e.Source, "policy", f.policy.String(), "error", e.Err, "errors", n, "row", string(js))
}
