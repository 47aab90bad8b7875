package luavm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Strategy is how a script's pool keeps VMs. See PoolConfig and docs/pool.md.
type Strategy string

const (
	// StrategyDefault is StrategyCore with Core = GOMAXPROCS and
	// MaxNonCore = 128 x GOMAXPROCS (see defaultNonCore): on CPU-bound
	// scripts only GOMAXPROCS VMs run at once, so the core is that; the
	// non-core VMs absorb callers whose VM holder was preempted mid-call,
	// so they rarely wait, and are closed when idle.
	StrategyDefault Strategy = ""
	// StrategyNone creates a VM for every call and closes it after (the
	// baseline).
	StrategyNone Strategy = "none"
	// StrategyVariable grows without a bound (but Options.HardMaxVMs) and
	// keeps every VM for reuse until the pool is idle for IdleTimeout; unlike
	// sync.Pool it does not drop its VMs at each GC.
	StrategyVariable Strategy = "variable"
	// StrategyCore keeps Core VMs resident and allows MaxNonCore more under
	// load (Unlimited: up to Options.HardMaxVMs); a non-core VM idle for
	// NonCoreIdle is closed. When all are busy callers wait, bounded by their
	// deadline, and get ErrPoolExhausted if none comes back in time.
	StrategyCore Strategy = "core"
)

// Unlimited as MaxNonCore: no bound but Options.HardMaxVMs.
const Unlimited = -1

// PoolConfig chooses a script's pool strategy. The zero value is the default.
type PoolConfig struct {
	Strategy Strategy
	// Core is the number of resident VMs (StrategyCore). 0 = GOMAXPROCS.
	Core int
	// MaxNonCore bounds the VMs created beyond Core (StrategyCore):
	// 0 = none (callers wait), Unlimited = up to Options.HardMaxVMs.
	MaxNonCore int
	// NonCoreIdle: a VM beyond Core idle this long is closed. 0 = 1s.
	// Keeping non-core VMs briefly, rather than closing them right after
	// use as the report's pool did, is what stops "few core + unlimited
	// non-core" from degenerating into a new VM per call under load.
	NonCoreIdle time.Duration
	// IdleTimeout: when the script has not been called for this long, every
	// VM of it (core included) is closed; the next call creates one again.
	// 0 = 5 minutes, < 0 = never.
	IdleTimeout time.Duration
}

// ParsePool parses the short strategy names used by `sluice bench pool` and
// configs: "default", "none", "variable", "core<N>+unlimited",
// "core<N>+block", "core<N>+max<M>+block".
func ParsePool(s string) (PoolConfig, error) {
	switch s {
	case "default", "":
		return PoolConfig{}, nil
	case "none":
		return PoolConfig{Strategy: StrategyNone}, nil
	case "variable":
		return PoolConfig{Strategy: StrategyVariable}, nil
	}
	parts := strings.Split(s, "+")
	bad := fmt.Errorf("luavm: pool strategy %q: want default, none, variable, core<N>+unlimited, core<N>+block or core<N>+max<M>+block", s)
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "core") {
		return PoolConfig{}, bad
	}
	core, err := strconv.Atoi(strings.TrimPrefix(parts[0], "core"))
	if err != nil || core < 1 {
		return PoolConfig{}, bad
	}
	cfg := PoolConfig{Strategy: StrategyCore, Core: core}
	switch {
	case len(parts) == 2 && parts[1] == "unlimited":
		cfg.MaxNonCore = Unlimited
	case len(parts) == 2 && parts[1] == "block":
		cfg.MaxNonCore = 0
	case len(parts) == 3 && strings.HasPrefix(parts[1], "max") && parts[2] == "block":
		m, err := strconv.Atoi(strings.TrimPrefix(parts[1], "max"))
		if err != nil || m < 0 {
			return PoolConfig{}, bad
		}
		cfg.MaxNonCore = m
	default:
		return PoolConfig{}, bad
	}
	return cfg, nil
}

// errRetired: the pool was retired (its script swapped or unloaded) while the
// caller waited; the Manager looks the script up again.
var errRetired = errors.New("luavm: pool retired")

