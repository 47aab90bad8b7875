//go:build luajit && cgo

package luajit

/*
#include "host.h"
*/
import "C"

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicedb/sluice/luavm"
)

// watchdog is one goroutine per Engine that stops rows running past their
// script's timeout: every tick it looks at the row index each busy VM's
// host writes (sl_batch.cur), and when the same row of the same batch has
// not moved for the timeout it writes the stop word, which the checks
// compiled into the script's loops read (see docs/luajit.md). A batch costs
// it no allocation and no timer: begin and end are a few atomic stores and
// an uncontended lock.
type watchdog struct {
	mu   sync.Mutex
	vms  map[*vm]struct{}
	tick time.Duration // the smallest tick of the scripts' VMs
	stop chan struct{}
	done chan struct{}
}

// add registers a VM (before its first batch), starting the goroutine.
func (w *watchdog) add(v *vm) {
	tick := max(v.s.timeout/8, time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.vms == nil {
		w.vms = make(map[*vm]struct{})
	}
	w.vms[v] = struct{}{}
	if w.tick == 0 || tick < w.tick {
		w.tick = tick
	}
	if w.stop == nil {
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		go w.run(w.stop, w.done)
	}
}

// remove unregisters a VM; after it returns the watchdog no longer reads
// the VM's batch memory.
func (w *watchdog) remove(v *vm) {
	w.mu.Lock()
	delete(w.vms, v)
	w.mu.Unlock()
}

// close stops the goroutine and waits for it.
func (w *watchdog) close() {
	w.mu.Lock()
	stop, done := w.stop, w.done
	w.stop, w.done = nil, nil
	w.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (w *watchdog) run(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(w.currentTick())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			w.scan(now)
			t.Reset(w.currentTick())
		}
	}
}

func (w *watchdog) currentTick() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tick
}

func (w *watchdog) scan(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for v := range w.vms {
		seq := v.seq.Load()
		cur := atomic.LoadInt32((*int32)(unsafe.Pointer(&v.b.cur)))
		if seq != v.lastSeq || cur != v.lastCur {
			v.lastSeq, v.lastCur, v.since = seq, cur, now
			continue
		}
		if now.Sub(v.since) < v.s.timeout {
			continue
		}
		v.mu.Lock()
		if v.busy && v.seq.Load() == seq {
			atomic.StoreInt32((*int32)(unsafe.Pointer(&v.b.stop)), cur+1)
			if v.stopped.IsZero() || v.stopSeq != seq || v.stopCur != cur {
				v.stopped, v.stopSeq, v.stopCur = now, seq, cur
			}
		}
		v.mu.Unlock()
	}
}

// begin marks a batch running (after prepare reset the stop word); a
// cancellable ctx stops it at once when done.
func (v *vm) begin(ctx context.Context) {
	seq := v.seq.Add(1)
	v.mu.Lock()
	v.busy = true
	v.mu.Unlock()
	if ctx.Done() != nil {
		v.stopCtx = context.AfterFunc(ctx, func() {
			v.mu.Lock()
			if v.busy && v.seq.Load() == seq {
				atomic.StoreInt32((*int32)(unsafe.Pointer(&v.b.stop)), -1)
			}
			v.mu.Unlock()
		})
	}
}

// end marks the batch over: no stop word is written for it afterwards.
func (v *vm) end() {
	if v.stopCtx != nil {
		v.stopCtx()
		v.stopCtx = nil
	}
	v.mu.Lock()
	v.busy = false
	v.stopped = time.Time{}
	v.mu.Unlock()
}

// StuckAfter is how long a row told to stop may go on before Stuck reports
// it (luavm.DefaultStuckAfter).
var StuckAfter = luavm.DefaultStuckAfter

// Stuck returns the rows the watchdog told to stop at least StuckAfter ago
// that still run (a C function that runs on, os.execute...), longest first:
// what a server shows in /readyz and /metrics.
func (e *Engine) Stuck() []luavm.StuckCall {
	w := &e.watchdog
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	var out []luavm.StuckCall
	for v := range w.vms {
		v.mu.Lock()
		stuck := v.busy && !v.stopped.IsZero() && v.seq.Load() == v.stopSeq &&
			atomic.LoadInt32((*int32)(unsafe.Pointer(&v.b.cur))) == v.stopCur && now.Sub(v.stopped) >= StuckAfter
		since := v.stopped
		v.mu.Unlock()
		if stuck {
			out = append(out, luavm.StuckCall{Script: v.s.id, Source: v.s.name, For: now.Sub(since)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].For > out[j].For })
	return out
}
