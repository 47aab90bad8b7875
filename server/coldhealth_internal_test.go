package server

import (
	"errors"
	"testing"
	"time"
)

// TestColdLagBound: the cold lag by the rules docs/operations/health.md
// gives, on a clock the test moves. Continuous: from the node's start
// until a run succeeds, then from the start of the last run that
// succeeded while rows came since, 0 while none did. By watermark: now
// minus the last committed watermark, unknown before one.
func TestColdLagBound(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	check := func(h *coldHealth, now time.Time, rows int64, want time.Duration, wantOK bool) {
		t.Helper()
		if lag, ok := h.lag(now, rows); lag != want || ok != wantOK {
			t.Errorf("lag at %v with %d rows: %v %v, want %v %v", now.Sub(t0), rows, lag, ok, want, wantOK)
		}
	}

	h := newColdHealth(true, t0, time.Time{})
	check(h, at(3), 0, 3*time.Second, true) // rows of a former run may wait
	h.start(at(4), 10)
	h.succeeded(at(5), at(4))
	check(h, at(6), 10, 0, true)             // nothing stored since the run's start
	check(h, at(9), 12, 3*time.Second, true) // stored after the look at 6 s
	h.start(at(10), 12)
	h.failed(at(11), errors.New("refused"))
	h.start(at(20), 15)
	h.failed(at(21), errors.New("refused"))
	check(h, at(30), 15, 24*time.Second, true) // still from the look at 6 s
	h.start(at(31), 15)
	h.succeeded(at(32), at(31))
	check(h, at(33), 15, 0, true)

	h = newColdHealth(false, t0, time.Time{})
	check(h, at(3), 5, 0, false)
	h.start(at(4), 5)
	h.succeeded(at(5), t0.Add(-time.Hour))
	check(h, at(5), 5, time.Hour+5*time.Second, true)
	h.start(at(6), 5)
	h.succeeded(at(7), t0.Add(-2*time.Hour)) // an older watermark does not move it back
	check(h, at(7), 5, time.Hour+7*time.Second, true)
}
