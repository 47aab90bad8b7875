package server

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/luajit"
	"github.com/sluicedb/sluice/luavm"
)

// TestMetricsParseAsPrometheusText: /metrics is read back with Prometheus's
// own parser (prometheus/common/expfmt), the one a scraper uses: every
// family parses, appears once with its HELP and TYPE, and the counters a
// test drove carry the values they should, labels unescaped. The families
// are those of docs/reference/metrics.md's table, with its types and labels: the
// server has a computed column and a filter, compacts into Iceberg, has a
// Kafka source (at a port nobody listens on: its counters exist all the
// same) and, built with LuaJIT, a LuaJIT column, so every family has series
// but the lag of partitions held and the age of stuck calls.
func TestMetricsParseAsPrometheusText(t *testing.T) {
	documented := documentedMetrics(t)
	// The scripts' own series: TestScriptHostModules reads them.
	notHere := []string{"sluice_source_lag_messages", "sluice_compute_stuck_seconds", "sluice_script_counter_total", "sluice_script_gauge", "sluice_script_histogram"}
	if !luajit.Available {
		for name := range documented {
			if strings.HasPrefix(name, "luajit_") {
				notHere = append(notHere, name)
			}
		}
	}
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	wh := t.TempDir()
	cfg := strings.Replace(testConfig, "    on_bad_line: reject\n", "    on_bad_line: reject\n"+
		"    compact:\n      after: 1h\n      remove: true\n      iceberg:\n        warehouse: "+wh+"\n", 1)
	cfg = strings.Replace(cfg, "  - name: loose\n", fmt.Sprintf("  - name: loose\n    sources:\n      - kafka: {brokers: [\"127.0.0.1:%d\"], topics: [t], group: g}\n", port), 1)
	if luajit.Available {
		cfg = strings.Replace(cfg, "        type: int64\n", "        type: int64\n        engine: luajit\n", 1)
	}
	s := startServer(t, cfg, "")
	nd := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}
{"user":"test","ts":"2024-05-01T11:30:00Z","n":3}
{"user":"bob","ts":"2024-05-02T11:00:00Z","n":2}
`
	if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd)); code != 200 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	if code, res, _ := post(t, s.url+"/v1/tables/events/compact", "application/json", nil); code != 200 || res["rows"] != float64(2) {
		t.Fatalf("compact: %d %v", code, res)
	}

	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if f := expfmt.ResponseFormat(resp.Header); f != expfmt.FmtText {
		t.Errorf("Content-Type %q is not the text format (%s)", resp.Header.Get("Content-Type"), f)
	}
	// The parser fails on a malformed line, a bad escape, a sample of a
	// family whose TYPE came after it, a second HELP or TYPE of a name, and
	// (legacy validation) a name outside Prometheus's classic character set.
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse as the Prometheus text format: %v", err)
	}
	for name, f := range families {
		if f.GetHelp() == "" || f.Type == nil {
			t.Errorf("%s: no HELP or TYPE", name)
		}
	}

	value := func(name string, labels map[string]string) (float64, bool) {
		f, ok := families[name]
		if !ok {
			return 0, false
		}
	metrics:
		for _, m := range f.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			default:
				return m.GetUntyped().GetValue(), true
			}
		}
		return 0, false
	}
	events := map[string]string{"table": "events"}
	for _, want := range []struct {
		name   string
		labels map[string]string
		kind   dto.MetricType
		value  float64
	}{
		{"sluice_ingest_rows_total", events, dto.MetricType_COUNTER, 3},
		{"sluice_ingest_rows_accepted_total", events, dto.MetricType_COUNTER, 2},
		{"sluice_ingest_rows_filtered_total", events, dto.MetricType_COUNTER, 1},
		{"sluice_compute_calls_total", map[string]string{"table": "events", "column": "double", "loader": "lua", "filter": "false"}, dto.MetricType_COUNTER, 2},
		{"sluice_compute_calls_total", map[string]string{"table": "events", "column": "not_test", "loader": "lua", "filter": "true"}, dto.MetricType_COUNTER, 3},
		{"sluice_coldtier_rows_total", events, dto.MetricType_COUNTER, 2},
		{"sluice_coldtier_files_total", events, dto.MetricType_COUNTER, 2},
		{"sluice_ready", nil, dto.MetricType_GAUGE, 1},
		{"sluice_ingest_throttled_total", nil, dto.MetricType_COUNTER, 0},
	} {
		got, ok := value(want.name, want.labels)
		switch {
		case !ok:
			t.Errorf("%s%v: missing", want.name, want.labels)
		case families[want.name].GetType() != want.kind:
			t.Errorf("%s: type %v, want %v", want.name, families[want.name].GetType(), want.kind)
		case got != want.value:
			t.Errorf("%s%v = %v, want %v", want.name, want.labels, got, want.value)
		}
	}

	// The page against docs/reference/metrics.md: the same families, types and labels.
	for name, doc := range documented {
		f, ok := families[name]
		switch {
		case slices.Contains(notHere, name):
			if ok {
				t.Errorf("%s: in the page, though this test does not make it (a stuck call, a partition held, a LuaJIT script)", name)
			}
		case !ok:
			t.Errorf("%s: in docs/reference/metrics.md's table, not in /metrics", name)
		case strings.ToLower(f.GetType().String()) != doc.kind:
			t.Errorf("%s: type %s, docs/reference/metrics.md says %s", name, f.GetType(), doc.kind)
		default:
			for _, m := range f.Metric {
				var labels []string
				for _, l := range m.Label {
					labels = append(labels, l.GetName())
				}
				slices.Sort(labels)
				if !slices.Equal(labels, doc.labels) {
					t.Errorf("%s: labels %v, docs/reference/metrics.md says %v", name, labels, doc.labels)
					break
				}
			}
		}
	}
	for name := range families {
		if _, ok := documented[name]; !ok {
			t.Errorf("%s: in /metrics, not in docs/reference/metrics.md's table", name)
		}
	}
}

// documentedMetric is a row of docs/reference/metrics.md's table of families.
type documentedMetric struct {
	kind   string   // counter, gauge
	labels []string // sorted
}

// documentedMetrics reads the table of docs/reference/metrics.md's "## Families":
// `| names | type | labels | what |`.
func documentedMetrics(t *testing.T) map[string]documentedMetric {
	t.Helper()
	doc, err := os.ReadFile("../docs/reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Families\n")
	if !ok {
		t.Fatal(`docs/reference/metrics.md has no "## Families" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	code := regexp.MustCompile("`([a-z_]+)`")
	names := func(cell string) []string {
		var out []string
		for _, m := range code.FindAllStringSubmatch(cell, -1) {
			out = append(out, m[1])
		}
		return out
	}
	out := map[string]documentedMetric{}
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|") // "", names, type, labels, what, "\n"
		if !strings.HasPrefix(line, "| `") || len(cells) < 5 {
			continue
		}
		labels := names(cells[3])
		slices.Sort(labels)
		for _, name := range names(cells[1]) {
			if _, dup := out[name]; dup {
				t.Errorf("docs/reference/metrics.md lists %s twice", name)
			}
			out[name] = documentedMetric{kind: strings.TrimSpace(cells[2]), labels: labels}
		}
	}
	if len(out) < 50 {
		t.Fatalf("docs/reference/metrics.md's table of metrics has %d families: not read right", len(out))
	}
	return out
}

// TestStuckSeries: stuck calls are counted per table, and two stuck calls of
// one script give one sluice_compute_stuck_seconds series, the oldest's age
// (a second series with the same labels would be refused by the registry).
func TestStuckSeries(t *testing.T) {
	call := func(source string, age time.Duration, tables ...string) stuckCall {
		return stuckCall{StuckCall: luavm.StuckCall{Script: source + "@1", Source: source, For: age}, Tables: tables}
	}
	perTable, oldest := stuckSeries([]stuckCall{
		call("m", 9*time.Second, "events"),
		call("m", 6*time.Second, "events"),
		call("shared.lua", 7*time.Second, "a", "b"),
	})
	if want := map[string]int{"events": 2, "a": 1, "b": 1}; !maps.Equal(perTable, want) {
		t.Errorf("per table %v, want %v", perTable, want)
	}
	if want := map[stuckKey]float64{{"events", "m"}: 9, {"a,b", "shared.lua"}: 7}; !maps.Equal(oldest, want) {
		t.Errorf("oldest %v, want %v", oldest, want)
	}
}
