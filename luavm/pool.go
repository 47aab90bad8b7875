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
//
// The hot path touches no shared lock and no shared written cache line: a VM
// released on a P goes to that P's slot (local) and the next acquire on the
// same P takes it back with one atomic swap, as sync.Pool does. Everything
// else (the shared free list, the count against the bound, the queue of
// callers waiting for a VM) is under mu, on the slow path: a P whose slot is
// empty or full. While callers wait, the slots stay in use: the first
// release on each P in each watchdog tick hands its VM to the oldest waiter
// (localSlot.due), the others keep it in the slot for the goroutine running
// on that P and wake one waiter to look into the slots (woken), which finds
// the VM if that goroutine does not come back for it. Before (one path
// through mu for every call as soon as one caller waited) the pool fell into
// a convoy on mu once its bound was reached, at 1017 ns per call on 16 CPUs
// against 78 for sync.Pool: docs/pool.md.
type pool struct {
	script *script

	strategy    Strategy
	core        int   // VMs kept resident; the rest are non-core
	limit       int   // max VMs alive at once, in use or idle
	nonCoreIdle int64 // ns
	idleTimeout int64 // ns; 0 = never

	// local is one slot per P (GOMAXPROCS when the pool was made). nil for
	// StrategyNone. VMs in slots are idle and counted in total.
	local []localSlot
	_     [64]byte // keep waiting off the line of the fields above

	// waiting mirrors the length of queue (changed under mu) for the
	// lock-free paths; on a line of its own, as it changes on slow paths
	// that the hot path must not pay for.
	waiting atomic.Int32
	// retiredFlag mirrors retired for the lock-free paths.
	retiredFlag atomic.Bool
	// woken: one waiter has been told to look into the slots and has not
	// done so yet; until it has, releases that keep their VM in a slot do
	// not wake another (one scanner at a time, so that a busy pool does
	// not wake a waiter per call for nothing).
	woken atomic.Bool
	_     [56]byte

	mu sync.Mutex
	// free is a LIFO of idle VMs: the top is the warmest, the bottom the
	// longest idle, which the reaper closes first. Empty while callers
	// wait (a VM coming back goes to the oldest of them). REQUIRES mu.
	free []*VM
	// total counts VMs alive (idle + in use + being created + granted to
	// a waiter to create). It never exceeds limit. REQUIRES mu.
	total int
	// queue holds the callers waiting for a VM, oldest first. REQUIRES mu.
	queue   waiterQueue
	retired bool // no new VMs; returned VMs are closed. REQUIRES mu.

	lastUse atomic.Int64 // coarse clock of the last release, for IdleTimeout

	// all is every VM alive, for the watchdog and Stats. Under its own
	// lock so that the watchdog's scan of hundreds of VMs every tick does
	// not hold up acquire and release (it held mu and made a third of the
	// pool's lock contention at 16 CPUs). REQUIRES allMu.
	allMu sync.Mutex
	all   map[*VM]struct{}
}

// localSlot is one P's VM, padded to 128 bytes (two cache lines, as the
// CPU may fetch lines in pairs) so that Ps do not share lines.
type localSlot struct {
	vm atomic.Pointer[VM]
	// handoffClock is the coarse clock of this P's last handoff: see due.
	handoffClock atomic.Int64
	_            [128 - 16]byte
}

// due reports whether this release, made while callers wait, must hand its
// VM to the oldest waiter: the first one on each P in each watchdog tick.
// The others keep the VM in the P's slot for the goroutine running there.
// A handoff costs two trips through mu, a park and a wake-up (the releaser
// waits at its next call), so it must stay rare: one every 128 releases,
// tried first, is ~800 000 trips a second through one lock at 16 Ps. Once
// per tick and P, a queue of thousands moves within seconds, about the time
// thousands of CPU-bound goroutines take to get a turn on the Ps anyway;
// and a release that finds its P's slot full hands its VM over too.
func (s *localSlot) due(clock int64) bool {
	if s.handoffClock.Load() == clock {
		return false
	}
	s.handoffClock.Store(clock)
	return true
}

