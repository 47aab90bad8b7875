//go:build luajit && cgo

package luajit

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// counters of one script, updated with atomics.
type counters struct {
	batches, rows, errors, timeouts, memoryStops atomic.Uint64
	vmsCreated, vmsClosed, waits                 atomic.Uint64
}

// ScriptStats are the counters of one loaded script (SourceName).
type ScriptStats struct {
	Script                string
	Batches, Rows         uint64 // crossings into LuaJIT, rows run
	Errors, Timeouts      uint64 // rows that failed; of them, stopped at the timeout
	MemoryStops           uint64 // rows stopped at the memory limit
	VMsAlive, VMsIdle     int
	VMsCreated, VMsClosed uint64
	Waits                 uint64 // acquisitions that waited for a VM
}

// Stats returns the counters of every loaded script, sorted by name.
func (e *Engine) Stats() []ScriptStats {
	e.mu.Lock()
	scripts := make([]*Script, 0, len(e.scripts))
	for s := range e.scripts {
		scripts = append(scripts, s)
	}
	e.mu.Unlock()
	out := make([]ScriptStats, 0, len(scripts))
	for _, s := range scripts {
		c := &s.stats
		out = append(out, ScriptStats{
			Script: s.name, Batches: c.batches.Load(), Rows: c.rows.Load(), Errors: c.errors.Load(),
			Timeouts: c.timeouts.Load(), MemoryStops: c.memoryStops.Load(),
			VMsAlive: len(s.slots), VMsIdle: len(s.idle),
			VMsCreated: c.vmsCreated.Load(), VMsClosed: c.vmsClosed.Load(), Waits: c.waits.Load(),
		})
	}
	slices.SortFunc(out, func(a, b ScriptStats) int { return strings.Compare(a.Script, b.Script) })
	return out
}

// WriteMetrics writes Stats in the Prometheus text format, labelled by
// script, as luavm's WriteMetrics does for gopher-lua.
func (e *Engine) WriteMetrics(w io.Writer) error {
	stats := e.Stats()
	bw := bufio.NewWriter(w)
	family := func(name, kind, help string, value func(ScriptStats) string) {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
		for _, s := range stats {
			fmt.Fprintf(bw, "%s{script=%s} %s\n", name, quoteLabel(s.Script), value(s))
		}
	}
	u := func(f func(ScriptStats) uint64) func(ScriptStats) string {
		return func(s ScriptStats) string { return strconv.FormatUint(f(s), 10) }
	}
	i := func(f func(ScriptStats) int) func(ScriptStats) string {
		return func(s ScriptStats) string { return strconv.Itoa(f(s)) }
	}
	family("luajit_batches_total", "counter", "Batches run on LuaJIT (one cgo crossing each).", u(func(s ScriptStats) uint64 { return s.Batches }))
	family("luajit_rows_total", "counter", "Rows run on LuaJIT.", u(func(s ScriptStats) uint64 { return s.Rows }))
	family("luajit_errors_total", "counter", "Rows that failed.", u(func(s ScriptStats) uint64 { return s.Errors }))
	family("luajit_timeouts_total", "counter", "Rows stopped at their timeout.", u(func(s ScriptStats) uint64 { return s.Timeouts }))
	family("luajit_memory_stops_total", "counter", "Rows stopped at the VM memory limit.", u(func(s ScriptStats) uint64 { return s.MemoryStops }))
	family("luajit_vms_alive", "gauge", "VMs alive.", i(func(s ScriptStats) int { return s.VMsAlive }))
	family("luajit_vms_idle", "gauge", "VMs idle in the pool.", i(func(s ScriptStats) int { return s.VMsIdle }))
	family("luajit_vms_created_total", "counter", "VMs created.", u(func(s ScriptStats) uint64 { return s.VMsCreated }))
	family("luajit_vms_closed_total", "counter", "VMs closed.", u(func(s ScriptStats) uint64 { return s.VMsClosed }))
	family("luajit_waits_total", "counter", "Acquisitions that waited for a VM.", u(func(s ScriptStats) uint64 { return s.Waits }))
	return bw.Flush()
}

func quoteLabel(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}
