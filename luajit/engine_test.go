//go:build luajit && cgo

package luajit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/sluicedb/sluice/internal/jsonw"
	"github.com/sluicedb/sluice/luavm"
)

func load(t testing.TB, code string, cfg Config) *Script {
	t.Helper()
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if cfg.SourceName == "" {
		cfg.SourceName = "test.lua"
	}
	s, err := e.Load("test", code, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t testing.TB, s *Script, rows ...map[string]any) ([]any, []error) {
	t.Helper()
	out := make([]any, len(rows))
	errs := make([]error, len(rows))
	if err := s.Values(context.Background(), rows, out, errs); err != nil {
		t.Fatal(err)
	}
	return out, errs
}

func decodeRow(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				m[k] = i
			} else if f, err := n.Float64(); err == nil {
				m[k] = f
			}
		}
	}
	return m
}

func TestReadFieldsAndTypes(t *testing.T) {
	s := load(t, `function main(row) return row.s .. "|" .. tostring(row.i + 1) .. "|" .. tostring(row.f) .. "|" .. tostring(row.b) .. "|" .. tostring(row.missing) .. "|" .. tostring(row.n) .. "|" .. row.obj.a .. "|" .. #row.arr end`, Config{})
	rows := []map[string]any{
		{"s": "x", "i": int64(41), "f": 1.5, "b": true, "n": nil, "obj": map[string]any{"a": "A"}, "arr": []any{int64(1), int64(2)}},
		{"s": "y", "i": int64(1), "f": -2.25, "b": false, "obj": map[string]any{"a": "B"}, "arr": []any{}},
	}
	out, errs := run(t, s, rows...)
	want := []any{"x|42|1.5|true|nil|nil|A|2", "y|2|-2.25|false|nil|nil|B|0"}
	for i := range out {
		if errs[i] != nil || out[i] != want[i] {
			t.Errorf("row %d: %v %v, want %v", i, out[i], errs[i], want[i])
		}
	}
}

func TestResultTypes(t *testing.T) {
	s := load(t, `function main(row)
  local k = row.k
  if k == "n" then return 3 elseif k == "f" then return 2.5 elseif k == "b" then return false
  elseif k == "nil" then return nil elseif k == "t" then return {a = 1, b = {1, 2, "x"}} elseif k == "row" then return row end
  return "s"
end`, Config{})
	rows := []map[string]any{{"k": "n"}, {"k": "f"}, {"k": "b"}, {"k": "nil"}, {"k": "t"}, {"k": "row"}, {"k": "s"}}
	out, errs := run(t, s, rows...)
	for i, e := range errs {
		if e != nil {
			t.Fatalf("row %d: %v", i, e)
		}
	}
	if out[0] != int64(3) || out[1] != 2.5 || out[2] != false || out[3] != nil || out[6] != "s" {
		t.Errorf("scalars: %#v", out)
	}
	got, _ := json.Marshal(out[4])
	if string(got) != `{"a":1,"b":[1,2,"x"]}` {
		t.Errorf("table result: %s", got)
	}
	if m, ok := out[5].(map[string]any); !ok || m["k"] != "row" {
		t.Errorf("row result: %#v", out[5])
	}
}

// The trim script: deletes written back to the Go row, json.encode(row) the
// same bytes as encoding/json on the row.
func TestTrimMatchesGo(t *testing.T) {
	s := load(t, `local json = require("json")
local keys = {"key1", "key2", "key3", "key4", "key5"}
function main(row)
  for _, key in ipairs(keys) do row[key] = nil end
  row.added = "new \"quoted\"\n"
  row.city = 7
  return json.encode(row)
end`, Config{})
	const event = `{"id":"userName","key1":"11111","key2":22222,"key3":"33333","key4":44.5,"key5":null,"city":"cityValue","uuid":"99999","loc":"12.676689147949219, 101.20865195568277","addtion":"999999999999999999999999999999999","time":1700000000,"key10":"10000000","esc":"a\u2028b<\u0001>","f":1e-7,"big":1e21,"neg":-0.000123}`
	row := decodeRow(t, event)
	want := maps.Clone(row)
	for _, k := range []string{"key1", "key2", "key3", "key4", "key5"} {
		delete(want, k)
	}
	want["added"] = "new \"quoted\"\n"
	want["city"] = int64(7)
	wantJSON, err := jsonw.AppendValue(nil, want)
	if err != nil {
		t.Fatal(err)
	}
	out, errs := run(t, s, row, maps.Clone(row))
	for i := range out {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if out[i] != string(wantJSON) {
			t.Errorf("row %d:\n got %s\nwant %s", i, out[i], wantJSON)
		}
	}
	if !maps.Equal(row, want) {
		t.Errorf("row after the script: %v, want %v", row, want)
	}
}