// grant is what a waiter is handed: a VM, or leave to create one (its place
// in total is already counted), or look: a VM was kept in a slot (the
// waiter stays queued), or none of them: look at the pool again (it was
// retired).
type grant struct {
	vm     *VM
	create bool
	look   bool
}

// waiter is a caller parked in acquire. Reused through waiterPool.
type waiter struct {
	// ch has room for the one grant that dequeues the waiter and one look
	// (there is at most one look out at a time: woken), so sending under
	// mu never blocks.
	ch         chan grant
	timer      *time.Timer
	prev, next *waiter
	queued     bool // REQUIRES pool.mu
}

var waiterPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{ch: make(chan grant, 2), timer: t}
}}

// waiterQueue is a FIFO of waiters, linked through them (no allocation).
type waiterQueue struct{ head, tail *waiter }

func (q *waiterQueue) push(w *waiter) {
	w.prev, w.next, w.queued = q.tail, nil, true
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
}

func (q *waiterQueue) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
}

func newPool(s *script) *pool {
	cfg := s.cfg.Pool
	hard := s.mgr.opts.HardMaxVMs
	p := &pool{script: s, strategy: cfg.Strategy, all: make(map[*VM]struct{})}
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
	return p.acquireSlow(deadline)
}

// acquireSlow is acquire when the caller's slot is empty.
func (p *pool) acquireSlow(deadline int64) (*VM, error) {
	p.lockSlow()
	if p.retired {
		p.mu.Unlock()
		return nil, errRetired
	}
	if n := len(p.free); n > 0 {
		vm := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return vm, nil
	}
	if p.total < p.limit {
		p.total++
		p.mu.Unlock()
		return p.create(context.Background())
	}
	// At the bound. VMs idle in other Ps' slots are taken only while no one
	// waits: once callers queue, they come first, and taking slots would
	// send the Ps running there to this lock in turn.
	first := p.queue.head == nil
	if first {
		if vm := p.takeLocal(); vm != nil {
			p.mu.Unlock()
			return vm, nil
		}
	}
	w := waiterPool.Get().(*waiter)
	p.queue.push(w)
	p.waiting.Add(1)
	p.mu.Unlock()
	return p.wait(w, first, deadline)
}

// wait parks w, queued, until it is granted a VM or deadline passes. first:
// no one waited before w, so a release may have put a VM in a slot just
// before it could see w (release stores the VM and then loads waiting, w
// was counted in waiting before this loads the slots, so one of the two
// sees the other). Later, VMs come by handoff (release, localSlot.due), or
// w is told to look into the slots (wakeScanner), or the watchdog's sweep
// hands over what it finds in them (serveWaiters).
func (p *pool) wait(w *waiter, first bool, deadline int64) (*VM, error) {
	if first {
		if vm := p.takeLocal(); vm != nil {
			return p.leave(w, vm), nil
		}
	}
	st := p.script.stats
	st.waits.Add(1)
	start := now()
	defer func() { st.waitNanos.Add(uint64(now() - start)) }()
	var timeout <-chan time.Time
	if deadline > 0 {
		w.timer.Reset(time.Duration(deadline - start))
		timeout = w.timer.C
	}
	for {
		var g grant
		select {
		case g = <-w.ch:
		case <-timeout:
			p.lockSlow()
			queued := w.queued
			if queued {
				p.dequeue(w)
			}
			p.mu.Unlock()
			if queued {
				p.putWaiter(w)
				st.exhausted.Add(1)
				return nil, fmt.Errorf("luavm: script %s: no VM free within the deadline (%d VMs busy): %w", p.script.name, p.limit, ErrPoolExhausted)
			}
			g = p.granted(w) // granted as the deadline passed: take it
		}
		if g.look {
			// Told that a release kept its VM in a slot: take it if its
			// P's goroutine has not come back for it. Then clear woken
			// and look once more: a release that saw woken still set
			// did not wake anyone.
			vm := p.takeLocal()
			p.woken.Store(false)
			if vm == nil {
				vm = p.takeLocal()
			}
			if vm == nil {
				continue // still queued (or granted meanwhile: next receive)
			}
			vm = p.leave(w, vm)
			if p.waiting.Load() > 0 && p.anyLocal() {
				p.wakeScanner() // more VMs kept in slots: pass the word on
			}
			return vm, nil
		}
		w.timer.Stop()
		p.putWaiter(w)
		switch {
		case g.vm != nil:
			return g.vm, nil
		case g.create:
			return p.create(context.Background())
		default:
			return p.acquireSlow(deadline)
		}
	}
}

