package luavm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Defaults applied by NewManager and Load to zero fields.
const (
	DefaultTimeout          = 5 * time.Second
	DefaultCallStackSize    = 200
	DefaultRegistrySize     = 256
	DefaultRegistryMaxSize  = 256 * 1024
	DefaultNonCoreIdle      = time.Second
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultWatchdogInterval = 10 * time.Millisecond
	DefaultIdleCheck        = time.Second
	DefaultHardMaxVMs       = 1024
)

// Options configure a Manager. The zero value gives the defaults above.
type Options struct {
	// WatchdogInterval is how often the watchdog looks for calls past their
	// deadline: the granularity of timeouts. 0 = 10ms.
	WatchdogInterval time.Duration
	// IdleCheck is how often idle VMs are looked for. 0 = 1s.
	IdleCheck time.Duration
	// HardMaxVMs bounds the VMs of one script whatever its strategy
	// ("unlimited" included), so that no configuration can grow without
	// end. 0 = 1024.
	HardMaxVMs int
	// HeapLimit is a process-wide memory budget for scripts: each watchdog
	// tick reads the live Go heap, and when it is over the budget the calls
	// that have been running for more than a tick are stopped with
	// ErrMemoryLimit (gopher-lua cannot account memory per VM), and the
	// watchdog then runs a garbage collection so that the stopped call's
	// garbage is not held against the next ones. 0 = DefaultHeapLimit()
	// (from GOMEMLIMIT or the machine's memory); NoHeapLimit = none.
	HeapLimit uint64
	// MaxStringSize bounds the string one call of string.rep,
	// string.format, string.gsub or table.concat may build, checked before
	// (gsub: while) it is built: one Go builtin call cannot be interrupted,
	// so string.rep("x", 1e10) would otherwise allocate 10 GB before any
	// limit is looked at. 0 =
	// DefaultStringSize(HeapLimit) (a quarter of the heap budget, at most
	// 512 MiB); < 0 = none.
	MaxStringSize int64
	// StuckAfter is how long a call told to stop may go on before Stuck
	// reports it. 0 = DefaultStuckAfter.
	StuckAfter time.Duration
}

// ScriptConfig configures one script. The zero value is sandboxed, with the
// default pool strategy and the default timeout.
type ScriptConfig struct {
	Pool PoolConfig
	// Timeout bounds a call when the caller gives no deadline.
	// 0 = DefaultTimeout, < 0 = no time limit (the VM then runs without any
	// context check in its interpreter loop, and cannot be interrupted).
	Timeout time.Duration
	// LoadTimeout bounds the script's top level (its main chunk), which
	// runs when Load creates the first VM and again for every VM the pool
	// creates later. 0 = Timeout when that is > 0, else DefaultTimeout;
	// < 0 = no limit. A script whose top level runs past it fails to load
	// with a *CallError wrapping ErrTimeout, and the previous version keeps
	// running.
	LoadTimeout time.Duration
	// Allow opens libraries beyond the sandbox (base, string, table, math,
	// and require of Go modules): "io", "os", "debug", "coroutine",
	// "channel", "load" (load, loadstring, loadfile, dofile) and "require"
	// (the package library: require of Lua files).
	Allow []string
	// AllowHint tells users how to allow a library the sandbox leaves out,
	// in the error a script gets when it uses one: a format with one %s,
	// the Allow entry (e.g. `allow: [%s] in the column's config`). Empty =
	// `ScriptConfig.Allow ("%s")`.
	AllowHint string
	// CallStackSize bounds the call depth (0 = 200); RegistrySize is the
	// initial value stack and RegistryMaxSize its bound (0 = 256 and
	// 262144). Endless recursion hits one of them and fails the call.
	CallStackSize   int
	RegistrySize    int
	RegistryMaxSize int
	// MemoryLimit bounds what one call may allocate, in bytes: the strings
	// string.rep, string.format, string.gsub and table.concat build are
	// checked against it before (gsub: while) they are built, and the
	// watchdog stops a call (ErrMemoryLimit) once the process's live heap
	// has grown by more than it since the call started, confirmed after a
	// collection (gopher-lua cannot count a VM's own allocations; calls
	// running at the same time share the growth). 0 = DefaultMemoryLimit
	// (256 MiB), < 0 = none.
	MemoryLimit int64
	// ShareGlobals turns off the isolation of globals between calls (see
	// docs/pool.md): globals a call writes are then seen by later calls on
	// the same VM. Only for measuring what isolation costs.
	ShareGlobals bool
	// Host is what the script's log and stats modules and sluice.config
	// reach (host.go); nil: lines and series go nowhere.
	Host *Host
	// SourceName is what compile errors, runtime errors and tracebacks call
	// the script (a file path, a URL, a column name); empty = the name it
	// was loaded under. It lets a caller load many versions under unique
	// names while users read where their code is.
	SourceName string
}

