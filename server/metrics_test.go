package server

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// TestMetricsParseAsPrometheusText: /metrics is written by hand (server,
// luavm, the cold tier), so it is read back with Prometheus's own parser
// (prometheus/common/expfmt), the one a scraper uses: every family parses,
// appears once with its HELP and TYPE, and the counters a test drove carry
// the values they should, labels unescaped. A table compacts into Iceberg
// so the cold tier's families are in the page too.
func TestMetricsParseAsPrometheusText(t *testing.T) {
	wh := t.TempDir()
	cfg := strings.Replace(testConfig, "    on_bad_line: reject\n", "    on_bad_line: reject\n"+
		"    compact:\n      after: 1h\n      iceberg:\n        warehouse: "+wh+"\n", 1)
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
	// family whose TYPE came after it, and a second HELP or TYPE of a name.
	var parser expfmt.TextParser
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
	for _, name := range []string{"sluice_compaction_lag_seconds", "sluice_table_size_bytes", "luavm_calls_total"} {
		if _, ok := families[name]; !ok {
			t.Errorf("family %s missing", name)
		}
	}
}
