package compute

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicedb/sluice/luajit"
	"github.com/sluicedb/sluice/luavm"
)

// scriptEngines are the engines the host modules are tested on: LuaJIT
// too in a binary built with -tags luajit (scripts/test runs both).
func scriptEngines() []string {
	if luajit.Available {
		return []string{EngineGopherLua, EngineLuaJIT}
	}
	return []string{EngineGopherLua}
}

// syncBuffer is a log destination the engines' goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the JSON log lines written so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("a log line is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// hostProcessor is a processor of one column on engine whose lines go, as
// JSON, to the returned buffer (the server's logger carries the table).
func hostProcessor(t *testing.T, engine, yaml string, opts Options) (*Processor, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("table", "events")
	opts.Table = "events"
	yaml = strings.ReplaceAll(yaml, "ENGINE", engine)
	return newProcessor(t, yaml, opts), buf
}

func TestScriptLogLine(t *testing.T) {
	for _, engine := range scriptEngines() {
		t.Run(engine, func(t *testing.T) {
			// The filter drops the first row: the column runs on the rows
			// left, and its log line still names the input row.
			p, buf := hostProcessor(t, engine, `
filters:
  - name: no_skip
    engine: ENGINE
    func: "function main(row) return row.user ~= 'skip' end"
computed:
  - name: tagged
    type: string
    engine: ENGINE
    func: |
      local log = require("log")
      function main(row)
        if row.level == "bad" then
          log.warn("odd row", {user = row.user, n = 2})
        end
        return row.user
      end
`, Options{})
			rows := rowsOf(t, `{"user":"skip"}`, `{"user":"a"}`, `{"user":"b","level":"bad"}`, `{"user":"c"}`)
			ctx := WithRowSource(context.Background(), func(i int) []slog.Attr {
				return []slog.Attr{slog.String("file", "in.jsonl"), slog.Int("line", 10+i)}
			})
			if _, err := p.Process(ctx, rows); err != nil {
				t.Fatal(err)
			}
			lines := buf.lines(t)
			if len(lines) != 1 {
				t.Fatalf("%d log lines, want 1: %v", len(lines), lines)
			}
			l := lines[0]
			src, _ := l["source"].(map[string]any)
			fields, _ := l["fields"].(map[string]any)
			if l["msg"] != "odd row" || l["level"] != "WARN" || l["table"] != "events" || l["column"] != "tagged" ||
				l["script"] != "tagged" || l["line"] != float64(4) || src["file"] != "in.jsonl" || src["line"] != float64(12) ||
				fields["user"] != "b" || fields["n"] != float64(2) {
				t.Fatalf("log line %v", l)
			}
		})
	}
}

