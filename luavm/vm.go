package luavm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// VM is one gopher-lua state with the script's code loaded. A VM is owned by
// one caller at a time (inside Do, or inside one Invoke); it is never used
// concurrently.
type VM struct {
	L    *lua.LState
	pool *pool

	// base holds the libraries and everything the script defined when it was
	// loaded; scripts never write it (see proxy). funcs caches base's
	// functions by name so the hot path does no table lookup.
	base  *lua.LTable
	funcs map[string]*lua.LFunction
	// lastName/lastFn: a one-entry cache in front of funcs, since a batch
	// calls the same function again and again (a string compare of the same
	// constant is a pointer compare).
	lastName string
	lastFn   *lua.LFunction

	// proxy is the globals table the script's functions see: empty, with
	// base as __index. Every global a call writes lands in proxy (and the
	// first write of each name passes __newindex, which sets dirty), so
	// after a call the VM is made clean again by emptying proxy, only when
	// dirty is set. proxyMeta is proxy's metatable, restored if a call
	// replaced it.
	proxy     *lua.LTable
	proxyMeta *lua.LTable
	dirty     bool
	scratch   []lua.LValue
	// sealed maps the read-only library proxies to their names (see seal).
	sealed map[*lua.LTable]string

	// row is the reusable proxy of Row; rowData its value.
	row     *lua.LUserData
	rowData *rowData

	// ctx is the VM's one context, set on the LState once at creation; the
	// watchdog closes its done channel when the call's deadline passes.
	// nil when the script has no time limit (the interpreter loop then
	// skips the per-instruction check entirely).
	ctx *vmContext

	// deadline: 0 = no call armed; >0 = the running call's deadline in
	// monotonic nanoseconds (see now); deadlineFired = the watchdog stopped
	// the call. Written by the owner with Store/CompareAndSwap, read and
	// swapped by the watchdog.
	deadline atomic.Int64
	// started is the coarse clock when the call was armed; only kept when
	// Options.HeapLimit is set (the watchdog then stops long calls only).
	started atomic.Int64
	// armSeq counts the calls armed and the Lua calls made in them (a row
	// each in compute), for the watchdog's per-call memory (callmem.go).
	armSeq armSeq

	// what the host modules (hostmod.go) keep per VM: the row the running
	// call is about (AtRow) and the metric series looked up so far
	locate      RowLocator
	rowIndex    int
	plainSeries map[string]map[string]*Series // by kind, then name
	seriesCache map[string]*Series            // by seriesKey, for labelled series
	labelBuf    []string                      // a stats call's labels, reused

	// broken: the VM must be closed rather than returned to its pool.
	broken bool
	// lastUsed (monotonic ns) is set on release. REQUIRES pool.mu.
	lastUsed int64

	// calls and errs are counted by the owner without atomics (no locked
	// instruction per call); release publishes them, where Stats reads them.
	calls, errs uint64
	published   struct{ calls, errs atomic.Uint64 }
}

const deadlineFired = -1

// vmContext is a context.Context whose Done channel is a plain field, so
// gopher-lua's per-instruction `<-ctx.Done()` check costs a field load and a
// non-blocking receive. It fires at most once (whoever fires it first wins
// the compare-and-swap on VM.deadline) and is never reset: a VM whose
// context fired is closed, not reused.
type vmContext struct {
	done chan struct{}
	err  error // why done was closed; written before the close, read after it
}

func (c *vmContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *vmContext) Done() <-chan struct{}       { return c.done }
func (c *vmContext) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}
func (c *vmContext) Value(any) any { return nil }

// fire closes done with cause. Called at most once, by the watchdog or by a
// cancelled caller context, after winning the CAS on VM.deadline.
func (c *vmContext) fire(cause error) {
	c.err = cause
	close(c.done)
}

var _ context.Context = (*vmContext)(nil)

// epoch anchors now's monotonic clock.
var epoch = time.Now()

// now is a monotonic clock in nanoseconds, the unit of every deadline here.
func now() int64 { return int64(time.Since(epoch)) }