// leave takes w, which found vm itself, off the queue, and passes on a
// grant made to it meanwhile. It returns vm.
func (p *pool) leave(w *waiter, vm *VM) *VM {
	p.lockSlow()
	queued := w.queued
	if queued {
		p.dequeue(w)
	}
	p.mu.Unlock()
	if !queued {
		p.giveBack(p.granted(w))
	}
	w.timer.Stop()
	p.putWaiter(w)
	return vm
}

// granted receives the grant that took w off the queue (sent under mu
// before w.queued was cleared), skipping a look.
func (p *pool) granted(w *waiter) grant {
	for {
		g := <-w.ch
		if !g.look {
			return g
		}
		p.woken.Store(false)
	}
}

// putWaiter recycles w once it is off the queue and its grant taken. A look
// still in its channel is dropped, and woken cleared for it.
func (p *pool) putWaiter(w *waiter) {
	select {
	case <-w.ch:
		p.woken.Store(false)
	default:
	}
	waiterPool.Put(w)
}

// anyLocal reports whether a slot holds a VM.
func (p *pool) anyLocal() bool {
	for i := range p.local {
		if p.local[i].vm.Load() != nil {
			return true
		}
	}
	return false
}

// wakeScanner tells the oldest waiter to look into the slots, unless one is
// already told.
func (p *pool) wakeScanner() {
	if p.woken.Load() || !p.woken.CompareAndSwap(false, true) {
		return
	}
	p.lockSlow()
	if w := p.queue.head; w != nil {
		w.ch <- grant{look: true}
	} else {
		p.woken.Store(false)
	}
	p.mu.Unlock()
}

// lockSlow takes mu for a caller's slow path and counts it (Stats'
// PoolLocks): how often calls leave the per-P slots is what decides whether
// the pool scales with CPUs.
func (p *pool) lockSlow() {
	p.mu.Lock()
	p.script.stats.locks.Add(1)
}

// dequeue takes w off the queue. REQUIRES mu.
func (p *pool) dequeue(w *waiter) {
	p.queue.remove(w)
	p.waiting.Add(-1)
}

// handOff gives g to the oldest waiter, if any. REQUIRES mu.
func (p *pool) handOff(g grant) bool {
	w := p.queue.head
	if w == nil {
		return false
	}
	p.dequeue(w)
	w.ch <- g
	return true
}

// giveBack returns a grant its waiter does not need.
func (p *pool) giveBack(g grant) {
	switch {
	case g.vm != nil:
		p.release(g.vm)
	case g.create:
		p.lockSlow()
		if p.retired || !p.handOff(g) {
			p.total--
		}
		p.mu.Unlock()
	}
}

// create makes a VM for a place already counted in total. ctx, if not nil,
// can stop its main chunk (LoadContext).
func (p *pool) create(ctx context.Context) (*VM, error) {
	vm, err := newVM(ctx, p)
	if err != nil {
		p.lockSlow()
		if p.retired || !p.handOff(grant{create: true}) {
			p.total--
		}
		p.mu.Unlock()
		return nil, err
	}
	p.script.stats.created.Add(1)
	return vm, nil
}

