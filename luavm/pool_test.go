package luavm

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// loadBlocking loads a script whose hold() blocks in Go until release is
// closed, so a test can keep n VMs busy at once.
func holdVMs(t *testing.T, m *Manager, name string, n int, cfg ScriptConfig) (release func()) {
	t.Helper()
	entered := make(chan struct{}, n)
	leave := make(chan struct{})
	m.Register("block", func(L *lua.LState) int { entered <- struct{}{}; <-leave; return 0 })
	if err := m.Load(name, `function hold() block() end function ok(n) return n end`, cfg); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Invoke(context.Background(), name, "hold", 0); err != nil {
				t.Error(err)
			}
		}()
	}
	for range n {
		<-entered
	}
	return func() { close(leave); wg.Wait() }
}

func stats(t *testing.T, m *Manager, name string) ScriptStats {
	t.Helper()
	for _, s := range m.Stats() {
		if s.Script == name {
			return s
		}
	}
	t.Fatalf("no stats for %s", name)
	return ScriptStats{}
}

func TestIdleRelease(t *testing.T) {
	m := newTestManager(t, Options{IdleCheck: 10 * time.Millisecond, WatchdogInterval: 5 * time.Millisecond})
	// Non-core VMs go after NonCoreIdle; the core stays (no IdleTimeout), a
	// stable state the test can wait for however loaded the machine is.
	cfg := ScriptConfig{Pool: PoolConfig{Strategy: StrategyCore, Core: 2, MaxNonCore: Unlimited,
		NonCoreIdle: 30 * time.Millisecond, IdleTimeout: -1}}
	release := holdVMs(t, m, "idle", 6, cfg)
	st := stats(t, m, "idle")
	if st.VMsCore != 2 || st.VMsNonCore != 4 {
		t.Fatalf("under load: %+v, want 2 core + 4 non-core", st)
	}
	release()
	waitFor(t, "non-core VMs closed after NonCoreIdle", func() bool {
		st := stats(t, m, "idle")
		return st.VMsNonCore == 0 && st.VMsCore == 2 && st.VMsClosed == 4
	})
	time.Sleep(50 * time.Millisecond) // several idle checks: the core must stay
	if st := stats(t, m, "idle"); st.VMsCore != 2 || st.VMsIdle != 2 {
		t.Fatalf("core VMs closed without an IdleTimeout: %+v", st)
	}

	// With an IdleTimeout, the whole pool goes once the script is unused.
	cfg.Pool.IdleTimeout = 100 * time.Millisecond
	if err := m.Load("idle2", `function ok(n) return n end`, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Invoke(context.Background(), "idle2", "ok", 1, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "core VMs closed after IdleTimeout", func() bool {
		st := stats(t, m, "idle2")
		return st.VMsCore == 0 && st.VMsCreated > 0 && st.VMsClosed == st.VMsCreated
	})
	// The next call makes a VM again.
	if res, err := m.Invoke(context.Background(), "idle2", "ok", 1, 5); err != nil || res[0] != int64(5) {
		t.Fatalf("after idle release: %v %v", res, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStrategies(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		m := newTestManager(t, Options{})
		if err := m.Load("n", `function ok(n) return n end`, ScriptConfig{Pool: PoolConfig{Strategy: StrategyNone}}); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, err := m.Invoke(context.Background(), "n", "ok", 1, 1); err != nil {
				t.Fatal(err)
			}
		}
		st := stats(t, m, "n")
		if st.VMsCreated != 6 || st.VMsClosed != 6 || st.VMsCore+st.VMsNonCore != 0 {
			t.Fatalf("none: %+v, want a VM per call (5 + the one Load runs)", st)
		}
	})
	t.Run("variable keeps VMs across GC", func(t *testing.T) {
		m := newTestManager(t, Options{})
		release := holdVMs(t, m, "v", 5, ScriptConfig{Pool: PoolConfig{Strategy: StrategyVariable}})
		release()
		runtime.GC()
		runtime.GC()
		st := stats(t, m, "v")
		if st.VMsCore != 5 || st.VMsIdle != 5 {
			t.Fatalf("variable after GC: %+v, want 5 idle VMs kept", st)
		}
		for range 10 {
			m.Invoke(context.Background(), "v", "ok", 1, 1)
		}
		if st := stats(t, m, "v"); st.VMsCreated != 5 {
			t.Fatalf("variable did not reuse: %+v", st)
		}
	})
	t.Run("unlimited is bounded by HardMaxVMs", func(t *testing.T) {
		m := newTestManager(t, Options{HardMaxVMs: 3})
		release := holdVMs(t, m, "u", 3, ScriptConfig{Pool: PoolConfig{Strategy: StrategyCore, Core: 1, MaxNonCore: Unlimited}})
		defer release()
		_, err := m.InvokeScriptFunc("u", "ok", 20*time.Millisecond, 1, 1)
		if err == nil {
			t.Fatal("a 4th VM was created past HardMaxVMs")
		}
		if st := stats(t, m, "u"); st.VMsCore+st.VMsNonCore != 3 || st.Exhausted != 1 {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("core+max+block", func(t *testing.T) {
		m := newTestManager(t, Options{})
		cfg, err := ParsePool("core2+max1+block")
		if err != nil {
			t.Fatal(err)
		}
		release := holdVMs(t, m, "c", 3, ScriptConfig{Pool: cfg})
		st := stats(t, m, "c")
		if st.VMsCore != 2 || st.VMsNonCore != 1 {
			t.Fatalf("%+v", st)
		}
		done := make(chan error)
		go func() { _, err := m.InvokeScriptFunc("c", "ok", 5*time.Second, 1, 1); done <- err }()
		waitFor(t, "a caller waiting", func() bool { return stats(t, m, "c").Waits > 0 })
		release()
		if err := <-done; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	})
}

func TestParsePool(t *testing.T) {
	f := func(in string, want PoolConfig, ok bool) {
		t.Helper()
		got, err := ParsePool(in)
		if (err == nil) != ok || (ok && got != want) {
			t.Errorf("ParsePool(%q) = %+v, %v; want %+v ok=%v", in, got, err, want, ok)
		}
	}
	f("default", PoolConfig{}, true)
	f("none", PoolConfig{Strategy: StrategyNone}, true)
	f("variable", PoolConfig{Strategy: StrategyVariable}, true)
	f("core1000+unlimited", PoolConfig{Strategy: StrategyCore, Core: 1000, MaxNonCore: Unlimited}, true)
	f("core2+block", PoolConfig{Strategy: StrategyCore, Core: 2}, true)
	f("core1000+max2000+block", PoolConfig{Strategy: StrategyCore, Core: 1000, MaxNonCore: 2000}, true)
	f("core0+block", PoolConfig{}, false)
	f("core2", PoolConfig{}, false)
	f("corex+block", PoolConfig{}, false)
	f("core2+max+block", PoolConfig{}, false)
}

func TestCloseWithWaitersAndCallsInFlight(t *testing.T) {
	m := NewManager(Options{})
	release := holdVMs(t, m, "c", 1, ScriptConfig{Pool: PoolConfig{Strategy: StrategyCore, Core: 1}})
	waiter := make(chan error)
	go func() { _, err := m.InvokeScriptFunc("c", "ok", 10*time.Second, 1, 1); waiter <- err }()
	waitFor(t, "a caller waiting", func() bool { return stats(t, m, "c").Waits > 0 })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; err == nil {
		t.Fatal("waiter got a VM from a closed manager")
	}
	release()
	if _, err := m.Invoke(context.Background(), "c", "ok", 1, 1); err != ErrClosed {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if err := m.Load("x", "", ScriptConfig{}); err != ErrClosed {
		t.Fatalf("Load after Close: %v", err)
	}
}

// TestPoolStress hammers small blocking pools from many goroutines: every
// call must get a VM (no lost wake-up between the per-P slots and the
// waiters), the VM count must stay within the bound, and Stats must count
// every call.
func TestPoolStress(t *testing.T) {
	for _, spec := range []string{"core1+block", "core2+max1+block", "default", "variable"} {
		t.Run(spec, func(t *testing.T) {
			m := newTestManager(t, Options{})
			pc, err := ParsePool(spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Load("s", `function ok(n) return n end`, ScriptConfig{Pool: pc}); err != nil {
				t.Fatal(err)
			}
			const workers, calls = 64, 100
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						res, err := m.InvokeScriptFunc("s", "ok", 10*time.Second, 1, w*calls+i)
						if err != nil {
							errs <- err
							return
						}
						if res[0] != int64(w*calls+i) {
							errs <- fmt.Errorf("got %v", res[0])
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			st := stats(t, m, "s")
			if st.Calls != workers*calls {
				t.Fatalf("Calls = %d, want %d", st.Calls, workers*calls)
			}
			if bound := m.lookup("s").pool.limit; st.VMsCore+st.VMsNonCore > bound || st.VMsIdle != st.VMsCore+st.VMsNonCore {
				t.Fatalf("%+v (bound %d): VMs over the bound or not all idle", st, bound)
			}
		})
	}
}

// TestPoolBoundUnderContention runs many more goroutines than the pool may
// have VMs, with calls that yield while they hold a VM (as a goroutine
// preempted mid-call does) and calls that panic (their VM is closed and its
// place goes to a waiter, who creates a fresh one): the VMs in use never
// exceed the bound, every caller is served before its deadline although the
// Ps keep their VMs while callers wait (the handoffs and the watchdog's
// sweep of the slots must move the queue), and Stats add up.
func TestPoolBoundUnderContention(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	for _, spec := range []string{"core1+block", "core2+max2+block", "default", "variable"} {
		t.Run(spec, func(t *testing.T) {
			// HardMaxVMs 6 bounds default and variable well below the
			// goroutine count, so they wait too.
			m := newTestManager(t, Options{HardMaxVMs: 6})
			pc, err := ParsePool(spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Load("s", `function ok(n) return n end`, ScriptConfig{Pool: pc, Timeout: 20 * time.Second}); err != nil {
				t.Fatal(err)
			}
			bound := m.lookup("s").pool.limit
			const workers, calls, panicEvery = 256, 40, 97
			var inUse, maxInUse, panics atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						n := w*calls + i
						err := func() (err error) {
							defer func() {
								if r := recover(); r != nil {
									panics.Add(1)
								}
							}()
							return m.Do(context.Background(), "s", func(vm *VM) error {
								defer inUse.Add(-1)
								now := inUse.Add(1)
								for old := maxInUse.Load(); now > old && !maxInUse.CompareAndSwap(old, now); old = maxInUse.Load() {
								}
								fn, err := vm.Func("ok")
								if err != nil {
									return err
								}
								if n%3 == 0 {
									runtime.Gosched() // descheduled while holding the VM
								}
								if n%panicEvery == 0 {
									panic("boom")
								}
								res, err := vm.Call1(fn, lua.LNumber(n))
								if err == nil && res != lua.LNumber(n) {
									err = fmt.Errorf("got %v, want %d", res, n)
								}
								return err
							})
						}()
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := maxInUse.Load(); got > int64(bound) {
				t.Fatalf("%d VMs in use at once, bound %d", got, bound)
			}
			st := stats(t, m, "s")
			alive := st.VMsCore + st.VMsNonCore
			if st.Calls != uint64(workers*calls)-uint64(panics.Load()) || alive > bound || st.VMsIdle != alive ||
				st.VMsCreated-st.VMsClosed != uint64(alive) || st.VMsClosed < uint64(panics.Load()) {
				t.Fatalf("%+v (bound %d, %d panics): calls not all counted, VMs over the bound, not all idle, or broken VMs not closed", st, bound, panics.Load())
			}
			t.Logf("%s: bound %d, %d waits, %d VMs created", spec, bound, st.Waits, st.VMsCreated)
		})
	}
}

// TestWaiterServedFromSlot: a release made while callers wait may keep its
// VM in its P's slot (localSlot.due: one handoff per P and watchdog tick).
// If the goroutine there does not come back for it, the waiter told to look
// (wakeScanner) takes it; and if none is told, the watchdog's sweep
// (serveWaiters) hands it over. The clock is frozen (a watchdog interval of
// an hour) so that the release is not due and no tick sweeps; the sweep is
// called as the watchdog does every tick.
func TestWaiterServedFromSlot(t *testing.T) {
	for _, woken := range []bool{false, true} {
		name := "scanner"
		if woken {
			name = "sweep"
		}
		t.Run(name, func(t *testing.T) {
			m := newTestManager(t, Options{WatchdogInterval: time.Hour})
			release := holdVMs(t, m, "c", 1, ScriptConfig{Pool: PoolConfig{Strategy: StrategyCore, Core: 1}})
			p := m.lookup("c").pool
			waiter := make(chan error, 1)
			go func() { _, err := m.Invoke(context.Background(), "c", "ok", 1, 1); waiter <- err }()
			waitFor(t, "a caller waiting", func() bool { return stats(t, m, "c").Waits > 0 })
			clock := m.clock.Load()
			for i := range p.local {
				p.local[i].handoffClock.Store(clock) // this tick's handoff is done
			}
			if woken {
				p.woken.Store(true) // as if a waiter were told to look and not yet run
			}
			release()
			if woken {
				select {
				case err := <-waiter:
					t.Fatalf("the waiter was served by a release that was not due (%v): the test does not test the sweep", err)
				case <-time.After(50 * time.Millisecond):
				}
				if st := stats(t, m, "c"); st.VMsIdle != 1 {
					t.Fatalf("%+v: want the VM idle in a slot", st)
				}
				p.woken.Store(false)
				p.serveWaiters()
			}
			select {
			case err := <-waiter:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter did not get the VM kept in a slot")
			}
		})
	}
}

func TestLocalSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(localSlot{}); n != 128 {
		t.Fatalf("localSlot is %d bytes, want 128 (its own pair of cache lines)", n)
	}
}

// TestPoolLocksCountsSlowPaths: calls one after another on one goroutine
// find the VM kept for their P and do not take the pool's lock; Stats'
// PoolLocks counts the ones that do.
func TestPoolLocksCountsSlowPaths(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("s", `function ok(n) return n end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	call := func() {
		if _, err := m.InvokeScriptFunc("s", "ok", time.Second, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	call() // the VM Load made is on the shared list: one trip through the lock
	before := stats(t, m, "s").PoolLocks
	if before < 1 {
		t.Fatalf("PoolLocks = %d after the first call, want >= 1", before)
	}
	const calls = 1000
	for range calls {
		call()
	}
	// The goroutine may move between Ps a few times (each a trip or two).
	if got := stats(t, m, "s").PoolLocks - before; got > calls/20 {
		t.Fatalf("%d of %d calls took the pool's lock: the per-P slots are not used", got, calls)
	}
}

// TestPoolReloadUnderContention reloads a script while many goroutines wait
// for its few VMs: the waiters of a retired version are sent on to the new
// one, every call is answered by one version or the next, and the old
// versions' VMs are all closed once returned.
func TestPoolReloadUnderContention(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	m := newTestManager(t, Options{IdleCheck: 10 * time.Millisecond})
	cfg := ScriptConfig{Pool: PoolConfig{Strategy: StrategyCore, Core: 2}, Timeout: 20 * time.Second}
	src := func(v int) string { return fmt.Sprintf(`function ok(n) return n + %d end`, v*1000000) }
	if err := m.Load("s", src(0), cfg); err != nil {
		t.Fatal(err)
	}
	const workers, calls, versions = 128, 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	stop := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				n := w*calls + i
				err := m.Do(context.Background(), "s", func(vm *VM) error {
					fn, err := vm.Func("ok")
					if err != nil {
						return err
					}
					runtime.Gosched()
					res, err := vm.Call1(fn, lua.LNumber(n))
					if err == nil && (int(res.(lua.LNumber))-n)%1000000 != 0 {
						err = fmt.Errorf("call %d: got %v, from no version", n, res)
					}
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() {
		defer close(stop)
		for v := 1; v <= versions; v++ {
			// Retire the version while callers wait for it (if any still
			// call).
			for deadline := time.Now().Add(time.Second); m.lookup("s").pool.waiting.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(100 * time.Microsecond)
			}
			if err := m.Load("s", src(v), cfg); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	<-stop
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitFor(t, "the retired versions' VMs closed", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.pools) == 1
	})
	st := stats(t, m, "s")
	if alive := st.VMsCore + st.VMsNonCore; alive > 2 || st.VMsCreated-st.VMsClosed != uint64(alive) {
		t.Fatalf("%+v: more VMs than the bound, or VMs of old versions not closed", st)
	}
}