// pool holds the VMs of one version of one script.
type pool struct {
	script *script

	strategy    Strategy
	core        int   // VMs kept resident; the rest are non-core
	limit       int   // max VMs alive at once, in use or idle
	nonCoreIdle int64 // ns
	idleTimeout int64 // ns; 0 = never

	mu sync.Mutex
	// free is a LIFO of idle VMs: the top is the warmest, the bottom the
	// longest idle, which the reaper closes first. REQUIRES mu.
	free []*VM
	// total counts VMs alive (idle + in use + being created). REQUIRES mu.
	total int
	// all is every VM alive, for the watchdog and Stats. REQUIRES mu.
	all map[*VM]struct{}
	// waiters counts callers blocked in acquire. Changed under mu; read
	// without it by release's fast path.
	waiters atomic.Int32
	retired bool // no new VMs; returned VMs are closed. REQUIRES mu.
	// retiredFlag mirrors retired for the lock-free paths.
	retiredFlag atomic.Bool

	// local is one slot per P (GOMAXPROCS when the pool was made), as in
	// sync.Pool: a VM released on a P is parked in that P's slot and the
	// next acquire on the same P takes it back with one atomic swap, without
	// the mutex and without touching a cache line another CPU writes (with
	// two CPUs in parallel, one shared free list let VMs wander between the
	// CPUs and callers wait; see docs/pool.md). Slots are skipped whenever
	// callers wait (those only
	// look at free), and waiters look into every slot before they park (the
	// release and the wait store then load in opposite orders, so one of the
	// two always sees the other). nil for StrategyNone. VMs in slots are
	// idle and counted in total.
	local []localSlot
	// woken: a waiter has been signalled and has not looked at the pool
	// yet. While it is set, releases do not signal again: otherwise, with
	// thousands parked, every release would wake one more waiter that
	// finds nothing and parks again (a wake-up storm that costs a park and
	// an unpark per call). As with sync.Mutex, callers that are running
	// take a returned VM before the woken waiter does, which keeps hot
	// VMs on running goroutines. REQUIRES mu.
	woken bool

	// wake carries the one signal to the waiters (capacity 1).
	wake chan struct{}

	lastUse atomic.Int64 // coarse clock of the last release, for IdleTimeout
}

// localSlot is padded to its own cache line.
type localSlot struct {
	vm atomic.Pointer[VM]
	_  [56]byte
}

func newPool(s *script) *pool {
	cfg := s.cfg.Pool
	hard := s.mgr.opts.HardMaxVMs
	p := &pool{script: s, strategy: cfg.Strategy, all: make(map[*VM]struct{}), wake: make(chan struct{}, 1)}
	p.nonCoreIdle = int64(cfg.NonCoreIdle)
	if cfg.IdleTimeout > 0 {
		p.idleTimeout = int64(cfg.IdleTimeout)
	}
	switch cfg.Strategy {
	case StrategyNone:
		p.core, p.limit = 0, hard
	case StrategyVariable:
		p.core, p.limit = hard, hard
	default:
		p.core = cfg.Core
		switch {
		case cfg.MaxNonCore == Unlimited:
			p.limit = hard
		default:
			p.limit = cfg.Core + cfg.MaxNonCore
		}
		if p.limit > hard {
			p.limit = hard
		}
		if p.core > p.limit {
			p.core = p.limit
		}
	}
	if p.strategy != StrategyNone {
		p.local = make([]localSlot, runtime.GOMAXPROCS(0))
	}
	p.lastUse.Store(s.mgr.clock.Load())
	return p
}

// takeLocal takes a VM from any P's slot, starting with the caller's.
func (p *pool) takeLocal() *VM {
	n := len(p.local)
	if n == 0 {
		return nil
	}
	start := procID()
	for i := range n {
		if vm := p.local[(start+i)%n].vm.Swap(nil); vm != nil {
			return vm
		}
	}
	return nil
}

// drainLocal empties every slot into into.
func (p *pool) drainLocal(into []*VM) []*VM {
	for i := range p.local {
		if vm := p.local[i].vm.Swap(nil); vm != nil {
			into = append(into, vm)
		}
	}
	return into
}