func (c ScriptConfig) sourceName(name string) string {
	if c.SourceName != "" {
		return c.SourceName
	}
	return name
}

func (c ScriptConfig) normalized() ScriptConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.LoadTimeout == 0 {
		c.LoadTimeout = c.Timeout
		if c.LoadTimeout < 0 {
			c.LoadTimeout = DefaultTimeout
		}
	}
	if c.CallStackSize <= 0 {
		c.CallStackSize = DefaultCallStackSize
	}
	if c.RegistrySize <= 0 {
		c.RegistrySize = DefaultRegistrySize
	}
	if c.RegistryMaxSize <= 0 {
		c.RegistryMaxSize = DefaultRegistryMaxSize
	}
	if c.RegistryMaxSize < c.RegistrySize {
		c.RegistryMaxSize = c.RegistrySize
	}
	p := &c.Pool
	if p.Strategy == StrategyDefault {
		p.Strategy = StrategyCore
		p.Core = defaultCore()
		p.MaxNonCore = defaultNonCore()
	}
	if p.Strategy == StrategyCore && p.Core <= 0 {
		p.Core = defaultCore()
	}
	if p.NonCoreIdle <= 0 {
		p.NonCoreIdle = DefaultNonCoreIdle
	}
	if p.IdleTimeout == 0 {
		p.IdleTimeout = DefaultIdleTimeout
	}
	c.Allow = append([]string(nil), c.Allow...)
	sort.Strings(c.Allow)
	return c
}

