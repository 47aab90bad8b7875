package compute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicedb/sluice/luajit"
	"github.com/sluicedb/sluice/luavm"
)

// The Lua engines a column or filter can choose with `engine:`.
const (
	EngineGopherLua = "gopher-lua" // the default, luavm's pool (also "lua" or empty)
	EngineLuaJIT    = "luajit"     // package luajit; needs a binary built with -tags luajit
)

// ScriptEngine is a Lua engine beside luavm's: it compiles a script once and
// runs batches of rows through it. compute needs no more of it; package
// luajit provides one (NewLuaJITEngine).
type ScriptEngine interface {
	Compile(name, code string, cfg EngineConfig) (BatchScript, error)
	Close() error
}

// BatchScript is one compiled version of a script on a ScriptEngine.
// Values has BatchHandler's contract: per-row results and errors, the
// returned error only when no row could run.
type BatchScript interface {
	Values(ctx context.Context, rows []map[string]any, out []any, errs []error) error
	Close() error
}

// EngineConfig is what a ScriptEngine gets of a function's config.
type EngineConfig struct {
	SourceName string        // what errors call the script: file, URL or column
	FuncName   string        // the function called per row
	Timeout    time.Duration // per row; 0 means the engine's default
	Allow      []string      // libraries beyond the sandbox
	// MemoryLimit and MaxResultBytes are the function's memory_limit and
	// max_result_bytes (0: the engine's defaults, < 0: none).
	MemoryLimit, MaxResultBytes int64
	// Host is what the script's log, stats and sluice.config reach.
	Host *luavm.Host
}

// NewLuaJITEngine returns the LuaJIT engine, or luajit.ErrUnavailable when
// the binary was built without it.
func NewLuaJITEngine() (ScriptEngine, error) {
	e, err := luajit.New()
	if err != nil {
		return nil, err
	}
	return luajitEngine{e}, nil
}

type luajitEngine struct{ e *luajit.Engine }

func (l luajitEngine) Compile(name, code string, cfg EngineConfig) (BatchScript, error) {
	return l.e.Load(name, code, luajit.Config{SourceName: cfg.SourceName, FuncName: cfg.FuncName, Timeout: cfg.Timeout, Allow: cfg.Allow,
		MemoryLimit: cfg.MemoryLimit, MaxResultBytes: cfg.MaxResultBytes, Host: cfg.Host})
}

func (l luajitEngine) Close() error { return l.e.Close() }

// Collector is the engine's per-script counters, for the server's registry.
func (l luajitEngine) Collector() prometheus.Collector { return l.e.Collector() }

// checkEngine validates `engine:`.
func checkEngine(where, engine string) []error {
	switch engine {
	case "", "lua", EngineGopherLua, EngineLuaJIT:
		return nil
	}
	return []error{fmt.Errorf("%s: unknown engine %q (known: %s, %s)", where, engine, EngineGopherLua, EngineLuaJIT)}
}

// jitEngines holds the ScriptEngine of processors that did not get one in
// Options, created at the first function that asks for it.
type jitEngines struct {
	mu  sync.Mutex
	eng ScriptEngine
	own bool
}

func (p *Processor) scriptEngine() (ScriptEngine, error) {
	p.jit.mu.Lock()
	defer p.jit.mu.Unlock()
	if p.jit.eng != nil {
		return p.jit.eng, nil
	}
	if p.opts.LuaJIT != nil {
		p.jit.eng = p.opts.LuaJIT
		return p.jit.eng, nil
	}
	e, err := NewLuaJITEngine()
	if err != nil {
		return nil, err
	}
	p.jit.eng, p.jit.own = e, true
	return e, nil
}

func (p *Processor) closeEngines() {
	p.jit.mu.Lock()
	defer p.jit.mu.Unlock()
	if p.jit.own && p.jit.eng != nil {
		_ = p.jit.eng.Close()
		p.jit.eng = nil
	}
}

// newJIT builds the handler of a function whose engine is not gopher-lua.
func (p *Processor) newJIT(f *function, code string) (Handler, error) {
	eng, err := p.scriptEngine()
	if err != nil {
		return nil, fmt.Errorf("engine %s: %w", f.engine, err)
	}
	timeout := p.opts.LuaConfig.Timeout
	if f.timeout > 0 {
		timeout = f.timeout
	}
	// The column's or filter's own allow: adds to the processor's, as on
	// gopher-lua (newLua).
	allow := p.opts.LuaConfig.Allow
	if len(f.allow) > 0 {
		allow = append(append([]string(nil), allow...), f.allow...)
	}
	h := &engineLua{eng: eng, name: f.name, cfg: EngineConfig{
		SourceName: sourceName(f.src, f.name), FuncName: f.funcName, Timeout: timeout, Allow: allow,
		MemoryLimit: f.budget.MemoryLimit, MaxResultBytes: f.budget.MaxResultBytes, Host: f.host,
	}}
	if h.cfg.FuncName == "" {
		h.cfg.FuncName = "main"
	}
	return h.compile(code, f.src.Kind == SourceInline)
}

// engineLua is the handler of a Lua function on a ScriptEngine.
type engineLua struct {
	eng    ScriptEngine
	name   string
	cfg    EngineConfig
	script BatchScript
}

func (h *engineLua) compile(code string, inline bool) (*engineLua, error) {
	sum := sha256.Sum256([]byte(code))
	name := fmt.Sprintf("%s@%s.%d", h.name, hex.EncodeToString(sum[:6]), luaLoads.Add(1))
	s, err := h.eng.Compile(name, code, h.cfg)
	if err != nil {
		if inline {
			err = fmt.Errorf("%w%s", err, inlineHint(code))
		}
		return nil, err
	}
	return &engineLua{eng: h.eng, name: h.name, cfg: h.cfg, script: s}, nil
}

// Load compiles inline code or the Lua file it names (see ResolveSource).
func (h *engineLua) Load(uriOrCode string) (Handler, error) {
	src, code, err := luaSource(uriOrCode)
	if err != nil {
		return nil, err
	}
	cfg := h.cfg
	cfg.SourceName = sourceName(src, h.name)
	return (&engineLua{eng: h.eng, name: h.name, cfg: cfg}).compile(code, src.Kind == SourceInline)
}

func (*engineLua) String() string { return "lua" }

// Value runs one row as a batch of one.
func (h *engineLua) Value(row map[string]any) (any, error) {
	out, errs := [1]any{}, [1]error{}
	if err := h.Values(context.Background(), []map[string]any{row}, out[:], errs[:]); err != nil {
		return nil, err
	}
	return out[0], errs[0]
}

// Values runs the batch on the engine; the timeout bounds each row.
func (h *engineLua) Values(ctx context.Context, rows []map[string]any, out []any, errs []error) error {
	if h.script == nil {
		return errors.New("lua: not loaded")
	}
	return h.script.Values(ctx, rows, out, errs)
}

// Close unloads the script version.
func (h *engineLua) Close() error {
	if h.script == nil {
		return nil
	}
	return h.script.Close()
}
