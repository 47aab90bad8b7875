package luavm

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteMetrics writes Stats in the Prometheus text exposition format (no
// client library needed): one family per counter or gauge, labelled by
// script.
func (m *Manager) WriteMetrics(w io.Writer) error {
	stats := m.Stats()
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
	family("luavm_calls_total", "counter", "Lua function calls.", u(func(s ScriptStats) uint64 { return s.Calls }))
	family("luavm_errors_total", "counter", "Lua calls that failed.", u(func(s ScriptStats) uint64 { return s.Errors }))
	family("luavm_timeouts_total", "counter", "Calls stopped at their deadline.", u(func(s ScriptStats) uint64 { return s.Timeouts }))
	family("luavm_vms_core", "gauge", "Resident VMs alive.", i(func(s ScriptStats) int { return s.VMsCore }))
	family("luavm_vms_noncore", "gauge", "VMs alive beyond the core.", i(func(s ScriptStats) int { return s.VMsNonCore }))
	family("luavm_vms_idle", "gauge", "VMs idle in the pool.", i(func(s ScriptStats) int { return s.VMsIdle }))
	family("luavm_vms_created_total", "counter", "VMs created.", u(func(s ScriptStats) uint64 { return s.VMsCreated }))
	family("luavm_vms_closed_total", "counter", "VMs closed.", u(func(s ScriptStats) uint64 { return s.VMsClosed }))
	family("luavm_waits_total", "counter", "Acquisitions that waited for a VM.", u(func(s ScriptStats) uint64 { return s.Waits }))
	family("luavm_wait_seconds_total", "counter", "Time spent waiting for a VM.", func(s ScriptStats) string {
		return strconv.FormatFloat(s.WaitTime.Seconds(), 'g', -1, 64)
	})
	family("luavm_pool_exhausted_total", "counter", "Waits that ended in ErrPoolExhausted.", u(func(s ScriptStats) uint64 { return s.Exhausted }))
	return bw.Flush()
}

// quoteLabel quotes a label value as the text format wants: backslash,
// double quote and newline escaped.
func quoteLabel(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}