func (c ScriptConfig) validate(name string) error {
	var problems []string
	switch c.Pool.Strategy {
	case StrategyNone, StrategyVariable, StrategyCore, StrategyDefault:
	default:
		problems = append(problems, fmt.Sprintf("unknown pool strategy %q", c.Pool.Strategy))
	}
	if c.Pool.MaxNonCore < Unlimited {
		problems = append(problems, fmt.Sprintf("MaxNonCore %d (want >= 0 or Unlimited)", c.Pool.MaxNonCore))
	}
	for _, a := range c.Allow {
		if !knownLibs[a] {
			problems = append(problems, fmt.Sprintf("unknown library %q in Allow", a))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("luavm: script %s: config: %s", name, strings.Join(problems, "; "))
	}
	return nil
}

// Manager owns compiled scripts and one VM pool per script version, the
// registered Go functions, and one watchdog goroutine (timeouts, idle
// release, heap limit). Safe for concurrent use.
type Manager struct {
	opts Options

	// scripts maps names to the current version; replaced whole (copy on
	// write, under mu) so the hot path reads it with one atomic load.
	scripts atomic.Pointer[map[string]*script]

	mu sync.Mutex
	// pools holds every pool that may still have VMs: current ones and
	// retired ones until their last VM is closed. REQUIRES mu.
	pools map[*pool]struct{}
	// stats per script name, kept across versions. REQUIRES mu.
	stats map[string]*counters
	// funcs and modules registered for scripts. REQUIRES mu; read through
	// globalFuncs / module.
	funcs   map[string]lua.LGFunction
	modules map[string]map[string]lua.LGFunction
	closed  bool // REQUIRES mu
	// isClosed mirrors closed for lock-free readers.
	shut atomic.Bool

	// clock is a coarse monotonic clock (ns) the watchdog advances every
	// tick, so releasing a VM does not read the time.
	clock atomic.Int64

	// stuck: the calls told to stop that still run (stuck.go).
	stuck stuckCalls

	stop chan struct{} // closed by Close
	done chan struct{} // closed when the watchdog goroutine has exited
}

// script is one compiled version of a named script.
type script struct {
	mgr   *Manager
	name  string
	hash  [sha256.Size]byte
	cfg   ScriptConfig
	proto *lua.FunctionProto
	pool  *pool
	stats *counters
}

// counters of one script name, across its versions.
type counters struct {
	timeouts, exhausted       atomic.Uint64
	waits, waitNanos          atomic.Uint64
	created, closed           atomic.Uint64
	closedCalls, closedErrors atomic.Uint64
	locks                     atomic.Uint64 // callers' trips through a pool's lock
}

// NewManager starts a Manager and its watchdog goroutine; Close stops them.
func NewManager(opts Options) *Manager {
	if opts.WatchdogInterval <= 0 {
		opts.WatchdogInterval = DefaultWatchdogInterval
	}
	if opts.IdleCheck <= 0 {
		opts.IdleCheck = DefaultIdleCheck
	}
	if opts.HardMaxVMs <= 0 {
		opts.HardMaxVMs = DefaultHardMaxVMs
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	switch opts.HeapLimit {
	case 0:
		opts.HeapLimit = DefaultHeapLimit()
	case NoHeapLimit:
		opts.HeapLimit = 0
	}
	switch {
	case opts.MaxStringSize == 0:
		opts.MaxStringSize = DefaultStringSize(opts.HeapLimit)
	case opts.MaxStringSize < 0:
		opts.MaxStringSize = math.MaxInt64
	}
	m := &Manager{
		opts:    opts,
		pools:   make(map[*pool]struct{}),
		stats:   make(map[string]*counters),
		funcs:   make(map[string]lua.LGFunction),
		modules: make(map[string]map[string]lua.LGFunction),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	empty := map[string]*script{}
	m.scripts.Store(&empty)
	m.clock.Store(now())
	go m.watchdog()
	return m
}

// Close closes every idle VM and stops the watchdog. Calls in flight finish;
// their VMs are closed when they return. Later calls get ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.shut.Store(true)
	empty := map[string]*script{}
	m.scripts.Store(&empty)
	pools := make([]*pool, 0, len(m.pools))
	for p := range m.pools {
		pools = append(pools, p)
	}
	m.mu.Unlock()
	for _, p := range pools {
		p.retire()
	}
	close(m.stop)
	<-m.done
	return nil
}

// Register makes fn callable from every script as the global name. A panic in
// fn becomes a Lua error naming the function and the script line. Register
// before Load: VMs created later see it.
func (m *Manager) Register(name string, fn lua.LGFunction) {
	m.mu.Lock()
	m.funcs[name] = guardPanics(name, fn)
	m.mu.Unlock()
}

// RegisterModule makes require(name) return a table of funcs in every
// script.
func (m *Manager) RegisterModule(name string, funcs map[string]lua.LGFunction) {
	guarded := make(map[string]lua.LGFunction, len(funcs))
	for k, fn := range funcs {
		guarded[k] = guardPanics(name+"."+k, fn)
	}
	m.mu.Lock()
	m.modules[name] = guarded
	m.mu.Unlock()
}

func guardPanics(name string, fn lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) (n int) {
		defer func() {
			if r := recover(); r != nil {
				if _, isLua := r.(*lua.ApiError); isLua {
					panic(r) // a Lua error raised by fn: let it through
				}
				L.RaiseError("go function %s panicked: %v", name, r)
			}
		}()
		return fn(L)
	}
}

func (m *Manager) globalFuncs() map[string]lua.LGFunction {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]lua.LGFunction, len(m.funcs))
	for k, v := range m.funcs {
		out[k] = v
	}
	return out
}

