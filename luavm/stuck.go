package luavm

import (
	"sort"
	"sync"
	"time"
)

// DefaultStuckAfter is Options.StuckAfter when 0.
const DefaultStuckAfter = 5 * time.Second

// StuckCall is a call that was told to stop (its deadline passed, its
// context was cancelled or its memory went over the limit) and is still
// running: something in it does not reach the interpreter's checks (a Go
// function that blocks, a library call that runs on). What a server shows
// in /readyz and /metrics, and names when its shutdown gives up.
type StuckCall struct {
	Script string        // the name it was loaded under
	Source string        // what errors call it (ScriptConfig.SourceName)
	For    time.Duration // since it was told to stop
}

// stuckCalls remembers since when each stopped call has been seen still
// running; the watchdog updates it every tick. REQUIRES mu.
type stuckCalls struct {
	mu    sync.Mutex
	since map[*VM]stuckEntry
}

type stuckEntry struct {
	at     int64 // monotonic ns when first seen stopped
	script *script
}

// update records the VMs the watchdog found stopped but not yet returned
// at time t; the others have returned (or were closed) and are forgotten.
func (s *stuckCalls) update(t int64, fired []firedVM) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(fired) == 0 {
		clear(s.since)
		return
	}
	next := make(map[*VM]stuckEntry, len(fired))
	for _, f := range fired {
		e, ok := s.since[f.vm]
		if !ok {
			e = stuckEntry{at: t, script: f.script}
		}
		next[f.vm] = e
	}
	s.since = next
}

// firedVM is a VM whose call was told to stop, seen by a watchdog scan.
type firedVM struct {
	vm     *VM
	script *script
}

// Stuck returns the calls that were told to stop at least
// Options.StuckAfter ago and are still running, longest first.
func (m *Manager) Stuck() []StuckCall {
	m.stuck.mu.Lock()
	defer m.stuck.mu.Unlock()
	t := now()
	var out []StuckCall
	for _, e := range m.stuck.since {
		if d := time.Duration(t - e.at); d >= m.opts.StuckAfter {
			out = append(out, StuckCall{Script: e.script.name, Source: e.script.cfg.sourceName(e.script.name), For: d})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].For > out[j].For })
	return out
}