// TestScriptLogRateLimit: a script logging every row of 100k rows writes
// no more lines than its bucket allows (burst, then rate a second), and the
// rest are counted and told in "suppressed N lines" lines.
func TestScriptLogRateLimit(t *testing.T) {
	const n, rate, burst = 100_000, 20, 10
	for _, engine := range scriptEngines() {
		t.Run(engine, func(t *testing.T) {
			p, buf := hostProcessor(t, engine, fmt.Sprintf(`
computed:
  - name: noisy
    type: int64
    engine: ENGINE
    log_rate: %d
    log_burst: %d
    func: |
      local log = require("log")
      function main(row)
        log.info("row", {i = row.i})
        return row.i
      end
`, rate, burst), Options{})
			start := time.Now()
			for b := 0; b < n/1000; b++ {
				rows := make([]map[string]any, 1000)
				for i := range rows {
					rows[i] = map[string]any{"i": int64(b*1000 + i)}
				}
				if _, err := p.Process(context.Background(), rows); err != nil {
					t.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			p.Close() // reports what is still suppressed
			written, suppressed := 0, 0
			for _, l := range buf.lines(t) {
				switch {
				case l["msg"] == "row":
					written++
				case strings.HasPrefix(fmt.Sprint(l["msg"]), "script log: suppressed"):
					suppressed += int(l["suppressed"].(float64))
				default:
					t.Fatalf("unexpected line %v", l)
				}
			}
			bound := burst + int(rate*elapsed.Seconds()) + 1
			t.Logf("%d rows in %v: %d lines written (bound %d), %d suppressed", n, elapsed, written, bound, suppressed)
			if written > bound {
				t.Fatalf("%d lines written, over the bound %d", written, bound)
			}
			if written+suppressed != n {
				t.Fatalf("%d written + %d suppressed, want %d", written, suppressed, n)
			}
		})
	}
}

func TestScriptConfigParams(t *testing.T) {
	for _, engine := range scriptEngines() {
		t.Run(engine, func(t *testing.T) {
			p, _ := hostProcessor(t, engine, `
computed:
  - name: out
    type: string
    engine: ENGINE
    params: {region: eu-west, limit: 42, ratio: 0.5, strict: true}
    func: |
      local sluice = require("sluice")
      function main(row)
        return table.concat({sluice.config("region"), tostring(sluice.config("limit") + 1),
          tostring(sluice.config("ratio")), tostring(sluice.config("strict")), tostring(sluice.config("nope"))}, ",")
      end
`, Options{})
			b, err := p.Process(context.Background(), rowsOf(t, `{"x":1}`))
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Rows[0]["out"]; got != "eu-west,43,0.5,true,nil" {
				t.Fatalf("out = %v (errors %v)", got, b.Errors)
			}
		})
	}
}

// gather is the metric families of reg by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily)
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string)
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestScriptStats(t *testing.T) {
	for _, engine := range scriptEngines() {
		t.Run(engine, func(t *testing.T) {
			sm := luavm.NewScriptMetrics()
			reg := prometheus.NewRegistry()
			reg.MustRegister(sm)
			p, _ := hostProcessor(t, engine, `
filters:
  - name: seen
    engine: ENGINE
    func: |
      local stats = require("stats")
      function main(row)
        stats.inc("rows")
        stats.inc("bytes", #row.user)
        stats.inc("by_user", 1, {user = row.user})
        stats.observe("size", #row.user)
        stats.set("last_i", row.i)
        return true
      end
`, Options{ScriptMetrics: sm})
			var rows []map[string]any
			for i := range 10 {
				rows = append(rows, map[string]any{"user": fmt.Sprintf("u%d", i%4), "i": int64(i)})
			}
			if _, err := p.Process(context.Background(), rows); err != nil {
				t.Fatal(err)
			}
			fams := gather(t, reg)
			counters := map[string]float64{}
			for _, m := range fams["sluice_script_counter_total"].GetMetric() {
				l := labelsOf(m)
				if l["table"] != "events" || l["column"] != "seen" {
					t.Fatalf("labels %v", l)
				}
				counters[l["name"]+"/"+l["user"]] = m.GetCounter().GetValue()
			}
			want := map[string]float64{"rows/": 10, "bytes/": 20, "by_user/u0": 3, "by_user/u1": 3, "by_user/u2": 2, "by_user/u3": 2}
			if fmt.Sprint(counters) != fmt.Sprint(want) {
				t.Fatalf("counters %v, want %v", counters, want)
			}
			h := fams["sluice_script_histogram"].GetMetric()
			if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 10 || h[0].GetHistogram().GetSampleSum() != 20 {
				t.Fatalf("histogram %v", h)
			}
			g := fams["sluice_script_gauge"].GetMetric()
			if len(g) != 1 || g[0].GetGauge().GetValue() != 9 {
				t.Fatalf("gauge %v", g)
			}
			if d := fams["sluice_script_series_dropped_total"].GetMetric(); len(d) != 1 || d[0].GetCounter().GetValue() != 0 {
				t.Fatalf("dropped %v", d)
			}
		})
	}
}

// TestScriptSeriesCap: a script labelling by an unbounded value makes no
// more series than max_series; the calls beyond are counted (each of the
// 500 values is met twice in the batch), the rows go on.
func TestScriptSeriesCap(t *testing.T) {
	const n, maxSeries = 1000, 3
	for _, engine := range scriptEngines() {
		t.Run(engine, func(t *testing.T) {
			sm := luavm.NewScriptMetrics()
			reg := prometheus.NewRegistry()
			reg.MustRegister(sm)
			p, _ := hostProcessor(t, engine, fmt.Sprintf(`
computed:
  - name: id
    type: int64
    engine: ENGINE
    max_series: %d
    func: |
      local stats = require("stats")
      function main(row)
        stats.inc("by_id", 1, {id = row.i %% 500})
        return row.i
      end
`, maxSeries), Options{ScriptMetrics: sm})
			rows := make([]map[string]any, n)
			for i := range rows {
				rows[i] = map[string]any{"i": int64(i)}
			}
			b, err := p.Process(context.Background(), rows)
			if err != nil || len(b.Errors) > 0 || len(b.Rows) != n {
				t.Fatalf("%d rows, errors %v %v", len(b.Rows), err, b.Errors)
			}
			fams := gather(t, reg)
			series := fams["sluice_script_counter_total"].GetMetric()
			counted := 0.0
			for _, m := range series {
				counted += m.GetCounter().GetValue()
			}
			dropped := fams["sluice_script_series_dropped_total"].GetMetric()[0].GetCounter().GetValue()
			if len(series) != maxSeries || counted != 2*maxSeries || dropped != n-2*maxSeries {
				t.Fatalf("%d series counting %v, %v calls dropped; want %d, %d, %d", len(series), counted, dropped, maxSeries, 2*maxSeries, n-2*maxSeries)
			}
		})
	}
}

// TestScriptHostErrorsNameTheLine: a mistaken log or stats call fails the
// row with an error naming the script and the line of the call.
func TestScriptHostErrorsNameTheLine(t *testing.T) {
	for _, engine := range scriptEngines() {
		t.Run(engine, func(t *testing.T) {
			p, _ := hostProcessor(t, engine, `
computed:
  - name: a
    type: string
    engine: ENGINE
    nullable: true
    func: |
      local log, stats = require("log"), require("stats")
      function main(row)
        if row.k == 1 then log.info({}) end
        if row.k == 2 then stats.inc("no spaces allowed") end
        if row.k == 3 then stats.inc("ok", 1, {table = "x"}) end
        return "fine"
      end
`, Options{})
			b, err := p.Process(context.Background(), rowsOf(t, `{"k":1}`, `{"k":2}`, `{"k":3}`, `{"k":4}`))
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Errors) != 3 {
				t.Fatalf("errors %v", b.Errors)
			}
			for i, e := range b.Errors {
				var ce *luavm.CallError
				if !asCallError(e, &ce) || ce.Line != 3+i || ce.Script != "a" {
					t.Fatalf("error %d: %v (%#v), want one at line %d of a", i, e, ce, 3+i)
				}
			}
			if b.Rows[3]["a"] != "fine" {
				t.Fatalf("row 4: %v", b.Rows[3])
			}
		})
	}
}