func (m *Manager) module(name string) (map[string]lua.LGFunction, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.modules[name]
	return f, ok
}

// Load compiles source under name and makes it the script's current version.
// The same name with the same source and config is a no-op. A new source is
// swapped in atomically: calls in flight finish on the old code, new calls get
// the new code, and the old VMs are closed as they come back. A syntax error
// is a *CompileError; an error running the main chunk is a *CallError (one
// running past ScriptConfig.LoadTimeout wraps ErrTimeout); either way the
// previous version keeps running.
func (m *Manager) Load(name, source string, cfg ScriptConfig) error {
	return m.LoadContext(context.Background(), name, source, cfg)
}

// LoadContext is Load whose main chunk also stops when ctx is done (the
// error then wraps ctx's error, or ErrTimeout for its deadline): a server
// shutting down does not wait for a script's top level.
func (m *Manager) LoadContext(ctx context.Context, name, source string, cfg ScriptConfig) error {
	if err := cfg.validate(name); err != nil {
		return err
	}
	cfg = cfg.normalized()
	hash := sha256.Sum256([]byte(source))
	if old := m.lookup(name); old != nil && old.hash == hash && reflect.DeepEqual(old.cfg, cfg) {
		return nil
	}
	proto, err := compile(cfg.sourceName(name), source)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	st := m.stats[name]
	if st == nil {
		st = &counters{}
		m.stats[name] = st
	}
	m.mu.Unlock()
	s := &script{mgr: m, name: name, hash: hash, cfg: cfg, proto: proto, stats: st}
	s.pool = newPool(s)
	// The watchdog must know the pool before its first VM runs the main
	// chunk: the load timeout is enforced by the watchdog like a call's, and
	// a pool it does not scan lets a top-level endless loop hang Load.
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.pools[s.pool] = struct{}{}
	m.mu.Unlock()
	// One VM now: it runs the main chunk, so a runtime error at the top
	// level fails Load (keeping the old version) instead of every call.
	s.pool.mu.Lock()
	s.pool.total++
	s.pool.mu.Unlock()
	vm, err := s.pool.create(ctx)
	if err != nil {
		s.pool.retire()
		m.mu.Lock()
		delete(m.pools, s.pool)
		m.mu.Unlock()
		return err
	}
	if cfg.Pool.Strategy == StrategyNone {
		s.pool.release(vm)
	} else {
		s.pool.mu.Lock()
		vm.lastUsed = m.clock.Load()
		s.pool.free = append(s.pool.free, vm)
		s.pool.mu.Unlock()
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		s.pool.retire()
		return ErrClosed
	}
	cur := *m.scripts.Load()
	next := make(map[string]*script, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	old := cur[name]
	next[name] = s
	m.scripts.Store(&next)
	m.mu.Unlock()
	if old != nil {
		old.pool.retire()
	}
	return nil
}

// LoadFile loads the file at path under the name path.
func (m *Manager) LoadFile(path string, cfg ScriptConfig) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("luavm: load %s: %w", path, err)
	}
	return m.Load(path, string(src), cfg)
}

// Unload removes a script: later calls get ErrNoScript; calls in flight
// finish and their VMs are then closed.
func (m *Manager) Unload(name string) error {
	m.mu.Lock()
	cur := *m.scripts.Load()
	old, ok := cur[name]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("luavm: unload %s: %w", name, ErrNoScript)
	}
	next := make(map[string]*script, len(cur))
	for k, v := range cur {
		if k != name {
			next[k] = v
		}
	}
	m.scripts.Store(&next)
	m.mu.Unlock()
	old.pool.retire()
	return nil
}