// newVM creates a state, opens the libraries the script's config allows,
// installs the Go functions and modules, and runs the script's main chunk
// with the proxy as its globals.
func newVM(ctx context.Context, p *pool) (*VM, error) {
	s := p.script
	cfg := s.cfg
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       cfg.CallStackSize,
		RegistrySize:        cfg.RegistrySize,
		RegistryMaxSize:     cfg.RegistryMaxSize,
		MinimizeStackMemory: true,
	})
	vm := &VM{L: L, pool: p, funcs: make(map[string]*lua.LFunction), rowIndex: -1}
	L.G.Registry.RawSetString(vmRegistryKey, &lua.LUserData{Value: vm})
	if err := vm.openLibs(); err != nil {
		vm.close()
		return nil, err
	}
	vm.base = L.G.Global
	installRowType(L)
	for name, fn := range s.mgr.globalFuncs() {
		vm.base.RawSetString(name, L.NewFunction(fn))
	}

	if cfg.ShareGlobals {
		vm.proxy = vm.base
	} else {
		vm.proxy = L.NewTable()
		vm.proxyMeta = L.NewTable()
		vm.proxyMeta.RawSetString("__index", vm.base)
		vm.proxyMeta.RawSetString("__newindex", L.NewFunction(vm.globalWrite))
		// Hidden, so that no call can reach base through it
		// (getmetatable(_G).__index) or replace it.
		vm.proxyMeta.RawSetString("__metatable", lua.LFalse)
		vm.proxy.Metatable = vm.proxyMeta
		vm.base.RawSetString("_G", vm.proxy)
	}

	if cfg.Timeout >= 0 || cfg.LoadTimeout > 0 {
		vm.ctx = &vmContext{done: make(chan struct{})}
		L.SetContext(vm.ctx)
	}
	// The main chunk runs under the load timeout: a top-level endless loop
	// must not hang Load (nor a pool growing under load).
	p.register(vm)
	chunk := L.NewFunctionFromProto(s.proto)
	chunk.Env = vm.proxy
	L.Push(chunk)
	deadline := deadlineAfter(cfg.LoadTimeout)
	var stop func() bool
	if ctx != nil && ctx.Done() != nil && vm.ctx != nil {
		if deadline == 0 {
			deadline = math.MaxInt64 // armed, so that interrupt can fire
		}
		stop = context.AfterFunc(ctx, func() { vm.interrupt(ctxCause(ctx)) })
	}
	vm.arm(deadline)
	err := L.PCall(0, 0, nil)
	fired := vm.disarm()
	if stop != nil && !stop() && err == nil && !fired {
		// ctx ended as the main chunk did: its interrupt could still hit
		// a later call on this VM, so the VM is not kept.
		err = fmt.Errorf("main chunk: %w", ctxCause(ctx))
	}
	if err != nil || fired {
		p.unregister(vm)
		vm.close()
		if err == nil {
			err = fmt.Errorf("main chunk: %w", ErrTimeout)
		}
		ce := vm.callError("<main chunk>", err)
		var cerr *CallError
		if errors.As(ce, &cerr) && cerr.Err == nil && ctx != nil && ctx.Err() != nil {
			cerr.Err = ctxCause(ctx)
		}
		if errors.As(ce, &cerr) && errors.Is(cerr.Err, ErrTimeout) {
			cerr.Msg = fmt.Sprintf("the top level (code outside any function) still ran after the load timeout of %v; an endless loop outside a function? (%v)", cfg.LoadTimeout, cerr.Err)
		}
		return nil, ce
	}
	if cfg.Timeout < 0 && vm.ctx != nil {
		// Calls have no time limit: drop the load's context so that they
		// run gopher-lua's loop without the per-instruction check.
		L.RemoveContext()
		vm.ctx = nil
	}
	// What the main chunk defined becomes part of base: the state every call
	// starts from.
	if !cfg.ShareGlobals {
		vm.proxy.ForEach(func(k, v lua.LValue) { vm.base.RawSet(k, v) })
		vm.cleanGlobals()
	}
	vm.base.ForEach(func(k, v lua.LValue) {
		if fn, ok := v.(*lua.LFunction); ok {
			if name, ok := k.(lua.LString); ok {
				vm.funcs[string(name)] = fn
			}
		}
	})
	return vm, nil
}

// globalWrite is the proxy's __newindex: the first write of a name in a
// call. It marks the VM dirty and stores the value in the proxy.
func (vm *VM) globalWrite(L *lua.LState) int {
	vm.dirty = true
	vm.proxy.RawSet(L.CheckAny(2), L.CheckAny(3))
	return 0
}

// cleanGlobals empties the proxy so the next call sees only base.
func (vm *VM) cleanGlobals() {
	vm.scratch = vm.scratch[:0]
	vm.proxy.ForEach(func(k, _ lua.LValue) { vm.scratch = append(vm.scratch, k) })
	for _, k := range vm.scratch {
		vm.proxy.RawSet(k, lua.LNil)
	}
	clear(vm.scratch)
	vm.proxy.Metatable = vm.proxyMeta
	vm.dirty = false
}