func asCallError(err error, ce **luavm.CallError) bool { return errors.As(err, ce) }

// TestScriptLogBudgetNotLostToQuietBatches: batches whose rows log nothing
// leave the log budget whole (LuaJIT takes a batch's share before it runs
// and gives back what it did not use).
func TestScriptLogBudgetNotLostToQuietBatches(t *testing.T) {
	for _, engine := range scriptEngines() {
		t.Run(engine, func(t *testing.T) {
			p, buf := hostProcessor(t, engine, `
computed:
  - name: n
    type: int64
    engine: ENGINE
    log_rate: 0.000001
    log_burst: 5
    func: |
      local log = require("log")
      function main(row)
        if row.loud then log.info("loud") end
        return 1
      end
`, Options{})
			for range 20 {
				if _, err := p.Process(context.Background(), rowsOf(t, `{"loud":false}`, `{"loud":false}`)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := p.Process(context.Background(), rowsOf(t, `{"loud":true}`, `{"loud":true}`, `{"loud":true}`, `{"loud":true}`, `{"loud":true}`, `{"loud":true}`)); err != nil {
				t.Fatal(err)
			}
			loud := 0
			for _, l := range buf.lines(t) {
				if l["msg"] == "loud" {
					loud++
				}
			}
			if loud != 5 {
				t.Fatalf("%d lines written, want the burst, 5", loud)
			}
		})
	}
}