// acquire returns an idle VM, creates one if the pool may grow, or waits
// until deadline (monotonic ns; 0 = wait without bound).
func (p *pool) acquire(deadline int64) (*VM, error) {
	if n := len(p.local); n > 0 {
		if vm := p.local[procID()%n].vm.Swap(nil); vm != nil {
			return vm, nil
		}
	}
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		vm := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return vm, nil
	}
	if p.retired {
		p.mu.Unlock()
		return nil, errRetired
	}
	if p.total < p.limit {
		p.total++
		p.mu.Unlock()
		return p.create(nil)
	}
	if vm := p.takeLocal(); vm != nil {
		p.mu.Unlock()
		return vm, nil
	}
	return p.wait(deadline)
}

// wait blocks for a VM. REQUIRES mu held on entry; returns with it released.
func (p *pool) wait(deadline int64) (*VM, error) {
	p.waiters.Add(1)
	p.mu.Unlock()
	// A release may have parked a VM in a slot just before it could see
	// this waiter: look once more before parking.
	if vm := p.takeLocal(); vm != nil {
		p.mu.Lock()
		p.waiters.Add(-1)
		p.mu.Unlock()
		return vm, nil
	}
	st := p.script.stats
	st.waits.Add(1)
	start := now()
	defer func() { st.waitNanos.Add(uint64(now() - start)) }()
	var timeout <-chan time.Time
	if deadline > 0 {
		t := time.NewTimer(time.Duration(deadline - start))
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-p.wake:
		case <-timeout:
			p.mu.Lock()
			p.waiters.Add(-1)
			w := p.needWake() // a signal may have been meant for us
			p.mu.Unlock()
			if w {
				p.signal()
			}
			st.exhausted.Add(1)
			return nil, fmt.Errorf("luavm: script %s: no VM free within the deadline (%d VMs busy): %w", p.script.name, p.limit, ErrPoolExhausted)
		}
		p.mu.Lock()
		p.woken = false
		if n := len(p.free); n > 0 {
			vm := p.free[n-1]
			p.free[n-1] = nil
			p.free = p.free[:n-1]
			p.waiters.Add(-1)
			w := len(p.free) > 0 && p.needWake()
			p.mu.Unlock()
			if w {
				p.signal()
			}
			return vm, nil
		}
		if p.retired {
			p.waiters.Add(-1)
			w := p.needWake() // pass the news on to the next waiter
			p.mu.Unlock()
			if w {
				p.signal()
			}
			return nil, errRetired
		}
		if p.total < p.limit {
			p.total++
			p.waiters.Add(-1)
			p.mu.Unlock()
			return p.create(nil)
		}
		if vm := p.takeLocal(); vm != nil {
			p.waiters.Add(-1)
			p.mu.Unlock()
			return vm, nil
		}
		p.mu.Unlock()
	}
}

// needWake reports whether a waiter must be signalled, and marks it
// signalled. REQUIRES mu.
func (p *pool) needWake() bool {
	if p.waiters.Load() == 0 || p.woken {
		return false
	}
	p.woken = true
	return true
}