func compile(name, source string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(source), name)
	if err != nil {
		ce := &CompileError{Script: name, Msg: err.Error()}
		var pe *parse.Error
		if errors.As(err, &pe) {
			ce.Line = pe.Pos.Line
			ce.Msg = pe.Message
			if pe.Token != "" {
				ce.Msg += fmt.Sprintf(" near '%s'", pe.Token)
			}
		}
		return nil, ce
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		ce := &CompileError{Script: name, Msg: err.Error()}
		var le *lua.CompileError
		if errors.As(err, &le) {
			ce.Line = le.Line
			ce.Msg = le.Message
		}
		return nil, ce
	}
	return proto, nil
}

func (m *Manager) lookup(name string) *script {
	return (*m.scripts.Load())[name]
}

// acquire finds the script's current version and takes a VM from its pool,
// looking again if the version is swapped while waiting. timeout is the
// script's, used when ctxDeadline is 0.
func (m *Manager) acquire(name string, ctxDeadline int64, timeout time.Duration) (*VM, int64, error) {
	for {
		s := m.lookup(name)
		if s == nil {
			if m.isClosed() {
				return nil, 0, ErrClosed
			}
			return nil, 0, fmt.Errorf("luavm: script %s: %w", name, ErrNoScript)
		}
		deadline := ctxDeadline
		if deadline == 0 {
			if timeout == 0 {
				timeout = s.cfg.Timeout
			}
			deadline = m.deadlineAfter(timeout)
		}
		vm, err := s.pool.acquire(deadline)
		if err == errRetired {
			continue
		}
		return vm, deadline, err
	}
}

func (m *Manager) isClosed() bool { return m.shut.Load() }

// deadlineAfter is the deadline of a call that may last d (<= 0: none). It
// reads the watchdog's coarse clock rather than the time: the watchdog only
// looks every tick anyway, so a deadline is honoured within one or two
// ticks, and the hot path reads no clock.
func (m *Manager) deadlineAfter(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return m.clock.Load() + int64(m.opts.WatchdogInterval) + int64(d)
}

// ctxDeadline is ctx's deadline in monotonic ns, 0 if it has none.
func ctxDeadline(ctx context.Context) int64 {
	if d, ok := ctx.Deadline(); ok {
		return max(now()+int64(time.Until(d)), 1)
	}
	return 0
}

// Do acquires one VM of the script and runs f with it: the hot path for
// many calls per acquisition. The VM is valid only inside f. The whole of f
// is bounded by ctx (or the script's timeout). Each call (Call, Call1)
// starts from the globals the script defined when loaded, as every Invoke
// does. After f the VM is cleaned (stack, globals) or, if a call failed
// badly or the deadline passed,
// closed; it is never handed dirty to the next caller.
func (m *Manager) Do(ctx context.Context, script string, f func(vm *VM) error) (err error) {
	vm, deadline, err := m.acquire(script, ctxDeadline(ctx), 0)
	if err != nil {
		return err
	}
	var stop func() bool
	if ctx.Done() != nil {
		if deadline == 0 {
			deadline = math.MaxInt64
		}
		stop = context.AfterFunc(ctx, func() { vm.interrupt(ctxCause(ctx)) })
	}
	vm.arm(deadline)
	returned := false
	defer func() {
		fired := vm.disarm()
		if stop != nil && !stop() {
			// ctx was cancelled: its func ran or is running and could still
			// interrupt this VM, so it must not serve another call.
			vm.broken = true
		}
		if !returned {
			vm.broken = true // f panicked: the VM may be mid-call
		}
		if fired || errors.Is(err, ErrTimeout) {
			vm.pool.script.stats.timeouts.Add(1)
		}
		// If the deadline passed after f's last call finished, f's results
		// stand; the VM (its context fired) is closed on release.
		vm.pool.release(vm)
	}()
	err = f(vm)
	returned = true
	return err
}

func ctxCause(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return ctx.Err()
}