func TestErrorsNameScriptAndLine(t *testing.T) {
	s := load(t, "function main(row)\n  local x = nil\n  return x.y\nend", Config{SourceName: "scripts/bad.lua"})
	_, errs := run(t, s, map[string]any{"a": int64(1)})
	var ce *luavm.CallError
	if !errors.As(errs[0], &ce) {
		t.Fatalf("error %v is not a CallError", errs[0])
	}
	if ce.Script != "scripts/bad.lua" || ce.Line != 3 || !strings.Contains(ce.Traceback, "scripts/bad.lua:3") {
		t.Errorf("error %+v\n%s", ce, ce.Traceback)
	}
	_, err := (&Engine{scripts: map[*Script]struct{}{}}).Load("x", "function main(row)\n return row.\nend", Config{SourceName: "c.lua"})
	var cpe *luavm.CompileError
	if !errors.As(err, &cpe) || cpe.Script != "c.lua" || cpe.Line != 3 {
		t.Errorf("compile error %#v", err)
	}
}

func TestTimeoutStopsTracesAndLoops(t *testing.T) {
	for name, body := range map[string]string{
		"while true":   "while true do end",
		"numeric loop": "local x = 0 for i = 1, 1e15 do x = x + i % 7 end return x",
		"repeat":       "local x = 0 repeat x = x + 1 until x < 0",
		"goto":         "local x = 0 ::top:: x = x + 1 goto top",
		"pcall":        "while true do pcall(function() while true do end end) end",
		"recursion":    "local function f(n) return f(n + 1) + 1 end return f(1)",
		"tail calls":   "local function f(n) return f(n + 1) end return f(1)",
	} {
		t.Run(name, func(t *testing.T) {
			const limit = 200 * time.Millisecond
			s := load(t, "function main(row)\n if row.fast then return 1 end\n "+body+"\nend", Config{Timeout: limit})
			start := time.Now()
			out, errs := run(t, s, map[string]any{"fast": true}, map[string]any{}, map[string]any{"fast": true})
			took := time.Since(start)
			if name == "recursion" {
				if errs[1] == nil || !strings.Contains(errs[1].Error(), "overflow") && !errors.Is(errs[1], luavm.ErrTimeout) {
					t.Errorf("recursion: %v", errs[1])
				}
			} else if !errors.Is(errs[1], luavm.ErrTimeout) {
				t.Errorf("row 1: %v, want a timeout", errs[1])
			}
			if errs[0] != nil || errs[2] != nil || out[0] != int64(1) || out[2] != int64(1) {
				t.Errorf("the other rows: %v %v", out, errs)
			}
			// 3x the limit and half a second: loose for a loaded machine,
			// and a watchdog a couple of seconds late fails.
			if bound := 3*limit + 500*time.Millisecond; took > bound {
				t.Errorf("stopped after %v, over %v for a limit of %v", took, bound, limit)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	s := load(t, `function main(row)
  if row.small then return "ok" end
  local t = {}
  for i = 1, 1e9 do t[i] = {i} end
end`, Config{MemoryLimit: 32 << 20, Timeout: 20 * time.Second})
	out, errs := run(t, s, map[string]any{}, map[string]any{"small": true})
	if !errors.Is(errs[0], luavm.ErrMemoryLimit) {
		t.Errorf("row 0: %v, want the memory limit", errs[0])
	}
	if errs[1] != nil || out[1] != "ok" {
		t.Errorf("row 1: %v %v", out[1], errs[1])
	}
	s2 := load(t, `function main(row) return #string.rep("x", 1e10) end`, Config{MemoryLimit: 32 << 20})
	_, errs = run(t, s2, map[string]any{})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "memory limit") {
		t.Errorf("string.rep: %v", errs[0])
	}
}

func TestSandbox(t *testing.T) {
	for _, expr := range []string{"ffi", "io", "os", "debug", "load", "loadstring", "dofile", "package", "getfenv", "setfenv", "jit", "module", "newproxy"} {
		s := load(t, "function main(row) return type("+expr+") end", Config{})
		out, errs := run(t, s, map[string]any{})
		if errs[0] != nil || out[0] != "nil" {
			t.Errorf("%s is reachable: %v %v", expr, out[0], errs[0])
		}
	}
	for _, code := range []string{
		`return require("ffi")`,
		`return getmetatable("").__index.dump`,
		`string.upper = nil`,
		`return setmetatable(row, {})`,
		`return require("jit")`,
	} {
		s := load(t, "function main(row) "+code+" end", Config{})
		out, errs := run(t, s, map[string]any{})
		if errs[0] == nil {
			t.Errorf("%s: no error (got %v)", code, out[0])
		}
	}
	s := load(t, `function main(row) return require("ffi") ~= nil end`, Config{Allow: []string{"ffi"}})
	if out, errs := run(t, s, map[string]any{}); errs[0] != nil || out[0] != true {
		t.Errorf("allowed ffi: %v %v", out[0], errs[0])
	}
}

func TestGlobalsIsolated(t *testing.T) {
	s := load(t, `counter = 0
function main(row) counter = counter + 1; leaked = (leaked or 0) + 1; return counter * 10 + leaked end`, Config{PoolSize: 1})
	out, errs := run(t, s, map[string]any{}, map[string]any{})
	for i := range out {
		if errs[i] != nil || out[i] != int64(11) {
			t.Errorf("row %d: %v %v, want 11", i, out[i], errs[i])
		}
	}
}

// rawset on _G does not pass through __newindex: still cleared.
func TestRawsetGlobalsIsolated(t *testing.T) {
	s := load(t, `function main(row) local v = (rawget(_G, "raw") or 0) + 1; rawset(_G, "raw", v); return v end`, Config{PoolSize: 1})
	out, errs := run(t, s, map[string]any{}, map[string]any{})
	for i := range out {
		if errs[i] != nil || out[i] != int64(1) {
			t.Errorf("row %d: %v %v, want 1", i, out[i], errs[i])
		}
	}
}

func TestNoFunction(t *testing.T) {
	e, _ := New()
	defer e.Close()
	if _, err := e.Load("x", "x = 1", Config{}); !errors.Is(err, luavm.ErrNoFunction) {
		t.Errorf("got %v", err)
	}
	const limit = 200 * time.Millisecond
	start := time.Now()
	if _, err := e.Load("x", "while true do end", Config{Timeout: limit}); !errors.Is(err, luavm.ErrTimeout) {
		t.Errorf("main chunk loop: %v", err)
	}
	// 3x the limit and half a second.
	if took, bound := time.Since(start), 3*limit+500*time.Millisecond; took > bound {
		t.Errorf("main chunk loop stopped after %v, over %v", took, bound)
	}
}

func TestJSONDecodeAndSluiceModule(t *testing.T) {
	s := load(t, `local json, sluice = require("json"), require("sluice")
function main(row)
  local d = json.decode(row.j)
  sluice.delete(row, {"j"})
  return sluice.encode(row, {"drop"}) .. "|" .. d.a[2] .. "|" .. tostring(d.n == json.null) .. "|" .. d.u
end`, Config{})
	row := map[string]any{"j": `{"a":[1,"two"],"n":null,"u":"\u00e9\ud83d\ude00"}`, "drop": "x", "keep": int64(5)}
	out, errs := run(t, s, row)
	if errs[0] != nil || out[0] != `{"keep":5}|two|true|é😀` {
		t.Errorf("got %v %v", out[0], errs[0])
	}
	if _, ok := row["j"]; ok {
		t.Errorf("j not deleted: %v", row)
	}
}

// Rows of one batch with different keys: pairs and json.encode(row) see
// each row's own keys (the lay-out skips rows whose keys it already has).
func TestHeterogeneousRows(t *testing.T) {
	s := load(t, `local json = require("json")
function main(row)
  local ks = {}
  for k in pairs(row) do ks[#ks + 1] = k end
  return table.concat(ks, ",") .. " " .. json.encode(row)
end`, Config{})
	rows := []map[string]any{
		{"a": int64(1), "b": int64(2)},
		{"a": int64(1), "c": int64(3)},
		{"b": "x"},
		{"a": int64(1), "b": int64(2), "c": nil, "d": true},
		{},
	}
	want := []string{`a,b {"a":1,"b":2}`, `a,c {"a":1,"c":3}`, `b {"b":"x"}`, `a,b,c,d {"a":1,"b":2,"c":null,"d":true}`, ` {}`}
	out, errs := run(t, s, rows...)
	for i := range rows {
		if errs[i] != nil || out[i] != want[i] {
			t.Errorf("row %d: %v %v, want %s", i, out[i], errs[i], want[i])
		}
	}
}

type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("a host function panicked") }

// A panic in Go while laying out a column (here a value whose MarshalJSON
// panics) is that batch's row errors, not a crash; the VM is replaced.
func TestHostPanicIsAnError(t *testing.T) {
	s := load(t, `function main(row) return type(row.p) end`, Config{})
	_, errs := run(t, s, map[string]any{"p": panicky{}})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "panicked") {
		t.Errorf("got %v", errs[0])
	}
	out, errs := run(t, s, map[string]any{"p": "fine"})
	if errs[0] != nil || out[0] != "string" {
		t.Errorf("after the panic: %v %v", out[0], errs[0])
	}
	s2 := load(t, `local json = require("json") function main(row) return json.decode(row.j) end`, Config{})
	_, errs = run(t, s2, map[string]any{"j": `{"a":`})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "json.decode: unexpected end of input at byte 6") {
		t.Errorf("bad JSON: %v", errs[0])
	}
}

