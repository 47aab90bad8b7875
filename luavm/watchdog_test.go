package luavm

import (
	"errors"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// TestWatchdogStallNotCharged: a call armed while the watchdog has not
// ticked for a while (its clock stale: here the watchdog is held on the
// stallWatchdog hook, as a starved process holds it off the CPU) gets its whole
// time limit once the watchdog runs again, and a runaway call is still
// stopped after a stall. (Not parallel: it sets the package's watchdog
// hook.) Before, the deadline came from the stale clock
// and the watchdog stopped the call as soon as it woke (compute's
// TestLuaTimeoutIsPerRow failed so under -race at load 18).
func TestWatchdogStallNotCharged(t *testing.T) {
	m := newTestManager(t, Options{WatchdogInterval: 10 * time.Millisecond})
	m.Register("nap", func(L *lua.LState) int { time.Sleep(time.Duration(L.CheckInt(1)) * time.Millisecond); return 0 })
	const limit = 200 * time.Millisecond
	if err := m.Load("s", "function f(ms) nap(ms) return 1 end\nfunction spin() while true do end end", ScriptConfig{Timeout: limit}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.InvokeScriptFunc("s", "f", limit, 1, 0); err != nil { // a warm VM in the pool
		t.Fatal(err)
	}
	var hold sync.Mutex
	//lint:ignore SA2001 the watchdog waits here until the test releases hold
	wait := func() { hold.Lock(); hold.Unlock() }
	stallWatchdog.Store(&wait)
	t.Cleanup(func() { stallWatchdog.Store(nil) })
	stall := func(d time.Duration) {
		hold.Lock() // the watchdog stops at its next tick, after storing its clock
		time.Sleep(d)
		hold.Unlock()
	}
	for round := range 3 {
		done := make(chan struct{})
		go func() { defer close(done); stall(250 * time.Millisecond) }()
		time.Sleep(180 * time.Millisecond) // the clock is ~170 ms stale
		// 150 ms of a 200 ms limit, armed 70 ms before the watchdog wakes.
		if _, err := m.InvokeScriptFunc("s", "f", limit, 1, 150); err != nil {
			t.Fatalf("round %d: a 150 ms call under a %v limit armed during a watchdog stall: %v", round, limit, err)
		}
		<-done
	}
	// The stall is not a way out of the limit: a runaway call armed
	// during one is still stopped.
	go stall(250 * time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	_, err := m.InvokeScriptFunc("s", "spin", limit, 0)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("runaway call after a stall: %v, want ErrTimeout", err)
	}
	checkStoppedInTime(t, "runaway call armed during a stall", time.Since(start), limit+250*time.Millisecond)
}