// interrupt stops the running call with cause, if one is armed.
func (vm *VM) interrupt(cause error) {
	for {
		d := vm.deadline.Load()
		if d == 0 || d == deadlineFired {
			return
		}
		if vm.deadline.CompareAndSwap(d, deadlineFired) {
			vm.ctx.fire(cause)
			return
		}
	}
}

// Invoke calls the global function fn of script with args converted by
// ToLua and returns nret results converted by FromLua (nret = lua.MultRet for
// all of them). Bounded by ctx, or by the script's timeout if ctx has no
// deadline.
func (m *Manager) Invoke(ctx context.Context, script, fn string, nret int, args ...any) ([]any, error) {
	var out []any
	err := m.Do(ctx, script, func(vm *VM) error {
		var err error
		out, err = vm.invoke(fn, nret, args)
		return err
	})
	return out, err
}

// InvokeScriptFunc is Invoke with a timeout instead of a context, the shape
// of the published report: InvokeScriptFunc("test.lua", "helloLua",
// 30*time.Second, 2, 1).
func (m *Manager) InvokeScriptFunc(script, fn string, timeout time.Duration, nret int, args ...any) ([]any, error) {
	if timeout <= 0 {
		timeout = -1 // no limit
	}
	vm, deadline, err := m.acquire(script, 0, timeout)
	if err != nil {
		return nil, err
	}
	vm.arm(deadline)
	out, err := vm.invoke(fn, nret, args)
	if vm.disarm() || errors.Is(err, ErrTimeout) {
		vm.pool.script.stats.timeouts.Add(1)
	}
	vm.pool.release(vm)
	return out, err
}

func (vm *VM) invoke(name string, nret int, args []any) ([]any, error) {
	fn, err := vm.Func(name)
	if err != nil {
		return nil, err
	}
	L := vm.L
	base := L.GetTop()
	L.Push(fn)
	for _, a := range args {
		L.Push(ToLua(L, a))
	}
	vm.calls++
	vm.armSeq.Add(1)
	if err := L.PCall(len(args), nret, nil); err != nil {
		L.SetTop(base)
		return nil, vm.callError(name, err)
	}
	n := L.GetTop() - base
	out := make([]any, n)
	for i := range out {
		out[i] = FromLua(L.Get(base + 1 + i))
	}
	L.SetTop(base)
	return out, nil
}

// ScriptStats are the counters of one script, across its versions: what the
// server exports in Prometheus format.
type ScriptStats struct {
	Script                  string
	Calls, Errors, Timeouts uint64
	VMsCore, VMsNonCore     int // alive now: resident and beyond Core
	VMsIdle                 int // of those, idle in the pool
	VMsCreated, VMsClosed   uint64
	Waits                   uint64        // acquisitions that had to wait
	WaitTime                time.Duration // total time spent waiting
	Exhausted               uint64        // waits that ended in ErrPoolExhausted
	// PoolLocks counts the acquisitions and releases that took the pool's
	// lock: the others used the VM kept for the caller's P. A few per
	// thousand calls at most once the pool is warm, even at its bound;
	// more means the pool is contended (BenchmarkPoolContended reports it
	// per call).
	PoolLocks uint64
}