// Cancelling the context stops the running row (inside a trace) and the
// rows after it fail with the context's error.
func TestCancelStopsTheBatch(t *testing.T) {
	s := load(t, `function main(row) if row.spin then while true do end end return 1 end`, Config{Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	rows := []map[string]any{{}, {"spin": true}, {}}
	out, errs := make([]any, 3), make([]error, 3)
	start := time.Now()
	if err := s.Values(ctx, rows, out, errs); err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || out[0] != int64(1) || !errors.Is(errs[1], context.Canceled) || !errors.Is(errs[2], context.Canceled) {
		t.Errorf("got %v %v", out, errs)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

// Many goroutines share a pool of two VMs.
func TestConcurrentBatches(t *testing.T) {
	s := load(t, `function main(row) return row.n * 2 end`, Config{PoolSize: 2})
	done := make(chan error)
	for g := range 8 {
		go func() {
			for i := range 50 {
				rows := []map[string]any{{"n": int64(g)}, {"n": int64(i)}}
				out, errs := make([]any, 2), make([]error, 2)
				if err := s.Values(context.Background(), rows, out, errs); err != nil || errs[0] != nil || out[0] != int64(2*g) || out[1] != int64(2*i) {
					done <- fmt.Errorf("goroutine %d: %v %v %v", g, out, errs, err)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestMetrics: the engine's collector reads Stats at scrape time, one series
// per script name; two scripts loaded under one source name (two tables
// running one file) are summed, since a registry refuses a second series
// with the same labels.
func TestMetrics(t *testing.T) {
	e, _ := New()
	defer e.Close()
	s, err := e.Load("m", `function main(row) if row.spin then while true do end end if row.bad then error("bad") end return 1 end`, Config{SourceName: "m.lua", Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, map[string]any{}, map[string]any{"spin": true}, map[string]any{"bad": true}, map[string]any{})
	again, err := e.Load("m again", `function main(row) return 2 end`, Config{SourceName: "m.lua"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, again, map[string]any{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		`luajit_batches_total{script="m.lua"} 2`, `luajit_rows_total{script="m.lua"} 5`, `luajit_errors_total{script="m.lua"} 2`,
		`luajit_timeouts_total{script="m.lua"} 1`, `luajit_vms_alive{script="m.lua"} 2`, `luajit_vms_created_total{script="m.lua"} 2`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}

// The byte count the checks read was located (host.c's layout checks), and
// a string doubling itself stops near the limit, not gigabytes later.
func TestMemoryLimitDoubling(t *testing.T) {
	s := load(t, `function main(row)
  local s = "x"
  while true do s = s .. s end
end`, Config{MemoryLimit: 16 << 20, Timeout: 20 * time.Second})
	v, err := s.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	located := v.gcTotalLocated()
	s.release(v)
	if !located {
		t.Error("gc.total not located: memory is checked every 1024th check only")
	}
	_, errs := run(t, s, map[string]any{})
	if !errors.Is(errs[0], luavm.ErrMemoryLimit) {
		t.Errorf("got %v, want the memory limit", errs[0])
	}
}