// reset makes the VM clean for its next caller after a call.
func (vm *VM) reset() {
	if vm.L.GetTop() != 0 {
		vm.L.SetTop(0)
	}
	if vm.rowData != nil {
		vm.rowData.m, vm.rowData.cb = nil, nil // do not keep the caller's row alive
	}
	if vm.dirty || (vm.proxyMeta != nil && vm.proxy.Metatable != lua.LValue(vm.proxyMeta)) {
		vm.cleanGlobals()
	}
}

// libraries that a script's config may allow on top of the sandbox.
var knownLibs = map[string]bool{"io": true, "os": true, "debug": true, "load": true, "require": true, "coroutine": true, "channel": true}

func (vm *VM) openLibs() error {
	L := vm.L
	cfg := vm.pool.script.cfg
	allow := make(map[string]bool, len(cfg.Allow))
	for _, a := range cfg.Allow {
		if !knownLibs[a] {
			return fmt.Errorf("luavm: script %s: unknown library %q in Allow (known: io, os, debug, load, require, coroutine, channel)", vm.pool.script.name, a)
		}
		allow[a] = true
	}
	open := func(name string, fn lua.LGFunction) {
		L.Push(L.NewFunction(fn))
		L.Push(lua.LString(name))
		L.Call(1, 0)
	}
	open(lua.BaseLibName, lua.OpenBase)
	open(lua.TabLibName, lua.OpenTable)
	open(lua.StringLibName, lua.OpenString)
	open(lua.MathLibName, lua.OpenMath)
	if allow["io"] {
		open(lua.IoLibName, lua.OpenIo)
	}
	if allow["os"] {
		open(lua.OsLibName, lua.OpenOs)
	}
	if allow["debug"] {
		open(lua.DebugLibName, lua.OpenDebug)
	}
	if allow["coroutine"] {
		open(lua.CoroutineLibName, lua.OpenCoroutine)
	}
	if allow["channel"] {
		open(lua.ChannelLibName, lua.OpenChannel)
	}
	g := L.G.Global
	vm.limitStrings(g)
	if !allow["load"] {
		for _, name := range []string{"load", "loadstring", "loadfile", "dofile"} {
			g.RawSetString(name, lua.LNil)
		}
	}
	var fileRequire lua.LValue = lua.LNil
	if allow["require"] {
		open(lua.LoadLibName, lua.OpenPackage)
		fileRequire = g.RawGetString("require")
	}
	vm.explainBlocked(g, allow)
	if allow["load"] {
		vm.loadInProxy(g)
	}
	// pairs that understands row proxies (gopher-lua has no __pairs).
	next := g.RawGetString("next")
	g.RawSetString("pairs", L.NewFunction(func(L *lua.LState) int {
		v := L.CheckAny(1)
		if ud, ok := v.(*lua.LUserData); ok {
			if r, ok := ud.Value.(*rowData); ok {
				return rowPairs(L, r)
			}
		}
		t := L.CheckTable(1)
		L.Push(next)
		L.Push(t)
		L.Push(lua.LNil)
		return 3
	}))
	// ipairs whose iterator does not allocate: gopher-lua's boxes the index
	// into an interface at every step (5 of the 17 allocations per row of
	// the seed's trim script); small indexes come pre-boxed.
	ipairsAux := L.NewFunction(func(L *lua.LState) int {
		tb := L.CheckTable(1)
		i := L.CheckInt(2) + 1
		v := tb.RawGetInt(i)
		if v == lua.LNil {
			return 0
		}
		L.Push(intNumber(int64(i)))
		L.Push(v)
		return 2
	})
	g.RawSetString("ipairs", L.NewFunction(func(L *lua.LState) int {
		L.Push(ipairsAux)
		L.Push(L.CheckTable(1))
		L.Push(intNumber(0))
		return 3
	}))
	// require: Go modules (json and RegisterModule's) always; files only when
	// allowed.
	loaded := L.NewTable()
	mgr := vm.pool.script.mgr
	g.RawSetString("require", L.NewFunction(func(L *lua.LState) int {
		name := L.CheckString(1)
		if m := loaded.RawGetString(name); m != lua.LNil {
			L.Push(m)
			return 1
		}
		if name == "json" {
			m := vm.readOnly(name, openJSON(L))
			loaded.RawSetString(name, m)
			L.Push(m)
			return 1
		}
		if t, ok := vm.hostModule(name); ok {
			m := vm.readOnly(name, t)
			loaded.RawSetString(name, m)
			L.Push(m)
			return 1
		}
		if funcs, ok := mgr.module(name); ok {
			m := vm.readOnly(name, L.SetFuncs(L.NewTable(), funcs))
			loaded.RawSetString(name, m)
			L.Push(m)
			return 1
		}
		if fileRequire != lua.LNil {
			L.Push(fileRequire)
			L.Push(lua.LString(name))
			L.Call(1, 1)
			return 1
		}
		L.RaiseError("module %q not found (file modules are not allowed for this script; Allow \"require\")", name)
		return 0
	}))
	vm.seal(g)
	return nil
}

