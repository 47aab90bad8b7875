package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/luajit"
)

// TestScriptHostModules runs examples/host-modules on a real server: one
// script serving two tables with their own params (the second on LuaJIT
// when the binary has it), rows ingested over HTTP, then the script's
// series read on /metrics with Prometheus's parser and its log lines read
// as the server's JSON log: each with the table, column, script, line and
// the row's origin and input line, and no more of them than the rate limit
// lets through.
func TestScriptHostModules(t *testing.T) {
	cfg, err := config.Load("../examples/host-modules/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if luajit.Available {
		cfg.Tables[1].Computed[0].Engine = "luajit"
	}
	buf := &bytes.Buffer{}
	logs := &lockedWriter{w: buf}
	s, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	url := "http://" + ln.Addr().String()
	waitReady(t, url)

	const n = 1000 // api: ms = row number, slow from 250 on; batch: every other row slow
	start := time.Now()
	for _, tb := range []struct {
		name string
		ms   func(i int) int
	}{{"api", func(i int) int { return i }}, {"batch", func(i int) int { return (i % 2) * 60000 }}} {
		var body strings.Builder
		for i := range n {
			fmt.Fprintf(&body, `{"path":"/p%d","ms":%d}`+"\n", i, tb.ms(i))
		}
		if code, res, _ := post(t, url+"/v1/tables/"+tb.name+"/rows", "application/x-ndjson", strings.NewReader(body.String())); code != 200 {
			t.Fatalf("ingest %s: %d %v", tb.name, code, res)
		}
	}
	elapsed := time.Since(start)

	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	value := func(family string, labels map[string]string) float64 {
		t.Helper()
	metrics:
		for _, m := range families[family].GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if len(have) != len(labels) {
				continue
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			switch families[family].GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
		t.Fatalf("%s%v: no such series on /metrics", family, labels)
		return 0
	}
	for _, c := range []struct {
		table, region string
		slow          float64
	}{{"api", "eu-west", n - 250}, {"batch", "us-east", n / 2}} {
		at := func(name string, more ...string) map[string]string {
			l := map[string]string{"table": c.table, "column": "speed", "name": name}
			for i := 0; i+1 < len(more); i += 2 {
				l[more[i]] = more[i+1]
			}
			return l
		}
		if got := value("sluice_script_counter_total", at("requests", "region", c.region)); got != n {
			t.Errorf("%s: requests = %v, want %d", c.table, got, n)
		}
		if got := value("sluice_script_counter_total", at("slow")); got != c.slow {
			t.Errorf("%s: slow = %v, want %v", c.table, got, c.slow)
		}
		if got := value("sluice_script_histogram", at("latency_seconds")); got != n {
			t.Errorf("%s: latency_seconds has %v samples, want %d", c.table, got, n)
		}
		if got := value("sluice_script_series_dropped_total", map[string]string{"table": c.table, "column": "speed"}); got != 0 {
			t.Errorf("%s: %v series dropped", c.table, got)
		}
	}

	// The log: lines of the script, within each table's rate limit.
	const script = "classify.lua" // as the config names it
	written := map[string]int{}
	logs.mu.Lock()
	text := append([]byte(nil), buf.Bytes()...)
	logs.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("a log line is not JSON: %s", sc.Text())
		}
		if l["msg"] != "slow request" {
			continue
		}
		tb, _ := l["table"].(string)
		written[tb]++
		src, _ := l["source"].(map[string]any)
		fields, _ := l["fields"].(map[string]any)
		if l["column"] != "speed" || l["script"] != script || l["line"] != float64(16) || l["level"] != "WARN" ||
			!strings.HasPrefix(fmt.Sprint(src["origin"]), "http ") || src["line"] == nil || fields["path"] == nil {
			t.Fatalf("log line %v", l)
		}
		// the row's input line is the one of the path the script saw
		if fields["path"] != fmt.Sprintf("/p%d", int(src["line"].(float64))-1) {
			t.Fatalf("log line %v: source line and row differ", l)
		}
	}
	for _, c := range []struct {
		table       string
		rate, burst float64
	}{{"api", 5, 20}, {"batch", 1, 5}} {
		bound := int(c.burst + c.rate*elapsed.Seconds() + 1)
		if written[c.table] == 0 || written[c.table] > bound {
			t.Errorf("%s: %d slow lines logged, want 1 to %d (rate limit)", c.table, written[c.table], bound)
		}
	}
}
