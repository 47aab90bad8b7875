package table

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestConcurrentAppendsQueriesAndClose runs appends (some widening the
// schema) and queries at once, then Close while they run: every Append
// that returned nil is in the store after reopening, and operations after
// Close fail with ErrClosed.
func TestConcurrentAppendsQueriesAndClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	tb, err := s.Table(Config{Name: "c", HashBy: "w", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		acks = map[int64]bool{}
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 30 {
				id := int64(w*1000 + n)
				var v any = id
				if n == 10 {
					v = "widened" // this worker widens v to string mid-stream
				}
				rows := []Row{{"w": w, "id": id, "v": v, "ts": t0}, {"w": w, "id": id, "v": v, "ts": t0}}
				err := tb.Append(ctx, rows)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acks[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() { // metadata writers race with the appends
		defer wg.Done()
		for i := range 20 {
			if err := tb.SetCompactedThrough(ctx, t0.Add(time.Duration(i)*time.Hour)); errors.Is(err, ErrClosed) {
				return
			} else if err != nil {
				t.Error(err)
				return
			}
			if _, err := s.Table(Config{Name: "c", HashBy: "w", SortBy: "ts", TTL: time.Duration(i+1) * 1000 * time.Hour}); errors.Is(err, ErrClosed) {
				return
			} else if err != nil {
				t.Error(err)
				return
			}
			_, _ = tb.Expire(ctx)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			err := tb.Query(ctx, Query{}, func(r Row) error { return nil })
			if errors.Is(err, ErrClosed) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for { // close mid-stream, once some appends are acknowledged
		if time.Now().After(deadline) {
			t.Fatal("appends made no progress")
		}
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= 20 {
			break
		}
		runtime.Gosched()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	s = openStore(t, dir)
	defer s.Close()
	tb, err = s.Table(Config{Name: "c", HashBy: "w", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	count := map[int64]int{}
	for _, r := range collect(t, tb, Query{Columns: []string{"id"}}) {
		count[r["id"].(int64)]++
	}
	for id := range acks {
		if count[id] != 2 {
			t.Fatalf("acknowledged append %d has %d of 2 rows", id, count[id])
		}
	}
	for id, c := range count {
		if c != 2 || !acks[id] {
			t.Fatalf("append %d: %d rows, acknowledged %v", id, c, acks[id])
		}
	}
	t.Logf("%d appends acknowledged before Close", len(acks))
}
