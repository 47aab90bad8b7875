//go:build luajit && cgo

package luajit

import (
	"context"
	"testing"
	"time"
)

// TestStuckReportsRowsThatDoNotStop: a row blocked in os.execute past its
// timeout is reported by Stuck (after StuckAfter), and forgotten once the
// batch ends.
func TestStuckReportsRowsThatDoNotStop(t *testing.T) {
	defer func(d time.Duration) { StuckAfter = d }(StuckAfter)
	StuckAfter = 200 * time.Millisecond
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.Load("blocked@1", `function main(row) os.execute("sleep 2") return 1 end`, Config{SourceName: "col", Timeout: 100 * time.Millisecond, Allow: []string{"os"}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, errs := make([]any, 1), make([]error, 1)
		_ = s.Values(context.Background(), []map[string]any{{}}, out, errs)
	}()
	deadline := time.Now().Add(5 * time.Second)
	var found bool
	for time.Now().Before(deadline) && !found {
		for _, c := range e.Stuck() {
			if c.Script == "blocked@1" && c.Source == "col" && c.For >= StuckAfter {
				found = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !found {
		t.Fatalf("Stuck() never reported the blocked row: %+v", e.Stuck())
	}
	<-done
	if stuck := e.Stuck(); len(stuck) != 0 {
		t.Fatalf("Stuck() after the batch ended = %+v", stuck)
	}
}
