package compute

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicedb/sluice/luavm"
)

func newManager(t testing.TB) *luavm.Manager {
	t.Helper()
	m := luavm.NewManager(luavm.Options{})
	t.Cleanup(func() { m.Close() })
	return m
}

func newProcessor(t testing.TB, yaml string, opts Options) *Processor {
	t.Helper()
	cfg, err := ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if opts.Lua == nil {
		opts.Lua = newManager(t)
	}
	p, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func rowsOf(t testing.TB, lines ...string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, l := range lines {
		r, err := DecodeRow([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

func encode(t testing.TB, row map[string]any) string {
	t.Helper()
	b, err := AppendJSONRow(nil, row, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLuaTalariaJSONColumn: the seed's config, and type fidelity through it.
func TestLuaTalariaJSONColumn(t *testing.T) {
	p := newProcessor(t, `
computed:
  - name: data
    type: json
    func: |
      local json = require("json")
      function main(row)
        return json.encode(row)
      end
`, Options{})
	in := `{"big":9007199254740993,"huge":18446744073709551616,"f":2.5,"n":null,"s":"x","nested":{"a":[1,null,{"b":true}]}}`
	b, err := p.Process(context.Background(), rowsOf(t, in))
	if err != nil || len(b.Errors) > 0 {
		t.Fatal(err, b.Errors)
	}
	row := b.Rows[0]
	if got := string(row["data"].(json.RawMessage)); got != in2sorted(t, in) {
		t.Errorf("data column:\n got %s\nwant %s", got, in2sorted(t, in))
	}
	// Untouched fields come out exactly as they went in.
	delete(row, "data")
	if got := encode(t, row); got != in2sorted(t, in) {
		t.Errorf("row after Lua:\n got %s\nwant %s", got, in2sorted(t, in))
	}
}

// in2sorted re-encodes a JSON object with sorted keys, keeping numbers as text.
func in2sorted(t testing.TB, s string) string {
	t.Helper()
	r := rowsOf(t, s)[0]
	return encode(t, r)
}

// TestLuaWhatScriptsSee documents the values a script reads and the types
// its writes come back as.
func TestLuaWhatScriptsSee(t *testing.T) {
	p := newProcessor(t, `
computed:
  - name: seen
    type: string
    func: |
      function main(row)
        local t = {}
        for _, k in ipairs({"i", "big", "f", "n", "s", "b", "nested", "missing"}) do
          local v = row[k]
          local d = type(v)
          if d == "number" then d = d .. ":" .. string.format("%.0f", v) end
          if d == "table" then d = d .. ":" .. tostring(v.a[2] == require("json").null) end
          t[#t + 1] = k .. "=" .. d
        end
        row.i = row.i + 1
        row.written = 2.5
        row.whole = 3.0
        return table.concat(t, " ")
      end
`, Options{})
	b, err := p.Process(context.Background(), rowsOf(t, `{"i":41,"big":9007199254740993,"f":1.5,"n":null,"s":"x","b":false,"nested":{"a":[1,null]}}`))
	if err != nil || len(b.Errors) > 0 {
		t.Fatal(err, b.Errors)
	}
	r := b.Rows[0]
	want := "i=number:41 big=number:9007199254740992 f=number:2 n=nil s=string b=boolean nested=table:true missing=nil"
	if r["seen"] != want {
		t.Errorf("script saw\n %v\nwant\n %v", r["seen"], want)
	}
	if r["i"] != int64(42) || r["written"] != 2.5 || r["whole"] != int64(3) || r["big"] != int64(9007199254740993) {
		t.Errorf("row after writes: %#v", r)
	}
}

// TestLuaLaterColumnsSeeEarlier: columns run in order and each sees the ones
// before it; the filter runs first, on the input row.
func TestLuaLaterColumnsSeeEarlier(t *testing.T) {
	p := newProcessor(t, `
filters:
  - name: only_kept
    func: "function main(row) return row.keep == true and row.first == nil end"
computed:
  - name: first
    type: string
    func: "function main(row) return 'v' .. row.n end"
  - name: second
    type: string
    func: "function main(row) return row.first .. '!' end"
  - name: all
    type: json
    func: make://json
`, Options{})
	b, err := p.Process(context.Background(), rowsOf(t, `{"n":1,"keep":true}`, `{"n":2,"keep":false}`, `{"n":3,"keep":true}`))
	if err != nil || len(b.Errors) > 0 {
		t.Fatal(err, b.Errors)
	}
	if len(b.Rows) != 2 {
		t.Fatalf("rows = %v", b.Rows)
	}
	if r := b.Rows[1]; r["second"] != "v3!" || string(r["all"].(json.RawMessage)) != `{"first":"v3","keep":true,"n":3,"second":"v3!"}` {
		t.Errorf("row = %v (all %s)", r, r["all"])
	}
	if s := p.Stats()[0]; !s.Filter || s.FilteredOut != 1 || s.Calls != 3 {
		t.Errorf("filter stats %+v", s)
	}
}

// TestLuaBadInput: each bad case names the column, the loader and the cause.
func TestLuaBadInput(t *testing.T) {
	m := newManager(t)
	load := func(yaml string) error {
		cfg, err := ParseConfig([]byte(yaml))
		if err != nil {
			return err
		}
		p, err := New(context.Background(), cfg, Options{Lua: m, BaseDir: t.TempDir()})
		if err == nil {
			p.Close()
		}
		return err
	}
	f := func(name, yaml string, want ...string) {
		t.Helper()
		err := load(yaml)
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not mention %q:\n%v", name, w, err)
			}
		}
	}
	f("no main", "computed:\n  - {name: c, type: int64, func: 'function other(row) return 1 end'}\n",
		`column "c" (lua inline)`, `no function "main"`)
	f("syntax", "computed:\n  - name: c\n    type: int64\n    func: |\n      function main(row)\n        return 1 +\n      end\n",
		`column "c" (lua inline)`, `compile c:3:`)
	f("path typo", "computed:\n  - {name: c, type: int64, func: scripts/trim.lau}\n",
		`column "c" (lua inline)`, `taken as inline Lua`)
	f("missing file", "computed:\n  - {name: c, type: int64, func: scripts/none.lua}\n",
		`column "c" (lua scripts/none.lua)`, `no such file`)
	f("unreachable url", "computed:\n  - {name: c, type: int64, func: 'http://127.0.0.1:1/x.lua'}\n",
		`column "c" (lua http://127.0.0.1:1/x.lua)`, `connection refused`)
	f("error at load", "filters:\n  - {name: f, func: 'error(\"boom\") function main(r) return true end'}\n",
		`filter "f" (lua inline)`, `boom`)
	// Issue 11: a top level that never ends fails the load, it does not hang.
	f("looping top level", "computed:\n  - {name: c, type: int64, timeout: 100ms, func: 'while true do end function main(r) return 1 end'}\n",
		`column "c" (lua inline)`, `load timeout`)
	// Every problem at once.
	f("all at once", "computed:\n  - {name: a, type: int64, func: 'function x() end'}\n  - {name: b, type: int64, func: 'function main( end'}\n",
		`column "a"`, `column "b"`)
}

// TestLuaRowErrors: wrong result types, runtime errors, nil and timeouts are
// per row; the other rows and columns go on.
func TestLuaRowErrors(t *testing.T) {
	p := newProcessor(t, `
computed:
  - name: typed
    type: int64
    func: |
      function main(row)
        if row.kind == "table" then return {1, 2} end
        if row.kind == "string" then return "7" end
        if row.kind == "error" then error("bad row " .. row.n) end
        if row.kind == "nil" then return nil end
        if row.kind == "loop" then while true do end end
        return row.n * 2
      end
    timeout: 200ms
  - name: after
    type: int64
    func: "function main(row) return row.n end"
`, Options{})
	rows := rowsOf(t, `{"n":1,"kind":"table"}`, `{"n":2,"kind":"string"}`, `{"n":3,"kind":"error"}`, `{"n":4,"kind":"nil"}`, `{"n":5,"kind":"loop"}`, `{"n":6}`)
	start := time.Now()
	b, err := p.Process(context.Background(), rows)
	if err != nil {
		t.Fatal(err)
	}
	checkStoppedInTime(t, "the looping row", time.Since(start), 200*time.Millisecond)
	if len(b.Rows) != 6 || len(b.Errors) != 5 {
		t.Fatalf("rows %d errors %v", len(b.Rows), b.Errors)
	}
	for i, want := range []string{"[]interface {} cannot be a int64 column", "string cannot be a int64 column", "bad row 3", "returned nil", "timeout"} {
		e := b.Errors[i]
		if e.Column != "typed" || e.Loader != "lua" || e.Row != i || !strings.Contains(e.Error(), want) {
			t.Errorf("errors[%d] = %v; want row %d, %q", i, e, i, want)
		}
	}
	if !errors.Is(b.Errors[4], luavm.ErrTimeout) || !errors.Is(b.Errors[0], ErrType) || !errors.Is(b.Errors[3], ErrNilResult) {
		t.Errorf("sentinels: %v", b.Errors)
	}
	for i, r := range b.Rows {
		if r["after"] != int64(i+1) {
			t.Errorf("row %d: after = %v", i, r["after"])
		}
		if i < 5 {
			if v, ok := r["typed"]; !ok || v != nil {
				t.Errorf("row %d: typed = %v, %v; want null", i, v, ok)
			}
		}
	}
	if b.Rows[5]["typed"] != int64(12) {
		t.Errorf("row 5 typed = %v", b.Rows[5]["typed"])
	}
	if s := p.Stats()[0]; s.Calls != 6 || s.Errors != 5 || s.Nulls != 5 {
		t.Errorf("stats %+v", s)
	}
}

// TestPolicies: drop, reject and deadletter, per column and filter.
func TestPolicies(t *testing.T) {
	fail := "function main(row) if row.bad then error('bad') end return 1 end"
	run := func(policy string, filter bool) (Batch, *Processor, error) {
		yaml := "computed:\n  - {name: c, type: int64, on_error: " + policy + ", func: \"" + fail + "\"}\n"
		if filter {
			yaml = "filters:\n  - {name: c, on_error: " + policy + ", func: \"function main(row) if row.bad then error('bad') end return true end\"}\n"
		}
		p := newProcessor(t, yaml, Options{})
		b, err := p.Process(context.Background(), rowsOf(t, `{"i":0}`, `{"i":1,"bad":true}`, `{"i":2}`))
		return b, p, err
	}
	b, p, err := run("drop", false)
	if err != nil || len(b.Rows) != 2 || b.Rows[1]["i"] != int64(2) || p.Stats()[0].Dropped != 1 {
		t.Errorf("drop: %v %v %+v", b.Rows, err, p.Stats())
	}
	b, p, err = run("reject", false)
	var e *Error
	if !errors.Is(err, ErrRejected) || !errors.As(err, &e) || e.Row != 1 || e.Column != "c" || p.Stats()[0].Rejected != 1 {
		t.Errorf("reject: %v", err)
	}
	b, p, err = run("deadletter", false)
	if err != nil || len(b.Rows) != 2 || len(b.DeadLetters) != 1 || p.Stats()[0].DeadLettered != 1 {
		t.Fatalf("deadletter: %v %v", b, err)
	}
	dl, _ := json.Marshal(b.DeadLetters[0])
	if !strings.Contains(string(dl), `"row":{"bad":true,"i":1}`) || !strings.Contains(string(dl), `"column":"c","loader":"lua","source":"inline"`) || !strings.Contains(string(dl), `bad`) {
		t.Errorf("dead letter %s", dl)
	}
	b, _, err = run("keep", true)
	if err != nil || len(b.Rows) != 3 || len(b.Errors) != 1 {
		t.Errorf("filter keep: %v %v", b.Rows, err)
	}
	b, _, err = run("drop", true)
	if err != nil || len(b.Rows) != 2 {
		t.Errorf("filter drop: %v %v", b.Rows, err)
	}
}

// TestSampledErrorLog: the first LogFirst errors are logged with the row,
// then one in LogEvery.
func TestSampledErrorLog(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	logger := slogTo(&lockedWriter{w: &buf, mu: &mu})
	p := newProcessor(t, "computed:\n  - {name: c, type: int64, func: \"function main(row) error('no ' .. row.i) end\"}\n", Options{Logger: logger, LogFirst: 2, LogEvery: 5})
	var lines []string
	for i := range 10 {
		lines = append(lines, `{"i":`+string(rune('0'+i))+`}`)
	}
	if _, err := p.Process(context.Background(), rowsOf(t, lines...)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	// errors 1, 2 (first two), 5 and 10 (every fifth)
	if n := strings.Count(out, "compute: function failed"); n != 4 {
		t.Errorf("%d lines logged, want 4:\n%s", n, out)
	}
	for _, want := range []string{`row="{\"i\":0}"`, `row="{\"i\":4}"`, `row="{\"i\":9}"`, "column=c", "loader=lua", "errors=10"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

// TestLuaReloadFile: a changed file is swapped in between batches; a version
// that fails to compile is reported and the old one keeps running.
func TestLuaReloadFile(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "col.lua")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(script, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("function main(row) return 'v1' end")
	p := newProcessor(t, "computed:\n  - {name: v, type: string, func: col.lua}\n", Options{BaseDir: dir})
	value := func() any {
		t.Helper()
		b, err := p.Process(context.Background(), []map[string]any{{}})
		if err != nil || len(b.Errors) > 0 {
			t.Fatal(err, b.Errors)
		}
		return b.Rows[0]["v"]
	}
	if v := value(); v != "v1" {
		t.Fatalf("v = %v", v)
	}
	if err := p.Reload(context.Background()); err != nil || value() != "v1" {
		t.Fatalf("unchanged reload: %v", err)
	}
	write("function main(row) return 'v2' end")
	if err := p.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := value(); v != "v2" {
		t.Errorf("after reload v = %v", v)
	}
	write("function main(row) return 'v3' ")
	err := p.Reload(context.Background())
	var ce *luavm.CompileError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `column "v" (lua col.lua): reload`) {
		t.Errorf("bad version: %v", err)
	}
	if v := value(); v != "v2" {
		t.Errorf("after a bad version v = %v, want v2 still", v)
	}
	write("function other(row) return 'v4' end")
	if err := p.Reload(context.Background()); !errors.Is(err, luavm.ErrNoFunction) {
		t.Errorf("version without main: %v", err)
	}
	if v := value(); v != "v2" {
		t.Errorf("after a version without main v = %v, want v2 still", v)
	}
	write("function main(row) return 'v5' end")
	if err := p.Reload(context.Background()); err != nil || value() != "v5" {
		t.Errorf("fixed version: %v", err)
	}
	if s := p.Stats()[0]; s.Reloads != 2 || s.ReloadErrors != 2 {
		t.Errorf("stats %+v", s)
	}
}

// TestLuaReloadHTTP: a URL is re-polled (with its ETag) and a new version
// swapped in; the swap waits for the batch in flight.
func TestLuaReloadHTTP(t *testing.T) {
	var mu sync.Mutex
	body, etag, gets, notModified := "function main(row) return 'v1' end", `"1"`, 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		gets++
		if r.Header.Get("If-None-Match") == etag {
			notModified++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	p := newProcessor(t, "computed:\n  - {name: v, type: string, func: '"+srv.URL+"/v.lua'}\n", Options{HTTPClient: srv.Client()})
	value := func() any {
		b, _ := p.Process(context.Background(), []map[string]any{{}})
		return b.Rows[0]["v"]
	}
	if v := value(); v != "v1" {
		t.Fatalf("v = %v", v)
	}
	if err := p.Reload(context.Background()); err != nil || value() != "v1" {
		t.Fatal(err)
	}
	mu.Lock()
	body, etag = "function main(row) return 'v2' end", `"2"`
	mu.Unlock()
	// Watch polls in the background; the new version shows up.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Watch(ctx, 5*time.Millisecond); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for value() != "v2" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if v := value(); v != "v2" {
		t.Errorf("v = %v after re-polling", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if notModified < 1 {
		t.Errorf("no conditional GET answered 304 (%d GETs)", gets)
	}
}

// TestLuaHostModule: require("sluice") encodes and deletes in Go, with the
// same bytes as json.encode and exact untouched values.
func TestLuaHostModule(t *testing.T) {
	p := newProcessor(t, `
computed:
  - name: enc
    type: string
    func: |
      local sluice = require("sluice")
      local json = require("json")
      function main(row)
        local a = sluice.encode(row, {"drop1", "drop2"})
        local b = json.encode(row)
        sluice.delete(row, {"drop1", "drop2", "absent"})
        local c = sluice.encode(row)
        local t = sluice.encode({x = 1, y = {1, 2}, z = json.null})
        if a ~= c then error("omit differs from delete: " .. a .. " vs " .. c) end
        return b .. "|" .. c .. "|" .. t
      end
`, Options{})
	b, err := p.Process(context.Background(), rowsOf(t, `{"big":9007199254740993,"drop1":1,"drop2":"x","n":null,"s":"<&>","f":2.5,"nested":{"a":[1,null]}}`))
	if err != nil || len(b.Errors) > 0 {
		t.Fatal(err, b.Errors)
	}
	want := `{"big":9007199254740993,"drop1":1,"drop2":"x","f":2.5,"n":null,"nested":{"a":[1,null]},"s":"<&>"}|` +
		`{"big":9007199254740993,"f":2.5,"n":null,"nested":{"a":[1,null]},"s":"<&>"}|{"x":1,"y":[1,2],"z":null}`
	if got := b.Rows[0]["enc"]; got != want {
		t.Errorf("got\n %v\nwant\n %v", got, want)
	}
	if _, ok := b.Rows[0]["drop1"]; ok {
		t.Error("sluice.delete left drop1 in the row")
	}
}

// TestComputedTypesInLaterColumns: values computed as timestamp, json,
// int32 and float64 are encoded exactly by later json columns, Lua and
// built-in alike.
func TestComputedTypesInLaterColumns(t *testing.T) {
	p := newProcessor(t, `
computed:
  - {name: ts, type: timestamp, func: "function main(row) return 1700000000.5 end"}
  - {name: j, type: json, func: "function main(row) return '{\"a\":[1,null]}' end"}
  - {name: i, type: int32, func: "function main(row) return 7 end"}
  - {name: f, type: float64, func: "function main(row) return 2 end"}
  - {name: seen, type: string, func: "function main(row) return type(row.ts) .. ' ' .. type(row.j) .. ' ' .. type(row.i) end"}
  - name: lua_json
    type: json
    func: |
      local json = require("json")
      function main(row) return json.encode(row) end
  - {name: go_json, type: json, func: "make://json"}
  - {name: ts_later, type: float64, func: "function main(row) return row.ts + 60 end"}
  - name: j_decoded
    type: int64
    func: |
      local json = require("json")
      function main(row) return json.decode(row.j).a[1] end
`, Options{})
	b, err := p.Process(context.Background(), []map[string]any{{"big": int64(9007199254740993)}})
	if err != nil || len(b.Errors) > 0 {
		t.Fatal(err, b.Errors)
	}
	r := b.Rows[0]
	if r["ts"] != time.Unix(1700000000, 5e8).UTC() || r["i"] != int32(7) || r["f"] != 2.0 {
		t.Errorf("typed values: %#v %#v %#v", r["ts"], r["i"], r["f"])
	}
	// What a later script sees of computed values: int32 and float64 are
	// numbers, a timestamp (time.Time) a number of unix seconds with the
	// fraction, a json value (json.RawMessage) the string of its JSON text.
	if r["seen"] != "number string number" {
		t.Errorf("seen = %v", r["seen"])
	}
	if r["ts_later"] != 1700000060.5 || r["j_decoded"] != int64(1) {
		t.Errorf("row.ts + 60 = %#v, json.decode(row.j).a[1] = %#v", r["ts_later"], r["j_decoded"])
	}
	want := `{"big":9007199254740993,"f":2,"i":7,"j":{"a":[1,null]},"seen":"number string number","ts":"2023-11-14T22:13:20.5Z"}`
	if got := string(r["lua_json"].(json.RawMessage)); got != want {
		t.Errorf("lua json.encode:\n got %s\nwant %s", got, want)
	}
	wantGo := `{"big":9007199254740993,"f":2,"i":7,"j":{"a":[1,null]},"lua_json":` + want + `,"seen":"number string number","ts":"2023-11-14T22:13:20.5Z"}`
	if got := string(r["go_json"].(json.RawMessage)); got != wantGo {
		t.Errorf("make://json:\n got %s\nwant %s", got, wantGo)
	}
}

func TestProcessAfterClose(t *testing.T) {
	p := newProcessor(t, "computed:\n  - {name: c, type: int64, func: \"function main(row) return 1 end\"}\n", Options{})
	p.Close()
	b, err := p.Process(context.Background(), []map[string]any{{}})
	if err != nil || len(b.Errors) != 1 || !errors.Is(b.Errors[0], ErrClosed) {
		t.Errorf("after Close: %v %v", b.Errors, err)
	}
}

// TestLuaTimeoutIsPerRow: the timeout bounds each row, not the batch: ten
// rows of 30ms under a 200ms timeout all succeed.
func TestLuaTimeoutIsPerRow(t *testing.T) {
	m := newManager(t)
	m.Register("nap", func(L *lua.LState) int { time.Sleep(30 * time.Millisecond); return 0 })
	p := newProcessor(t, "computed:\n  - {name: c, type: int64, timeout: 200ms, func: \"function main(row) nap() return row.i end\"}\n", Options{Lua: m})
	rows := make([]map[string]any, 10)
	for i := range rows {
		rows[i] = map[string]any{"i": int64(i)}
	}
	b, err := p.Process(context.Background(), rows)
	if err != nil || len(b.Errors) > 0 {
		t.Fatalf("%v %v", err, b.Errors)
	}
	for i, r := range b.Rows {
		if r["c"] != int64(i) {
			t.Errorf("row %d: %v", i, r["c"])
		}
	}
}

// TestLuaSameCodeTwoProcessors: two tables with the same column and code on
// one Manager; closing one leaves the other running.
func TestLuaSameCodeTwoProcessors(t *testing.T) {
	m := newManager(t)
	yaml := "computed:\n  - {name: c, type: int64, func: \"function main(row) return 1 end\"}\n"
	p1 := newProcessor(t, yaml, Options{Lua: m})
	p2 := newProcessor(t, yaml, Options{Lua: m})
	p1.Close()
	b, err := p2.Process(context.Background(), []map[string]any{{}})
	if err != nil || len(b.Errors) > 0 || b.Rows[0]["c"] != int64(1) {
		t.Errorf("%v %v", err, b.Errors)
	}
}

// TestLuaErrorsNameTheFile: a runtime error in a script file names the file
// and the line, not the unique name the script is loaded under.
func TestLuaErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "ratio.lua")
	if err := os.WriteFile(script, []byte("function main(row)\n  if row.d == 0 then error(\"d is zero\") end\n  return row.n / row.d\nend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte("computed:\n  - {name: ratio, type: float64, func: " + script + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(context.Background(), cfg, Options{Lua: newManager(t), BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b, err := p.Process(context.Background(), []map[string]any{{"n": int64(1), "d": int64(0)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Errors) != 1 {
		t.Fatalf("errors = %v", b.Errors)
	}
	if msg := b.Errors[0].Error(); !strings.Contains(msg, script+":2:") || !strings.Contains(msg, "d is zero") {
		t.Errorf("error does not name %s:2 and the cause: %s", script, msg)
	}
}

// TestLuaHugeStringIsARowError: string.rep("-", row.width) with width 2^40
// (sent over HTTP, it killed the server with a fatal out of memory without
// the limits) fails that row under the default limits; the other rows go on.
func TestLuaHugeStringIsARowError(t *testing.T) {
	p := newProcessor(t, "computed:\n  - {name: bar, type: string, func: 'function main(row) return string.rep(\"-\", row.width) end'}\n", Options{})
	b, err := p.Process(context.Background(), rowsOf(t, `{"width":1099511627776}`, `{"width":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Errors) != 1 || !errors.Is(b.Errors[0], luavm.ErrStringLimit) || b.Errors[0].Row != 0 {
		t.Fatalf("errors = %v, want one string limit error on row 0", b.Errors)
	}
	if len(b.Rows) != 2 || b.Rows[0]["bar"] != nil || b.Rows[1]["bar"] != "---" {
		t.Fatalf("rows = %v", b.Rows)
	}
}

// TestLuaSandboxMessage: a script using a library the sandbox leaves out is
// told which and how to allow it in the config (a bare os.execute gave
// "attempt to index a non-table object(nil)"), and `allow:` does allow it.
func TestLuaSandboxMessage(t *testing.T) {
	p := newProcessor(t, `
filters:
  - {name: f, on_error: keep, func: "function main(row) return io ~= nil end"}
computed:
  - {name: blocked, type: string, func: "function main(row) return os.getenv('HOME') end"}
  - {name: allowed, type: bool, allow: [os], func: "function main(row) return type(os.time()) == 'number' end"}
`, Options{})
	b, err := p.Process(context.Background(), rowsOf(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Errors) != 2 {
		t.Fatalf("errors = %v", b.Errors)
	}
	for _, c := range []struct {
		i    int
		want string
	}{
		{0, "the library io is not available in the sandbox; allow it with allow: [io] in the filter's config"},
		{1, "the library os is not available in the sandbox; allow it with allow: [os] in the column's config"},
	} {
		if !strings.Contains(b.Errors[c.i].Error(), c.want) {
			t.Errorf("errors[%d] = %v; want %q", c.i, b.Errors[c.i], c.want)
		}
	}
	if b.Rows[0]["allowed"] != true {
		t.Errorf("allow: [os] did not open os: %v", b.Rows[0])
	}
}

// TestLuaRunawayBatch: a looping main times out on max_timeouts rows of a
// batch (3 by default), then the rest of the batch fails at once with
// ErrBatchBudget under the column's policy, instead of a timeout per row (a
// 1000-row batch held an ingest slot for ~83 min without the budget). The next
// column and the next batch are not affected.
func TestLuaRunawayBatch(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		timeouts    int
	}{
		{"default", "", DefaultMaxTimeouts},
		{"max_timeouts 1", "max_timeouts: 1, ", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProcessor(t, `
computed:
  - {name: loops, type: int64, timeout: 100ms, `+c.extra+`func: "function main(row) if row.i >= 0 then while true do end end return 1 end"}
  - {name: after, type: int64, func: "function main(row) return row.i end"}
`, Options{})
			rows := make([]map[string]any, 1000)
			for i := range rows {
				rows[i] = map[string]any{"i": int64(i)}
			}
			start := time.Now()
			b, err := p.Process(context.Background(), rows)
			if err != nil {
				t.Fatal(err)
			}
			// c.timeouts rows of 100ms each, one after the other.
			checkStoppedInTime(t, "the batch", time.Since(start), time.Duration(c.timeouts)*100*time.Millisecond)
			timeouts, skipped := 0, 0
			for _, e := range b.Errors {
				switch {
				case errors.Is(e, luavm.ErrTimeout):
					timeouts++
				case errors.Is(e, ErrBatchBudget) && strings.Contains(e.Error(), "max_timeouts"):
					skipped++
				default:
					t.Fatalf("unexpected error %v", e)
				}
			}
			if timeouts != c.timeouts || skipped != 1000-c.timeouts {
				t.Fatalf("%d rows timed out and %d skipped, want %d and %d", timeouts, skipped, c.timeouts, 1000-c.timeouts)
			}
			if len(b.Rows) != 1000 || b.Rows[999]["after"] != int64(999) || b.Rows[999]["loops"] != nil {
				t.Fatalf("rows: %d, last %v", len(b.Rows), b.Rows[999])
			}
		})
	}
}

// TestLuaBatchTimeout: batch_timeout bounds the rows of one batch together;
// the rows left when it is used fail at once with ErrBatchBudget, and the
// next batch starts with a fresh budget. Only row 3 is slow (three times the
// batch_timeout), so the rows before it are computed and all after it cut
// whatever the machine's load, and a batch_timeout not enforced computes
// them all.
func TestLuaBatchTimeout(t *testing.T) {
	const batchTimeout = 200 * time.Millisecond
	m := newManager(t)
	m.Register("nap", func(L *lua.LState) int { time.Sleep(3 * batchTimeout); return 0 })
	p := newProcessor(t, "computed:\n  - {name: c, type: int64, timeout: 5s, batch_timeout: 200ms, func: \"function main(row) if row.slow then nap() end return row.i end\"}\n", Options{Lua: m})
	const slow = 3
	for range 2 {
		rows := make([]map[string]any, 20)
		for i := range rows {
			rows[i] = map[string]any{"i": int64(i), "slow": i == slow}
		}
		b, err := p.Process(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Errors) != len(rows)-slow-1 {
			t.Fatalf("%d of 20 rows failed (%v); want rows %d to 19 cut by the budget", len(b.Errors), b.Errors, slow+1)
		}
		for k, e := range b.Errors {
			if !errors.Is(e, ErrBatchBudget) || !strings.Contains(e.Error(), "batch_timeout of 200ms") || e.Row != slow+1+k {
				t.Fatalf("errors[%d] = %v", k, e)
			}
		}
		for i := range slow + 1 {
			if b.Rows[i]["c"] != int64(i) {
				t.Fatalf("row %d before the budget ran out: %v", i, b.Rows[i])
			}
		}
	}
	if _, err := ParseConfig([]byte("computed:\n  - {name: c, type: int64, batch_timeout: -1s, func: \"function main(r) return 1 end\"}\n")); err == nil || !strings.Contains(err.Error(), "negative batch_timeout") {
		t.Errorf("negative batch_timeout: %v", err)
	}
}
