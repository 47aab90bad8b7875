//go:build luajit && cgo

package luajit

/*
#cgo pkg-config: luajit
#cgo LDFLAGS: -lm
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/luavm"
)

// Available reports whether this binary was built with the LuaJIT engine.
const Available = true

//go:embed host.lua
var hostSource string

// Defaults of Config.
const (
	DefaultTimeout     = luavm.DefaultTimeout
	DefaultMemoryLimit = luavm.DefaultMemoryLimit
	// DefaultMaxResultBytes is Config.MaxResultBytes when 0.
	DefaultMaxResultBytes = luavm.DefaultMaxResultBytes
)

// Config is a script's config.
type Config struct {
	// Timeout bounds each row (and the main chunk when a VM starts); 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MemoryLimit bounds the Lua heap of each VM, in bytes: checked at the
	// loops and calls of user code, and before table.concat and string.rep
	// build their result; no allocation may take the heap past twice it
	// (host.c's allocator). 0 means DefaultMemoryLimit.
	MemoryLimit int64
	// MaxResultBytes bounds a value a row gives (a string, a table's JSON,
	// a field written to the row): a larger one fails the row with
	// luavm.ErrResultSize before it is copied out. 0 means
	// DefaultMaxResultBytes, < 0 no bound.
	MaxResultBytes int64
	// PoolSize is the most VMs the script runs at once; 0 means GOMAXPROCS.
	PoolSize int
	// Allow opens libraries beyond the sandbox: io, os, debug, load,
	// require, coroutine, ffi.
	Allow []string
	// SourceName is what errors call the script (its file, URL or column).
	SourceName string
	// FuncName is the function called per row; "" means "main".
	FuncName string
	// Host is what the script's log and stats modules and sluice.config
	// reach; nil: lines and series go nowhere.
	Host *luavm.Host
}

var knownLibs = map[string]bool{"io": true, "os": true, "debug": true, "load": true, "require": true, "coroutine": true, "ffi": true}

// Engine holds the scripts loaded on LuaJIT. It is safe for concurrent use.
type Engine struct {
	mu       sync.Mutex
	closed   bool
	scripts  map[*Script]struct{}
	watchdog watchdog
}

// New returns an engine.
func New() (*Engine, error) {
	return &Engine{scripts: make(map[*Script]struct{})}, nil
}

// Close closes every script.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	scripts := make([]*Script, 0, len(e.scripts))
	for s := range e.scripts {
		scripts = append(scripts, s)
	}
	e.mu.Unlock()
	for _, s := range scripts {
		s.Close()
	}
	e.watchdog.close()
	return nil
}

// Script is one compiled script and its pool of VMs.
type Script struct {
	eng      *Engine
	id       string // the name it was loaded under
	name     string // what errors call it
	funcName string
	cfg      Config
	bytecode string
	timeout  time.Duration

	host   *luavm.Host // what log, stats and sluice.config reach
	params string      // the host's params as JSON, for sluice.config

	idle   chan *vm      // VMs ready for a batch
	slots  chan struct{} // one token per VM alive
	closed atomic.Bool
	stats  counters
}

// Load compiles code once (the bytecode every VM of the pool loads), runs
// the main chunk in a first VM and checks that it defines the function.
// name is the script's unique name; cfg.SourceName is what errors show.
func (e *Engine) Load(name, code string, cfg Config) (*Script, error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, luavm.ErrClosed
	}
	source := cfg.SourceName
	if source == "" {
		source = name
	}
	for _, a := range cfg.Allow {
		if !knownLibs[a] {
			return nil, fmt.Errorf("luajit: script %s: unknown library %q in Allow (known: io, os, debug, load, require, coroutine, ffi)", source, a)
		}
	}
	if cfg.FuncName == "" {
		cfg.FuncName = "main"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.MemoryLimit == 0:
		cfg.MemoryLimit = DefaultMemoryLimit
	case cfg.MemoryLimit < 0: // none: a bound no machine reaches
		cfg.MemoryLimit = 1 << 50
	}
	switch {
	case cfg.MaxResultBytes == 0:
		cfg.MaxResultBytes = DefaultMaxResultBytes
	case cfg.MaxResultBytes < 0:
		cfg.MaxResultBytes = math.MaxInt64 / 2
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = runtime.GOMAXPROCS(0)
	}
	src, err := instrument(code)
	if err != nil {
		return nil, &luavm.CompileError{Script: source, Msg: err.Error()}
	}
	bc, err := compile(src, source)
	if err != nil {
		return nil, err
	}
	host := cfg.Host
	if host == nil {
		host = luavm.NewHost(luavm.HostOptions{LogRate: -1})
	}
	params, err := host.ParamsJSON()
	if err != nil {
		return nil, fmt.Errorf("luajit: script %s: params: %w", source, err)
	}
	s := &Script{
		eng: e, id: name, name: source, funcName: cfg.FuncName, cfg: cfg, bytecode: bc, timeout: cfg.Timeout, host: host, params: params,
		idle:  make(chan *vm, cfg.PoolSize),
		slots: make(chan struct{}, cfg.PoolSize),
	}
	s.slots <- struct{}{}
	v, err := s.newVM()
	if err != nil {
		<-s.slots
		return nil, err
	}
	s.idle <- v
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		s.Close()
		return nil, luavm.ErrClosed
	}
	e.scripts[s] = struct{}{}
	e.mu.Unlock()
	return s, nil
}

// compile turns the (instrumented) source into bytecode in a throwaway state.
func compile(src, source string) (string, error) {
	L := C.sl_newstate()
	if L == nil {
		return "", errors.New("luajit: cannot create a Lua state")
	}
	defer C.sl_close(L)
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString("=" + source)
	defer C.free(unsafe.Pointer(cname))
	var out *C.char
	var n C.size_t
	if st := C.sl_compile(L, csrc, C.size_t(len(src)), cname, &out, &n); st != 0 {
		msg := topString(L)
		line, rest := splitWhere(source, msg)
		return "", &luavm.CompileError{Script: source, Line: line, Msg: rest}
	}
	defer C.free(unsafe.Pointer(out))
	return C.GoStringN(out, C.int(n)), nil
}

func topString(L *C.lua_State) string {
	var n C.size_t
	p := C.sl_tostring(L, -1, &n)
	if p == nil {
		return "(error object is not a string)"
	}
	return C.GoStringN(p, C.int(n))
}

// Close unloads the script: idle VMs are closed now, busy ones when they
// come back.
func (s *Script) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.eng.mu.Lock()
	delete(s.eng.scripts, s)
	s.eng.mu.Unlock()
	for {
		select {
		case v := <-s.idle:
			v.close()
			s.stats.vmsClosed.Add(1)
			<-s.slots
		default:
			return nil
		}
	}
}

func (s *Script) acquire(ctx context.Context) (*vm, error) {
	if s.closed.Load() {
		return nil, luavm.ErrNoScript
	}
	select {
	case v := <-s.idle:
		return v, nil
	default:
	}
	select {
	case v := <-s.idle:
		return v, nil
	case s.slots <- struct{}{}:
	default:
		s.stats.waits.Add(1)
		select {
		case v := <-s.idle:
			return v, nil
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", luavm.ErrPoolExhausted, ctx.Err())
		}
	}
	v, err := s.newVM()
	if err != nil {
		<-s.slots
	}
	return v, err
}

func (s *Script) release(v *vm) {
	v.rows, v.cb, v.idx = nil, nil, nil
	if v.broken || s.closed.Load() {
		v.close()
		s.stats.vmsClosed.Add(1)
		<-s.slots
		return
	}
	s.idle <- v
}

// Values calls the script's function on every row in one cgo crossing (plus
// one per column the script reads and one if it needs the whole row, per
// batch). out[i] is the result of row i, errs[i] its error (a
// *luavm.CallError; errors.Is luavm.ErrTimeout or luavm.ErrMemoryLimit for
// stopped rows). The timeout bounds each row; ctx bounds the batch. The
// returned error is for failures of the whole batch (no VM could be had);
// rows not run then carry it too.
func (s *Script) Values(ctx context.Context, rows []map[string]any, out []any, errs []error) error {
	for len(rows) > 0 {
		n := min(len(rows), maxBatch)
		if err := s.values(ctx, rows[:n], out[:n], errs[:n]); err != nil {
			for i := range rows {
				if errs[i] == nil && out[i] == nil {
					errs[i] = err
				}
			}
			return err
		}
		rows, out, errs = rows[n:], out[n:], errs[n:]
	}
	return nil
}

// maxBatch bounds the cells of one crossing (and so the C memory a VM keeps).
const maxBatch = 4096

// ValuesColumns is Values for the rows at rows of cb, a batch held by
// column: the columns the script reads are laid out from cb's cells (no map
// per row), and the fields it writes or deletes change cb's cells.
func (s *Script) ValuesColumns(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, errs []error) error {
	return s.ValuesColumnsNumbers(ctx, cb, rows, out, nil, errs)
}

// ValuesColumnsNumbers is ValuesColumns, but a number result is nums[i],
// with out[i] = luavm.Number, rather than boxed into out[i] (when nums is
// not nil).
func (s *Script) ValuesColumnsNumbers(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, nums []float64, errs []error) error {
	for len(rows) > 0 {
		n := min(len(rows), maxBatch)
		var ns []float64
		if nums != nil {
			ns, nums = nums[:n], nums[n:]
		}
		if err := s.valuesColumns(ctx, cb, rows[:n], out[:n], ns, errs[:n]); err != nil {
			for i := range rows {
				if errs[i] == nil && out[i] == nil {
					errs[i] = err
				}
			}
			return err
		}
		rows, out, errs = rows[n:], out[n:], errs[n:]
	}
	return nil
}

func (s *Script) valuesColumns(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, nums []float64, errs []error) error {
	v, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.release(v)
	return v.runColumns(ctx, cb, rows, out, nums, errs)
}

func (s *Script) values(ctx context.Context, rows []map[string]any, out []any, errs []error) error {
	v, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.release(v)
	return v.run(ctx, rows, out, errs)
}

// errTimeoutMain and friends name the host's answers from init.
func (s *Script) initError(res string) error {
	switch res {
	case "timeout":
		return &luavm.CallError{Script: s.name, Func: "<main chunk>", Msg: luavm.ErrTimeout.Error(), Err: luavm.ErrTimeout}
	case "memory":
		return &luavm.CallError{Script: s.name, Func: "<main chunk>", Msg: luavm.ErrMemoryLimit.Error(), Err: luavm.ErrMemoryLimit}
	case "nofunc":
		return fmt.Errorf("luajit: %s: %q: %w", s.name, s.funcName, luavm.ErrNoFunction)
	}
	return s.callError("<main chunk>", res)
}

// callError turns an error text with its traceback into a CallError.
func (s *Script) callError(fn, text string) *luavm.CallError {
	msg, tb, _ := strings.Cut(text, "\nstack traceback:\n")
	ce := &luavm.CallError{Script: s.name, Func: fn, Traceback: "stack traceback:\n" + tb}
	ce.Line, ce.Msg = splitWhere(s.name, msg)
	if ce.Line == 0 {
		for _, ln := range strings.Split(tb, "\n") {
			if line, _ := splitWhere(s.name, strings.TrimSpace(ln)); line > 0 {
				ce.Line = line
				break
			}
		}
	}
	return ce
}

// splitWhere takes "<script>:<line>: message" apart.
func splitWhere(script, msg string) (int, string) {
	if strings.HasPrefix(msg, script+":") {
		tail := msg[len(script)+1:]
		if i := strings.IndexByte(tail, ':'); i > 0 {
			n := 0
			for _, c := range tail[:i] {
				if c < '0' || c > '9' {
					return 0, msg
				}
				n = n*10 + int(c-'0')
			}
			return n, strings.TrimSpace(tail[i+1:])
		}
	}
	return 0, msg
}
