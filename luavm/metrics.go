package luavm

import "github.com/prometheus/client_golang/prometheus"

// Collector returns a prometheus.Collector of Stats, labelled by script:
// it reads the counters at each scrape (nothing is copied between scrapes),
// for whoever owns the registry (the server's /metrics) to register.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

// statFamily is one family of Stats: its description and how to read it.
type statFamily struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(ScriptStats) float64
}

func newStatFamily(name, help string, kind prometheus.ValueType, value func(ScriptStats) float64) statFamily {
	return statFamily{prometheus.NewDesc(name, help, []string{"script"}, nil), kind, value}
}

var statFamilies = []statFamily{
	newStatFamily("luavm_calls_total", "Lua function calls.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Calls) }),
	newStatFamily("luavm_errors_total", "Lua calls that failed.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Errors) }),
	newStatFamily("luavm_timeouts_total", "Calls stopped at their deadline.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Timeouts) }),
	newStatFamily("luavm_vms_core", "Resident VMs alive.", prometheus.GaugeValue, func(s ScriptStats) float64 { return float64(s.VMsCore) }),
	newStatFamily("luavm_vms_noncore", "VMs alive beyond the core.", prometheus.GaugeValue, func(s ScriptStats) float64 { return float64(s.VMsNonCore) }),
	newStatFamily("luavm_vms_idle", "VMs idle in the pool.", prometheus.GaugeValue, func(s ScriptStats) float64 { return float64(s.VMsIdle) }),
	newStatFamily("luavm_vms_created_total", "VMs created.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.VMsCreated) }),
	newStatFamily("luavm_vms_closed_total", "VMs closed.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.VMsClosed) }),
	newStatFamily("luavm_waits_total", "Acquisitions that waited for a VM.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Waits) }),
	newStatFamily("luavm_wait_seconds_total", "Time spent waiting for a VM.", prometheus.CounterValue, func(s ScriptStats) float64 { return s.WaitTime.Seconds() }),
	newStatFamily("luavm_pool_exhausted_total", "Waits that ended in ErrPoolExhausted.", prometheus.CounterValue, func(s ScriptStats) float64 { return float64(s.Exhausted) }),
}

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range statFamilies {
		ch <- f.desc
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	stats := c.m.Stats()
	for _, f := range statFamilies {
		for _, s := range stats {
			ch <- prometheus.MustNewConstMetric(f.desc, f.kind, f.value(s), s.Script)
		}
	}
}