func (p *pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// create makes a VM for a slot already counted in total. ctx, if not nil,
// can stop its main chunk (LoadContext).
func (p *pool) create(ctx context.Context) (*VM, error) {
	vm, err := newVM(ctx, p)
	if err != nil {
		p.mu.Lock()
		p.total--
		w := p.needWake()
		p.mu.Unlock()
		if w {
			p.signal()
		}
		return nil, err
	}
	p.script.stats.created.Add(1)
	return vm, nil
}

func (p *pool) register(vm *VM) {
	p.mu.Lock()
	p.all[vm] = struct{}{}
	p.mu.Unlock()
}

func (p *pool) unregister(vm *VM) {
	p.mu.Lock()
	delete(p.all, vm)
	p.mu.Unlock()
}

// release takes a VM back after a call: cleaned and kept, or closed when it
// is broken, the pool is retired or the strategy keeps none.
func (p *pool) release(vm *VM) {
	if !vm.broken {
		vm.reset()
	}
	clock := p.script.mgr.clock.Load()
	if p.lastUse.Load() != clock {
		p.lastUse.Store(clock)
	}
	vm.published.calls.Store(vm.calls)
	vm.published.errs.Store(vm.errs)
	if n := len(p.local); n > 0 && !vm.broken && p.waiters.Load() == 0 && !p.retiredFlag.Load() {
		vm.lastUsed = clock
		slot := &p.local[procID()%n].vm
		if slot.CompareAndSwap(nil, vm) {
			if p.waiters.Load() == 0 && !p.retiredFlag.Load() {
				return
			}
			// A caller started waiting (or the pool retired) meanwhile: take
			// the VM back and go the slow way, which wakes it. If it is gone,
			// someone took it, which is as good.
			if !slot.CompareAndSwap(vm, nil) {
				return
			}
		}
	}
	p.mu.Lock()
	if vm.broken || p.retired || p.strategy == StrategyNone {
		p.total--
		delete(p.all, vm)
		w := p.needWake()
		p.mu.Unlock()
		p.closeVM(vm)
		if w {
			p.signal()
		}
		return
	}
	vm.lastUsed = clock
	p.free = append(p.free, vm)
	w := p.needWake()
	p.mu.Unlock()
	if w {
		p.signal()
	}
}

func (p *pool) closeVM(vm *VM) {
	st := p.script.stats
	st.closedCalls.Add(vm.calls)
	st.closedErrors.Add(vm.errs)
	st.closed.Add(1)
	vm.close()
}

// retire stops the pool: idle VMs are closed now, VMs in use when they come
// back, waiters are woken to look the script up again.
func (p *pool) retire() {
	p.mu.Lock()
	p.retired = true
	p.retiredFlag.Store(true)
	idle := p.drainLocal(p.free)
	p.free = nil
	for _, vm := range idle {
		delete(p.all, vm)
	}
	p.total -= len(idle)
	w := p.waiters.Load() > 0
	p.woken = w
	p.mu.Unlock()
	for _, vm := range idle {
		p.closeVM(vm)
	}
	if w {
		p.signal()
	}
}

// reap closes VMs that have been idle too long: non-core VMs after
// nonCoreIdle, and all of them once the script was not called for
// idleTimeout. It reports whether the pool is retired and empty (done with).
func (p *pool) reap(clock int64) (gone bool) {
	var victims []*VM
	p.mu.Lock()
	if p.retired || (p.idleTimeout > 0 && clock-p.lastUse.Load() >= p.idleTimeout) {
		victims = append(victims, p.free...)
		victims = p.drainLocal(victims)
		clear(p.free)
		p.free = p.free[:0]
	} else {
		n := 0
		for n < len(p.free) && p.total-n > p.core && clock-p.free[n].lastUsed >= p.nonCoreIdle {
			n++
		}
		if n > 0 {
			victims = append(victims, p.free[:n]...)
			rest := copy(p.free, p.free[n:])
			clear(p.free[rest:])
			p.free = p.free[:rest]
		}
	}
	for _, vm := range victims {
		delete(p.all, vm)
	}
	p.total -= len(victims)
	gone = p.retired && p.total == 0
	p.mu.Unlock()
	for _, vm := range victims {
		p.closeVM(vm)
	}
	return gone
}

// counts reports VMs alive, idle, and the calls/errors of live VMs.
func (p *pool) counts() (alive, idle int, calls, errs uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for vm := range p.all {
		calls += vm.published.calls.Load()
		errs += vm.published.errs.Load()
	}
	idle = len(p.free)
	for i := range p.local {
		if p.local[i].vm.Load() != nil {
			idle++
		}
	}
	return p.total, idle, calls, errs
}

// defaultCore is the core size of StrategyDefault.
func defaultCore() int { return runtime.GOMAXPROCS(0) }

// defaultNonCore is the non-core bound of StrategyDefault. Only GOMAXPROCS
// calls run at once, but a goroutine preempted while it holds a VM keeps it
// until it is scheduled again, and with thousands of callers that can take
// a while; meanwhile the next caller needs another VM or must park. Parking
// is cheap with one CPU but costs tens of microseconds per wait once two
// CPUs run in parallel (timer, park, wake-up of an idle P), and at 4000
// goroutines on 2 CPUs a bound of 2 extra VMs made ~1 call in 100 wait,
// which tripled the CPU per call. Non-core VMs are closed after NonCoreIdle,
// so the bound is only reached under such load; 4000 goroutines on 2 CPUs
// used ~100 of the 256 allowed (~5 MB).
func defaultNonCore() int { return 128 * runtime.GOMAXPROCS(0) }
