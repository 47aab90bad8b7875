package luavm

import (
	"context"
	"errors"
	"testing"
	"time"
)

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
		_, err := m.Invoke(context.Background(), "mem.lua", fn, 0)
		if !errors.Is(err, ErrMemoryLimit) {
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
