package luavm

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// invokeBounded is m.Invoke with the test's own bounds on the call: it is
// cancelled when the live heap passes maxHeap or after limit, so that a
// call whose memory guard is broken fails the test soon and small instead
// of allocating until its script's timeout. stopped says which bound
// ended it ("" when none did).
func invokeBounded(m *Manager, script, fn string, maxHeap uint64, limit time.Duration, args ...any) (res []any, stopped string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	watched := make(chan struct{})
	over := make(chan struct{})
	go func() {
		defer close(watched)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if sample[0].Value.Uint64() > maxHeap {
				close(over)
				cancel()
				return
			}
		}
	}()
	res, err = m.Invoke(ctx, script, fn, 1, args...)
	if ctx.Err() != nil {
		stopped = fmt.Sprintf("the test's %v bound", limit)
	}
	cancel()
	<-watched
	select {
	case <-over:
		stopped = fmt.Sprintf("the test's %d MiB heap bound", maxHeap>>20)
	default:
	}
	return res, stopped, err
}

// TestMemoryLimitPerCall: with the process heap budget off, a call that
// doubles a string or grows a table is stopped near its script's
// MemoryLimit, long before its one-minute timeout; a call under the limit runs.
func TestMemoryLimitPerCall(t *testing.T) {
	m := newTestManager(t, Options{WatchdogInterval: 5 * time.Millisecond, HeapLimit: NoHeapLimit, MaxStringSize: -1})
	src := `function doubling() local s = "x" while true do s = s .. s end end
function grow() local t = {} local i = 0 while true do i = i + 1 t[i] = "v" .. i end end
function rep(n) return #string.rep("x", n) end
function small() local t = {} for i = 1, 1000 do t[i] = i end return #t end`
	if err := m.Load("mem.lua", src, ScriptConfig{Timeout: time.Minute, MemoryLimit: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"doubling", "grow"} {
		start := time.Now()
		// 16 times the limit: far beyond what the guard lets through, and
		// reached in seconds by a call without one. The time bound only
		// keeps a stuck call from hanging the package; it is above the
		// script's one-minute timeout, since a growing table under -race
		// on a loaded machine took over 40 s to reach its limit once.
		_, stopped, err := invokeBounded(m, "mem.lua", fn, 16*32<<20, 90*time.Second)
		if stopped != "" {
			t.Errorf("%s: stopped by %s after %v (%v), not by its MemoryLimit", fn, stopped, time.Since(start), err)
			continue
		}
		// The doubling string may be refused by the concatenation's own
		// check first (TestConcatLimit).
		if !errors.Is(err, ErrMemoryLimit) && (fn != "doubling" || !errors.Is(err, ErrStringLimit)) {
			t.Errorf("%s: %v after %v, want ErrMemoryLimit", fn, err, time.Since(start))
		}
		if took := time.Since(start); took > 40*time.Second {
			t.Errorf("%s: stopped after %v", fn, took)
		}
	}
	if _, err := m.Invoke(context.Background(), "mem.lua", "rep", 1, 64<<20); !errors.Is(err, ErrStringLimit) {
		t.Errorf("string.rep over the memory limit: %v, want ErrStringLimit", err)
	}
	if res, err := m.Invoke(context.Background(), "mem.lua", "small", 1); err != nil || res[0] != int64(1000) {
		t.Errorf("small: %v, %v", res, err)
	}
}

// TestConcatLimit: a concatenation with .. whose result would be over the
// call's string limit (its MemoryLimit here) fails with ErrStringLimit
// before it is built, so a doubling string never allocates past the limit
// (the watchdog alone let one more doubling through); one up to
// the limit is built.
func TestConcatLimit(t *testing.T) {
	// No heap budget and a long timeout: only the concat check can stop it.
	m := newTestManager(t, Options{WatchdogInterval: time.Hour, HeapLimit: NoHeapLimit, MaxStringSize: -1})
	// doubling stops by itself at 64 MiB: without the check it returns.
	src := `function doubling() local s = "x" while #s < 64 * 1048576 do s = s .. s end return #s end
function three(n) local s = string.rep("x", n) local t = s .. "-" .. s return #t end
function number(n) local s = string.rep("x", n) return #(s .. 1) end`
	if err := m.Load("concat.lua", src, ScriptConfig{Timeout: time.Hour, MemoryLimit: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Invoke(context.Background(), "concat.lua", "doubling", 0)
	var ce *CallError
	if !errors.Is(err, ErrStringLimit) || !errors.As(err, &ce) || !strings.Contains(ce.Msg, "a string of 16777216 bytes") {
		t.Fatalf("doubling: %v, want ErrStringLimit refusing the 16 MiB string", err)
	}
	if res, err := m.Invoke(context.Background(), "concat.lua", "three", 1, 4<<20-1); err != nil || res[0] != int64(8<<20-1) {
		t.Errorf("three parts up to the limit: %v, %v", res, err)
	}
	if _, err := m.Invoke(context.Background(), "concat.lua", "three", 1, 4<<20); !errors.Is(err, ErrStringLimit) {
		t.Errorf("three parts over the limit: %v, want ErrStringLimit", err)
	}
	if _, err := m.Invoke(context.Background(), "concat.lua", "number", 1, 8<<20); !errors.Is(err, ErrStringLimit) {
		t.Errorf("a string and a number over the limit: %v, want ErrStringLimit", err)
	}
}
