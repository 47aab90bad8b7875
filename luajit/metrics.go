//go:build luajit && cgo

package luajit

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedb/sluice/luavm"
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

// Collector returns a prometheus.Collector of Stats, labelled by script,
// as luavm's Manager.Collector is for gopher-lua: it reads the counters at
// each scrape, for whoever owns the registry (the server's /metrics).
func (e *Engine) Collector() prometheus.Collector {
	return luavm.ScriptCollector(statFamilies, func() []ScriptStats { return mergeByScript(e.Stats()) },
		func(s ScriptStats) string { return s.Script })
}

var statFamilies = []luavm.StatFamily[ScriptStats]{
	luavm.NewStatFamily("luajit_batches_total", "Batches run on LuaJIT (one cgo crossing each).", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Batches) }),
	luavm.NewStatFamily("luajit_rows_total", "Rows run on LuaJIT.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Rows) }),
	luavm.NewStatFamily("luajit_errors_total", "Rows that failed.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Errors) }),
	luavm.NewStatFamily("luajit_timeouts_total", "Rows stopped at their timeout.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Timeouts) }),
	luavm.NewStatFamily("luajit_memory_stops_total", "Rows stopped at the VM memory limit.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.MemoryStops) }),
	luavm.NewStatFamily("luajit_vms_alive", "VMs alive.", prometheus.GaugeValue, func(s ScriptStats) float64 { return float64(s.VMsAlive) }),
	luavm.NewStatFamily("luajit_vms_idle", "VMs idle in the pool.", prometheus.GaugeValue, func(s ScriptStats) float64 { return float64(s.VMsIdle) }),
	luavm.NewStatFamily("luajit_vms_created_total", "VMs created.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.VMsCreated) }),
	luavm.NewStatFamily("luajit_vms_closed_total", "VMs closed.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.VMsClosed) }),
	luavm.NewStatFamily("luajit_waits_total", "Acquisitions that waited for a VM.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Waits) }),
}

// mergeByScript sums the stats of scripts loaded under one name (two tables
// running the same file, a reload's old and new version): a registry takes
// one series per label value. stats is sorted by name.
func mergeByScript(stats []ScriptStats) []ScriptStats {
	out := stats[:0]
	for _, s := range stats {
		if n := len(out); n > 0 && out[n-1].Script == s.Script {
			m := &out[n-1]
			m.Batches += s.Batches
			m.Rows += s.Rows
			m.Errors += s.Errors
			m.Timeouts += s.Timeouts
			m.MemoryStops += s.MemoryStops
			m.VMsAlive += s.VMsAlive
			m.VMsIdle += s.VMsIdle
			m.VMsCreated += s.VMsCreated
			m.VMsClosed += s.VMsClosed
			m.Waits += s.Waits
			continue
		}
		out = append(out, s)
	}
	return out
}