func (p *pool) register(vm *VM) {
	p.allMu.Lock()
	p.all[vm] = struct{}{}
	p.allMu.Unlock()
}

func (p *pool) unregister(vms ...*VM) {
	if len(vms) == 0 {
		return
	}
	p.allMu.Lock()
	for _, vm := range vms {
		delete(p.all, vm)
	}
	p.allMu.Unlock()
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
	if n := len(p.local); n > 0 && !vm.broken && !p.retiredFlag.Load() {
		vm.lastUsed = clock
		slot := &p.local[procID()%n]
		if p.waiting.Load() == 0 {
			if slot.vm.CompareAndSwap(nil, vm) {
				if p.waiting.Load() == 0 && !p.retiredFlag.Load() {
					return
				}
				// A caller started waiting (or the pool retired)
				// meanwhile: take the VM back and go the slow way, which
				// hands it over. If it is gone, someone took it, which is
				// as good.
				if !slot.vm.CompareAndSwap(vm, nil) {
					return
				}
			}
		} else if !slot.due(clock) && slot.vm.CompareAndSwap(nil, vm) {
			// Kept for this P although callers wait (see localSlot.due);
			// a waiter looks for it in case this P's goroutine does not
			// come back for it.
			if !p.retiredFlag.Load() {
				p.wakeScanner()
				return
			}
			if !slot.vm.CompareAndSwap(vm, nil) {
				return
			}
		}
	}
	p.lockSlow()
	if vm.broken || p.retired || p.strategy == StrategyNone {
		// Its place in total goes to the oldest waiter, who creates a VM.
		if p.retired || !p.handOff(grant{create: true}) {
			p.total--
		}
		p.mu.Unlock()
		p.unregister(vm)
		p.closeVM(vm)
		return
	}
	vm.lastUsed = clock
	if !p.handOff(grant{vm: vm}) {
		p.free = append(p.free, vm)
	}
	p.mu.Unlock()
}

// serveWaiters hands the VMs idle in slots to waiters. The watchdog calls
// it every tick: a release that kept its VM in a slot while callers waited
// (see localSlot.due) may have been the last one for a while.
func (p *pool) serveWaiters() {
	if p.waiting.Load() == 0 {
		return
	}
	p.mu.Lock()
	for p.queue.head != nil && !p.retired {
		vm := p.takeLocal()
		if vm == nil {
			break
		}
		p.handOff(grant{vm: vm})
	}
	p.mu.Unlock()
}

func (p *pool) closeVM(vm *VM) {
	st := p.script.stats
	st.closedCalls.Add(vm.calls)
	st.closedErrors.Add(vm.errs)
	st.closed.Add(1)
	vm.close()
}

// retire stops the pool: idle VMs are closed now, VMs in use when they come
// back, waiters are sent to look the script up again.
func (p *pool) retire() {
	p.mu.Lock()
	p.retired = true
	p.retiredFlag.Store(true)
	idle := p.drainLocal(p.free)
	p.free = nil
	p.total -= len(idle)
	for p.handOff(grant{}) {
	}
	p.mu.Unlock()
	p.unregister(idle...)
	for _, vm := range idle {
		p.closeVM(vm)
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
	p.total -= len(victims)
	gone = p.retired && p.total == 0
	p.mu.Unlock()
	p.unregister(victims...)
	for _, vm := range victims {
		p.closeVM(vm)
	}
	return gone
}

// snapshot appends every VM alive to into, for the watchdog's scan.
func (p *pool) snapshot(into []*VM) []*VM {
	p.allMu.Lock()
	for vm := range p.all {
		into = append(into, vm)
	}
	p.allMu.Unlock()
	return into
}

// counts reports VMs alive, idle, and the calls/errors of live VMs.
func (p *pool) counts() (alive, idle int, calls, errs uint64) {
	p.allMu.Lock()
	for vm := range p.all {
		calls += vm.published.calls.Load()
		errs += vm.published.errs.Load()
	}
	p.allMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
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