// Func returns the script's global function name (as the script defined it
// when loaded). ErrNoFunction if there is none.
func (vm *VM) Func(name string) (*lua.LFunction, error) {
	if vm.lastFn != nil && name == vm.lastName {
		return vm.lastFn, nil
	}
	if fn, ok := vm.funcs[name]; ok {
		vm.lastName, vm.lastFn = name, fn
		return fn, nil
	}
	return nil, fmt.Errorf("luavm: script %s: function %s: %w", vm.pool.script.name, name, ErrNoFunction)
}

// State returns the underlying gopher-lua state, for pushing values (NewRow,
// ToLua) and for anything the VM type does not wrap. Valid only while the VM
// is held.
func (vm *VM) State() *lua.LState { return vm.L }

// Tick is the manager's coarse clock (monotonic ns), which the watchdog
// advances every WatchdogInterval: a caller that must look at the time
// between calls (compute ends a Do after a share of the timeout) reads the
// time only when Tick has moved, not after every call (reading the clock
// cost 30 ns, a tenth of a one-column row, on the benchmark machine).
func (vm *VM) Tick() int64 { return vm.pool.script.mgr.clock.Load() }

// Call calls fn with args and returns nret results (lua.MultRet for all).
// The globals the call wrote are dropped after it (unless ShareGlobals).
// The result slice is allocated; use Call1 on hot paths.
func (vm *VM) Call(fn *lua.LFunction, nret int, args ...lua.LValue) ([]lua.LValue, error) {
	L := vm.L
	base := L.GetTop()
	L.Push(fn)
	for _, a := range args {
		L.Push(a)
	}
	vm.calls++
	vm.armSeq.Add(1) // a new call for the watchdog's memory view (callmem.go)
	err := L.PCall(len(args), nret, nil)
	if vm.dirty {
		vm.cleanGlobals()
	}
	if err != nil {
		L.SetTop(base)
		return nil, vm.callError(vm.funcName(fn), err)
	}
	n := L.GetTop() - base
	out := make([]lua.LValue, n)
	for i := range out {
		out[i] = L.Get(base + 1 + i)
	}
	L.SetTop(base)
	return out, nil
}

// Call1 calls fn with one argument and returns its first result. It does not
// allocate beyond what the Lua function itself does.
func (vm *VM) Call1(fn *lua.LFunction, arg lua.LValue) (lua.LValue, error) {
	L := vm.L
	L.Push(fn)
	L.Push(arg)
	vm.calls++
	vm.armSeq.Add(1) // a new call for the watchdog's memory view (callmem.go)
	err := L.PCall(1, 1, nil)
	if vm.dirty {
		vm.cleanGlobals() // each call starts from base, as each row does on LuaJIT
	}
	if err != nil {
		return lua.LNil, vm.callError(vm.funcName(fn), err)
	}
	v := L.Get(-1)
	L.Pop(1)
	return v, nil
}

// funcName finds the name fn was loaded under, for error messages (error
// path only).
func (vm *VM) funcName(fn *lua.LFunction) string {
	for name, f := range vm.funcs {
		if f == fn {
			return name
		}
	}
	if fn.Proto != nil {
		return fmt.Sprintf("<function at line %d>", fn.Proto.LineDefined)
	}
	return "<go function>"
}

