package luavm

import "github.com/prometheus/client_golang/prometheus"

// Collector returns a prometheus.Collector of Stats, labelled by script:
// it reads the counters at each scrape (nothing is copied between scrapes),
// for whoever owns the registry (the server's /metrics) to register.
func (m *Manager) Collector() prometheus.Collector {
	return ScriptCollector(statFamilies, m.Stats, func(s ScriptStats) string { return s.Script })
}

// StatFamily is one metric family of an engine's per-script stats S: its
// description (one label, script) and how to read its value from S.
type StatFamily[S any] struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(S) float64
}

// NewStatFamily describes a family of S's stats labelled by script.
func NewStatFamily[S any](name, help string, kind prometheus.ValueType, value func(S) float64) StatFamily[S] {
	return StatFamily[S]{prometheus.NewDesc(name, help, []string{"script"}, nil), kind, value}
}

// ScriptCollector is a prometheus.Collector of families over the stats
// that stats returns at each scrape, one series per script (named by
// script; stats must give each script once). Both engines export their
// pools through it.
func ScriptCollector[S any](families []StatFamily[S], stats func() []S, script func(S) string) prometheus.Collector {
	return scriptCollector[S]{families, stats, script}
}

type scriptCollector[S any] struct {
	families []StatFamily[S]
	stats    func() []S
	script   func(S) string
}

func (c scriptCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families {
		ch <- f.desc
	}
}

func (c scriptCollector[S]) Collect(ch chan<- prometheus.Metric) {
	stats := c.stats()
	for _, f := range c.families {
		for _, s := range stats {
			ch <- prometheus.MustNewConstMetric(f.desc, f.kind, f.value(s), c.script(s))
		}
	}
}

var statFamilies = []StatFamily[ScriptStats]{
	NewStatFamily("luavm_calls_total", "Lua function calls.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Calls) }),
	NewStatFamily("luavm_errors_total", "Lua calls that failed.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Errors) }),
	NewStatFamily("luavm_timeouts_total", "Calls stopped at their deadline.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Timeouts) }),
	NewStatFamily("luavm_vms_core", "Resident VMs alive.", prometheus.GaugeValue, func(s ScriptStats) float64 { return float64(s.VMsCore) }),
	NewStatFamily("luavm_vms_noncore", "VMs alive beyond the core.", prometheus.GaugeValue, func(s ScriptStats) float64 { return float64(s.VMsNonCore) }),
	NewStatFamily("luavm_vms_idle", "VMs idle in the pool.", prometheus.GaugeValue, func(s ScriptStats) float64 { return float64(s.VMsIdle) }),
	NewStatFamily("luavm_vms_created_total", "VMs created.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.VMsCreated) }),
	NewStatFamily("luavm_vms_closed_total", "VMs closed.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.VMsClosed) }),
	NewStatFamily("luavm_waits_total", "Acquisitions that waited for a VM.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Waits) }),
	NewStatFamily("luavm_wait_seconds_total", "Time spent waiting for a VM.", prometheus.CounterValue, func(s ScriptStats) float64 { return s.WaitTime.Seconds() }),
	NewStatFamily("luavm_pool_exhausted_total", "Waits that ended in ErrPoolExhausted.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Exhausted) }),
}
