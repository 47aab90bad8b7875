package server

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// coldHealth is what a table's cold tier runs say of it: whether its
// commits fail (and since when, how often in a row, with what error), when
// it last committed, and how far the Iceberg table is behind the store.
// The server keeps it, not the tier: every run goes through compactCold,
// and a run that fails before it reaches the catalog (the recovery of a
// crashed run, the S3 upload) counts as much as a refused commit.
type coldHealth struct {
	mu sync.Mutex
	// continuous: the tier commits by sequence (every row stored before a
	// run starts is committed by it), else by event-time watermark.
	continuous bool
	failures   int       // consecutive failed runs; 0: the last run succeeded
	since      time.Time // the first failure of the streak
	lastErr    string
	lastCommit time.Time // the end of the last successful run (zero: none since the start)
	// clean is the latest time the Iceberg table is known to hold every
	// row of the store stored before it (continuous) or every row with an
	// event time before it (by watermark); zero: unknown.
	clean time.Time
	// cleanRows is the table's appended-row count at clean (-1: unknown):
	// while it has not grown, nothing is uncommitted and clean moves on.
	cleanRows int64
	// runStart and runRows are clean and cleanRows of the run in progress.
	runStart time.Time
	runRows  int64
	// logged is when a failure was last logged at ERROR (failed).
	logged time.Time
}

// failureLogEvery is how often a streak of failed runs is logged at ERROR
// after its first failure: a run every compact.interval (seconds) would
// otherwise bury every other line, and /readyz and the metrics say it at
// any time.
const failureLogEvery = time.Minute

func newColdHealth(continuous bool, started, compactedThrough time.Time) *coldHealth {
	h := &coldHealth{continuous: continuous, cleanRows: -1}
	if continuous {
		// Rows stored before the start may still be uncommitted: counted
		// from the start until the first run succeeds.
		h.clean = started
	} else {
		h.clean = compactedThrough
	}
	return h
}

// start records a run starting at now, with rows appended to the table.
func (h *coldHealth) start(now time.Time, rows int64) {
	h.mu.Lock()
	h.runStart, h.runRows = now, rows
	h.mu.Unlock()
}

// succeeded records the run started last as succeeded at now; watermark
// is what it committed up to (time mode). It returns the failed runs the
// success ends (0: none).
func (h *coldHealth) succeeded(now, watermark time.Time) (ended int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ended = h.failures
	h.failures, h.since, h.lastErr = 0, time.Time{}, ""
	h.lastCommit = now
	if h.continuous {
		h.clean, h.cleanRows = h.runStart, h.runRows
	} else if watermark.After(h.clean) {
		h.clean = watermark
	}
	return ended
}

// failed records a failed run; log says whether to log it at ERROR (the
// streak's first failure, then one each failureLogEvery).
func (h *coldHealth) failed(now time.Time, err error) (failures int, log bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures == 0 {
		h.since = now
		h.logged = time.Time{}
	}
	h.failures++
	// One line: /readyz shows it as it is.
	h.lastErr = strings.Join(strings.Fields(err.Error()), " ")
	if h.logged.IsZero() || now.Sub(h.logged) >= failureLogEvery {
		h.logged = now
		return h.failures, true
	}
	return h.failures, false
}

// lag is the cold lag at now, the table having rows appended so far: how
// long the oldest row not yet in the Iceberg table has waited, at most (a
// bound, exact to the last run or look that found nothing waiting).
// ok is false when it is not known (by watermark, before the first run).
func (h *coldHealth) lag(now time.Time, rows int64) (lag time.Duration, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.continuous && h.cleanRows >= 0 && rows == h.cleanRows {
		h.clean = now // nothing stored since the last commit's start
		return 0, true
	}
	if h.clean.IsZero() {
		return 0, false
	}
	return max(now.Sub(h.clean), 0), true
}

// ColdStatus is a table's cold tier health, in GET /v1/tables/{table}.
type ColdStatus struct {
	// Degraded: the last run failed (commits fail); it clears with the
	// next run that succeeds.
	Degraded bool `json:"degraded"`
	// ConsecutiveFailures counts the runs failed in a row.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// FailingSince is the first failure of the streak.
	FailingSince *time.Time `json:"failing_since,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	// LastCommit is the end of the last run that succeeded (since this
	// node started).
	LastCommit *time.Time `json:"last_commit,omitempty"`
	// LagSeconds is the cold lag: the age of the oldest row not yet in
	// the Iceberg table, at most (docs/operations/health.md).
	LagSeconds *float64 `json:"lag_seconds,omitempty"`
}

func (h *coldHealth) status(now time.Time, rows int64) ColdStatus {
	lag, lagOK := h.lag(now, rows)
	h.mu.Lock()
	defer h.mu.Unlock()
	st := ColdStatus{Degraded: h.failures > 0, ConsecutiveFailures: h.failures, LastError: h.lastErr}
	if h.failures > 0 {
		since := h.since.UTC()
		st.FailingSince = &since
	}
	if !h.lastCommit.IsZero() {
		last := h.lastCommit.UTC()
		st.LastCommit = &last
	}
	if lagOK {
		seconds := lag.Round(time.Millisecond).Seconds()
		st.LagSeconds = &seconds
	}
	return st
}

// readyLine is the table's line in /readyz when its commits fail, else "".
func (st ColdStatus) readyLine(table string) string {
	if !st.Degraded {
		return ""
	}
	return fmt.Sprintf("degraded: table %q cold tier: commits failing since %s (%d consecutive failures): %s\n",
		table, st.FailingSince.Format(time.RFC3339), st.ConsecutiveFailures, st.LastError)
}