// callError turns a PCall error into a *CallError, and decides whether the VM
// can be reused: a plain runtime error leaves it sound (the stack was
// unwound); a timeout, a memory stop, a stack overflow or a Go panic marks it
// broken so it is closed instead.
func (vm *VM) callError(fnName string, err error) error {
	vm.errs++
	script := vm.pool.script.cfg.sourceName(vm.pool.script.name)
	ce := &CallError{Script: script, Func: fnName, Msg: err.Error()}
	var api *lua.ApiError
	if errors.As(err, &api) {
		if api.Object != nil {
			ce.Msg = api.Object.String()
		}
		ce.Traceback = api.StackTrace
		if api.Type != lua.ApiErrorRun {
			vm.broken = true
		}
	}
	ce.Line, ce.Msg = splitWhere(script, ce.Msg)
	if ce.Line == 0 {
		ce.Line = tracebackLine(script, ce.Traceback)
	}
	if vm.ctx != nil && vm.deadline.Load() == deadlineFired {
		vm.broken = true
		<-vm.ctx.done // the CAS winner closes it right after; then err is set
		ce.Err = vm.ctx.err
		if ce.Err == nil {
			ce.Err = ErrTimeout
		}
		ce.Msg = ce.Err.Error()
	}
	if ce.Err == nil && strings.Contains(ce.Msg, stringLimitMsg) {
		ce.Err = ErrStringLimit
	}
	if strings.Contains(ce.Msg, "stack overflow") || strings.Contains(ce.Msg, "registry overflow") {
		vm.broken = true
	}
	return ce
}

// tracebackLine finds the first "<script>:<line>:" in a traceback.
func tracebackLine(script, tb string) int {
	for _, ln := range strings.Split(tb, "\n") {
		ln = strings.TrimSpace(ln)
		if line, _ := splitWhere(script, ln); line > 0 {
			return line
		}
	}
	return 0
}

// arm starts the time limit of a call: the watchdog stops the VM once now()
// passes deadline. deadline <= 0 means no limit.
func (vm *VM) arm(deadline int64) {
	if vm.ctx == nil || deadline <= 0 {
		return
	}
	if vm.pool.script.mgr.opts.HeapLimit > 0 {
		vm.started.Store(vm.pool.script.mgr.clock.Load())
	}
	vm.armSeq.Add(1)
	vm.deadline.Store(deadline)
}

// disarm ends the time limit; it reports whether the watchdog fired. If it
// did, the VM is broken (its context must be rearmed and its state may be
// mid-instruction), and the caller's error is a timeout.
func (vm *VM) disarm() (fired bool) {
	if vm.ctx == nil {
		return false
	}
	d := vm.deadline.Load()
	if d == 0 {
		return false
	}
	if d != deadlineFired && vm.deadline.CompareAndSwap(d, 0) {
		return false
	}
	vm.broken = true
	return true
}

// deadlineAfter is the deadline of a call started now with limit d (<= 0: none).
func deadlineAfter(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return now() + int64(d)
}

func (vm *VM) close() {
	concatLimits.Delete(vm.L)
	vm.L.Close()
}

// stringLimitMsg marks the Lua errors of limitStrings, for callError.
const stringLimitMsg = "over the string size limit"

