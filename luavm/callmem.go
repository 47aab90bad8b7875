package luavm

import (
	"runtime"
	"sync/atomic"
)

// callHeap is the watchdog's view of the memory of running calls.
// gopher-lua allocates on the Go heap with no per-VM count, so a call's
// allocations are read as the growth of the process's live heap since the
// call was first seen running; a call here is one Lua call (armSeq moves at
// each arm and each Call, Call1 or Invoke: a row in compute), and only one
// that has lasted a watchdog tick is judged. A call that grew it by more than twice its
// script's MemoryLimit is stopped (ErrMemoryLimit) at once; one between
// once and twice its limit only if a collection finished since confirms
// it (the growth may be garbage, its own or other goroutines'), and the
// watchdog starts that collection in the background so that timeouts are
// not delayed by it. Calls running at the same time share the growth, so a
// call may be charged for another's; the strings the builtins build are
// counted exactly (limitStrings). Touched by the watchdog goroutine only,
// but for the collection's results.
type callHeap struct {
	marks map[*VM]heapMark
	next  map[*VM]heapMark
	over  []overCall
	// gcRunning: a confirming collection is under way; gcAt (monotonic ns,
	// when it started) and gcHeap (the live heap right after it) are its
	// result once it is done.
	gcRunning     atomic.Bool
	gcAt, gcHeap  atomic.Int64
	lastGCStarted int64
}

// heapMark is the live heap when the call armed as seq was first seen, at
// monotonic time at.
type heapMark struct {
	seq  uint64
	heap uint64
	at   int64
}

type overCall struct {
	vm       *VM
	deadline int64
	limit    uint64
	mark     heapMark
	growth   uint64
}

// minGCInterval spaces the collections that confirm a call's growth.
const minGCInterval = int64(50e6) // 50 ms

// begin starts a scan.
func (c *callHeap) begin() {
	if c.marks == nil {
		c.marks, c.next = map[*VM]heapMark{}, map[*VM]heapMark{}
	}
	clear(c.next)
	c.over = c.over[:0]
}

// see records the armed call of vm (deadline d) at time t; heap returns
// the live heap, read once per scan.
func (c *callHeap) see(vm *VM, d, t int64, limit int64, heap func() uint64) {
	if limit <= 0 {
		return
	}
	seq := vm.armSeq.Load()
	mark, ok := c.marks[vm]
	if !ok || mark.seq != seq {
		mark = heapMark{seq: seq, heap: heap(), at: t}
	} else if !c.gcRunning.Load() && c.gcAt.Load() >= mark.at {
		// The mark was read with garbage in the heap: a collection since
		// the call started shows a lower floor (which includes what the
		// call keeps, so the call is charged less, never more).
		if h := uint64(c.gcHeap.Load()); h < mark.heap {
			mark.heap = h
		}
	}
	c.next[vm] = mark
	// Only a call seen on an earlier tick too, i.e. one Lua call (a row)
	// that has run for a tick at least: the growth of the heap during a
	// short call is mostly other goroutines'.
	if h := heap(); mark.at < t && h > mark.heap && h-mark.heap > uint64(limit) {
		c.over = append(c.over, overCall{vm: vm, deadline: d, limit: uint64(limit), mark: mark, growth: h - mark.heap})
	}
}

// end finishes a scan at time t: it stops the calls over their limit as
// said above, and reports whether any was.
func (c *callHeap) end(t int64) bool {
	c.marks, c.next = c.next, c.marks
	if len(c.over) == 0 {
		return false
	}
	gcDone := !c.gcRunning.Load()
	gcAt, gcHeap := c.gcAt.Load(), uint64(c.gcHeap.Load())
	stopped, unconfirmed := false, false
	for _, o := range c.over {
		stop := o.growth > 2*o.limit
		if !stop && gcDone && gcAt >= o.mark.at {
			stop = gcHeap > o.mark.heap && gcHeap-o.mark.heap > o.limit
		} else if !stop {
			unconfirmed = true
		}
		if stop && o.vm.deadline.CompareAndSwap(o.deadline, deadlineFired) {
			o.vm.ctx.fire(ErrMemoryLimit)
			stopped = true
		}
	}
	clear(c.over)
	c.over = c.over[:0]
	if unconfirmed && gcDone && t-c.lastGCStarted >= minGCInterval {
		c.lastGCStarted = t
		c.gcRunning.Store(true)
		go func() {
			runtime.GC()
			c.gcHeap.Store(int64(liveHeap()))
			c.gcAt.Store(t)
			c.gcRunning.Store(false)
		}()
	}
	return stopped
}

// armSeq numbers the arms of a VM, so that the watchdog tells one call
// from the next.
type armSeq = atomic.Uint64
