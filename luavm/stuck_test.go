package luavm

import (
	"context"
	"errors"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// TestStuckReportsCallsThatDoNotStop: a call blocked in a Go function past
// its deadline is reported by Stuck (after StuckAfter), and forgotten once
// it returns.
func TestStuckReportsCallsThatDoNotStop(t *testing.T) {
	m := newTestManager(t, Options{WatchdogInterval: 5 * time.Millisecond, StuckAfter: 100 * time.Millisecond})
	release := make(chan struct{})
	m.Register("block", func(L *lua.LState) int { <-release; return 0 })
	if err := m.Load("b.lua", `function main() block() return 1 end`, ScriptConfig{Timeout: 50 * time.Millisecond, SourceName: "col"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Invoke(context.Background(), "b.lua", "main", 1)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	var stuck []StuckCall
	for time.Now().Before(deadline) {
		if stuck = m.Stuck(); len(stuck) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(stuck) != 1 || stuck[0].Script != "b.lua" || stuck[0].Source != "col" || stuck[0].For < 100*time.Millisecond {
		t.Fatalf("Stuck() = %+v", stuck)
	}
	close(release)
	if err := <-done; !errors.Is(err, ErrTimeout) {
		t.Fatalf("the blocked call: %v, want ErrTimeout", err)
	}
	time.Sleep(50 * time.Millisecond)
	if stuck := m.Stuck(); len(stuck) != 0 {
		t.Fatalf("Stuck() after the call returned = %+v", stuck)
	}
}