// limitStrings wraps the library functions that build a string of a size
// the script chooses (string.rep; table.concat, whose parts may be one big
// string many times) with a check of that size against
// Options.MaxStringSize, made before the string is built: a Go builtin call
// is not interruptible, so the watchdog cannot stop it once started.
// string.gsub is replaced by a linear, interruptible one that checks the
// size as it builds (gsub.go). Concatenation with .. is an instruction of
// the interpreter: its size is checked against the same limit before it
// joins its operands by a wrapper of the instruction (concat.go).
func (vm *VM) limitStrings(g *lua.LTable) {
	L := vm.L
	limit := vm.pool.script.mgr.opts.MaxStringSize
	if limit <= 0 {
		limit = math.MaxInt64
	}
	if mem := vm.pool.script.cfg.memoryLimit(); mem > 0 && mem < limit {
		limit = mem // one string may not take more than the call's whole limit
	}
	if str, ok := g.RawGetString("string").(*lua.LTable); ok {
		// Linear and interruptible, with or without a size limit.
		str.RawSetString("gsub", L.NewFunction(vm.gsub(limit)))
		// Patterns a timeout can stop (strmatch.go).
		vm.installPatterns(str)
	}
	if limit == math.MaxInt64 {
		return
	}
	concatLimits.Store(L, limit) // .. (concat.go)
	tooLong := func(L *lua.LState, fn string, size float64) {
		L.RaiseError("%s: a string of %.0f bytes is %s of %d bytes (the script's memory limit or luavm.Options.MaxStringSize)", fn, size, stringLimitMsg, limit)
	}
	if str, ok := g.RawGetString("string").(*lua.LTable); ok {
		if rep, ok := str.RawGetString("rep").(*lua.LFunction); ok && rep.IsG {
			str.RawSetString("rep", L.NewFunction(func(L *lua.LState) int {
				s := L.CheckString(1)
				n := L.CheckNumber(2)
				if size := float64(len(s)) * float64(n); size > float64(limit) {
					tooLong(L, "string.rep", size)
				}
				return rep.GFunction(L)
			}))
		}
	}
	if str, ok := g.RawGetString("string").(*lua.LTable); ok {
		if format, ok := str.RawGetString("format").(*lua.LFunction); ok && format.IsG {
			str.RawSetString("format", L.NewFunction(func(L *lua.LState) int {
				if size := formatSize(L); size > float64(limit) {
					tooLong(L, "string.format", size)
				}
				return format.GFunction(L)
			}))
		}
	}
	if tab, ok := g.RawGetString("table").(*lua.LTable); ok {
		if concat, ok := tab.RawGetString("concat").(*lua.LFunction); ok && concat.IsG {
			tab.RawSetString("concat", L.NewFunction(func(L *lua.LState) int {
				t := L.CheckTable(1)
				sep := len(L.OptString(2, ""))
				n := t.Len()
				i, j := max(L.OptInt(3, 1), 1), min(L.OptInt(4, n), n)
				size := 0.0
				for k := i; k <= j; k++ {
					if s, ok := t.RawGetInt(k).(lua.LString); ok {
						size += float64(len(s))
					}
					if k < j {
						size += float64(sep)
					}
					if size > float64(limit) {
						tooLong(L, "table.concat", size)
					}
				}
				return concat.GFunction(L)
			}))
		}
	}
}

// blockedGlobals maps each global the sandbox leaves out to the Allow entry
// that brings it in.
var blockedGlobals = map[string]string{
	"io": "io", "os": "os", "debug": "debug", "coroutine": "coroutine", "channel": "channel",
	"load": "load", "loadstring": "load", "loadfile": "load", "dofile": "load",
	"package": "require",
}

// explainBlocked gives the globals table an __index that, for a name the
// sandbox leaves out, raises "os is not available in the sandbox; allow it
// with ..." where gopher-lua would say "attempt to index a non-table
// object(nil)" at the use of the nil. Other missing globals stay nil, and
// names the script defines itself are found before __index is consulted.
func (vm *VM) explainBlocked(g *lua.LTable, allow map[string]bool) {
	L := vm.L
	cfg := vm.pool.script.cfg
	hint := cfg.AllowHint
	if hint == "" {
		hint = `ScriptConfig.Allow ("%s")`
	}
	blocked := make(map[string]string, len(blockedGlobals))
	for name, lib := range blockedGlobals {
		if !allow[lib] {
			blocked[name] = lib
		}
	}
	if len(blocked) == 0 {
		return
	}
	meta := L.NewTable()
	meta.RawSetString("__metatable", lua.LFalse)
	meta.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		if name, ok := L.Get(2).(lua.LString); ok {
			if lib, ok := blocked[string(name)]; ok {
				what := "the library " + string(name)
				if lib != string(name) {
					what = "the function " + string(name)
				}
				L.RaiseError("%s is not available in the sandbox; allow it with %s", what, fmt.Sprintf(hint, lib))
			}
		}
		L.Push(lua.LNil)
		return 1
	}))
	g.Metatable = meta
}

// formatSize is an upper bound of what string.format will build from the
// arguments on L's stack: the format, and per directive the larger of its
// width and precision (Go's fmt takes up to 10^6) and of its argument's
// text (twice for %q, which escapes), plus room for a number.
func formatSize(L *lua.LState) float64 {
	f := L.CheckString(1)
	size := float64(len(f))
	arg := 2
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		num, widest := 0.0, 0.0
		for ; i < len(f) && strings.IndexByte("-+ #0123456789.", f[i]) >= 0; i++ {
			if c := f[i]; c >= '0' && c <= '9' {
				num = num*10 + float64(c-'0')
			} else {
				num = 0
			}
			widest = max(widest, num)
		}
		text := 0.0
		if arg <= L.GetTop() {
			if s, ok := L.Get(arg).(lua.LString); ok {
				text = float64(len(s))
				if i < len(f) && f[i] == 'q' {
					text = 2*text + 2
				}
			}
		}
		arg++
		size += max(widest, text) + 64
	}
	return size
}