// Stats returns the counters of every loaded script, sorted by name.
func (m *Manager) Stats() []ScriptStats {
	scripts := *m.scripts.Load()
	out := make([]ScriptStats, 0, len(scripts))
	for name, s := range scripts {
		st := s.stats
		alive, idle, calls, errs := s.pool.counts()
		core := min(alive, s.pool.core)
		out = append(out, ScriptStats{
			Script:     name,
			Calls:      calls + st.closedCalls.Load(),
			Errors:     errs + st.closedErrors.Load(),
			Timeouts:   st.timeouts.Load(),
			VMsCore:    core,
			VMsNonCore: alive - core,
			VMsIdle:    idle,
			VMsCreated: st.created.Load(),
			VMsClosed:  st.closed.Load(),
			Waits:      st.waits.Load(),
			WaitTime:   time.Duration(st.waitNanos.Load()),
			Exhausted:  st.exhausted.Load(),
			PoolLocks:  st.locks.Load(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Script < out[j].Script })
	return out
}

// stallWatchdog, when set (tests), runs on every tick right after the clock
// is stored: a test holds the watchdog there as a starved process would.
var stallWatchdog atomic.Pointer[func()]

// watchdog is the Manager's one goroutine. Every tick it advances the coarse
// clock and stops calls past their deadline (and, with a HeapLimit, calls
// running while the heap is over it); every IdleCheck it closes idle VMs.
func (m *Manager) watchdog() {
	defer close(m.done)
	tick := time.NewTicker(m.opts.WatchdogInterval)
	defer tick.Stop()
	nextReap := now() + int64(m.opts.IdleCheck)
	var pools []*pool
	var vms []*VM
	var fired []firedVM
	var calls callHeap
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		t := now()
		// A tick that comes late (the process starved of CPU, a long
		// pause) leaves the coarse clock stale for the whole gap: a call
		// armed in it got its deadline from the stale clock, and no call
		// was watched. What the gap has beyond two ticks is not charged
		// to the calls: their deadlines move by it. Without this a call
		// armed near the end of a 200 ms stall was stopped as soon as the
		// watchdog woke (and compute, which ends a run of rows when the
		// clock moves, ran rows past their time limit while it did not:
		// TestWatchdogStallNotCharged).
		late := t - m.clock.Swap(t) - 2*int64(m.opts.WatchdogInterval)
		if stall := stallWatchdog.Load(); stall != nil {
			(*stall)()
		}
		pools = pools[:0]
		m.mu.Lock()
		for p := range m.pools {
			pools = append(pools, p)
		}
		m.mu.Unlock()
		var heapNow uint64
		heap := func() uint64 {
			if heapNow == 0 {
				heapNow = liveHeap()
			}
			return heapNow
		}
		overHeap := m.opts.HeapLimit > 0 && heap() > m.opts.HeapLimit
		stopped := false
		fired = fired[:0]
		calls.begin()
		for _, p := range pools {
			// A VM kept in a slot while callers wait may have been the
			// last release for a while: hand it over (pool.serveWaiters).
			p.serveWaiters()
			// Scan a copy of the pool's VMs: holding a lock over hundreds
			// of them would hold up the callers' slow paths.
			vms = p.snapshot(vms[:0])
			for _, vm := range vms {
				d := vm.deadline.Load()
				if late > 0 && d > 0 && d < math.MaxInt64-late {
					if !vm.deadline.CompareAndSwap(d, d+late) {
						continue // the call ended or was stopped meanwhile
					}
					d += late
				}
				switch {
				case d == deadlineFired:
					fired = append(fired, firedVM{vm, p.script})
				case d <= 0:
				case t > d:
					if vm.deadline.CompareAndSwap(d, deadlineFired) {
						vm.ctx.fire(ErrTimeout)
					}
				case overHeap && t-vm.started.Load() > int64(m.opts.WatchdogInterval):
					if vm.deadline.CompareAndSwap(d, deadlineFired) {
						vm.ctx.fire(ErrMemoryLimit)
						stopped = true
					}
				default:
					calls.see(vm, d, t, p.script.cfg.memoryLimit(), heap)
				}
			}
			clear(vms)
		}
		m.stuck.update(t, fired)
		clear(fired)
		calls.end(t)
		if stopped {
			// The stopped call's garbage still counts as heap until the
			// next collection, which with GOGC may be far off: without
			// one now, every later long call would be stopped too.
			runtime.GC()
		}
		if t >= nextReap {
			nextReap = t + int64(m.opts.IdleCheck)
			for _, p := range pools {
				if p.reap(t) {
					m.mu.Lock()
					delete(m.pools, p)
					m.mu.Unlock()
				}
			}
		}
	}
}
