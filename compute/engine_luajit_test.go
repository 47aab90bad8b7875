//go:build luajit && cgo

package compute

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/luavm"
)

// withEngine adds `engine: luajit` to every function of a config written
// with `func:` as the last key... by inserting it before each `func:`.
func withEngine(yaml string) string {
	var out []string
	for _, ln := range strings.Split(yaml, "\n") {
		trimmed := strings.TrimLeft(ln, " -")
		if strings.HasPrefix(trimmed, "func:") {
			indent := ln[:len(ln)-len(strings.TrimLeft(ln, " "))]
			if strings.HasPrefix(strings.TrimLeft(ln, " "), "- ") {
				indent += "  "
			}
			out = append(out, indent+"engine: luajit")
		}
		out = append(out, ln)
	}
	return strings.Join(out, "\n")
}

// TestLuaJITSameAsGopherLua runs the same configs on both engines and
// compares the rows, the dead letters and the errors (minus the engine's
// wording of Lua's own messages).
func TestLuaJITSameAsGopherLua(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml string
		rows []string
	}{
		"what scripts see": {`
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
`, []string{`{"i":41,"big":9007199254740993,"f":1.5,"n":null,"s":"x","b":false,"nested":{"a":[1,null]}}`}},
		"trim": {`
computed:
  - name: data
    type: json
    func: |
      local json = require("json")
      local keys = {"key1", "key2", "key3", "key4", "key5"}
      function main(row)
        for _, key in ipairs(keys) do row[key] = nil end
        return json.encode(row)
      end
`, []string{trimEvent, `{"key1":1,"x":"\u0001é\u2028","y":[1,{"z":null}],"t":0.000001,"u":1e-7}`}},
		"later columns and filters": {`
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
  - name: n2
    type: float64
    func: "function main(row) return row.n / 2 end"
  - name: tbl
    type: json
    func: "function main(row) return {n = row.n, list = {row.first, row.second}, empty = {}} end"
`, []string{`{"n":1,"keep":true}`, `{"n":2,"keep":false}`, `{"n":3,"keep":true}`}},
		"pairs and the host module": {`
computed:
  - name: copied
    type: json
    func: |
      local sluice = require("sluice")
      local json = require("json")
      function main(row)
        local t = {}
        for k, v in pairs(row) do
          if k ~= "drop" then t[k] = v end
        end
        sluice.delete(row, {"gone"})
        return json.encode(t) .. sluice.encode(row, {"drop"})
      end
`, []string{`{"a":1,"drop":2,"gone":3,"n":null,"s":"x"}`}},
		"json.decode of a number beyond float64": {`
computed:
  - name: decoded
    type: string
    func: |
      local json = require("json")
      function main(row) return tostring(json.decode(row.text)) end
`, []string{`{"text":"1e999"}`, `{"text":"[-1e999]"}`, `{"text":"1e-999"}`, `{"text":"1e308"}`}},
		"errors and policies": {`
computed:
  - name: boom
    type: int64
    on_error: deadletter
    func: |
      function main(row)
        if row.bad then error("bad row " .. row.id) end
        return row.id
      end
  - name: typed
    type: int64
    func: "function main(row) return 'not a number' end"
`, []string{`{"id":1}`, `{"id":2,"bad":true}`, `{"id":3}`}},
	} {
		t.Run(name, func(t *testing.T) {
			gopher := newProcessor(t, tc.yaml, Options{})
			jit := newProcessor(t, withEngine(tc.yaml), Options{})
			for _, f := range jit.all() {
				if _, ok := f.handler.(*engineLua); !ok {
					t.Fatalf("%s runs on %T, not luajit", f.name, f.handler)
				}
			}
			want, werr := gopher.Process(context.Background(), rowsOf(t, tc.rows...))
			got, gerr := jit.Process(context.Background(), rowsOf(t, tc.rows...))
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("Process errors: gopher-lua %v, luajit %v", werr, gerr)
			}
			if len(got.Rows) != len(want.Rows) {
				t.Fatalf("rows: luajit %d, gopher-lua %d", len(got.Rows), len(want.Rows))
			}
			for i := range want.Rows {
				if g, w := encode(t, got.Rows[i]), encode(t, want.Rows[i]); g != w {
					t.Errorf("row %d:\n luajit     %s\n gopher-lua %s", i, g, w)
				}
			}
			if len(got.DeadLetters) != len(want.DeadLetters) || len(got.Errors) != len(want.Errors) {
				t.Fatalf("dead letters %d/%d, errors %d/%d (luajit/gopher-lua): %v / %v",
					len(got.DeadLetters), len(want.DeadLetters), len(got.Errors), len(want.Errors), got.Errors, want.Errors)
			}
			for i := range want.Errors {
				g, w := got.Errors[i], want.Errors[i]
				if g.Column != w.Column || g.Row != w.Row || errors.Is(g, ErrType) != errors.Is(w, ErrType) {
					t.Errorf("error %d: luajit %v, gopher-lua %v", i, g, w)
				}
				var gc, wc *luavm.CallError
				if errors.As(w, &wc) {
					if !errors.As(g, &gc) || gc.Script != wc.Script || gc.Line != wc.Line || gc.Msg != wc.Msg {
						t.Errorf("error %d: luajit %#v, gopher-lua %#v", i, gc, wc)
					}
				}
			}
		})
	}
}

func TestLuaJITReload(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/f.lua"
	write := func(s string) {
		if err := writeFile(path, s); err != nil {
			t.Fatal(err)
		}
	}
	write("function main(row) return 'v1' end")
	p := newProcessor(t, "computed:\n  - name: c\n    type: string\n    engine: luajit\n    func: "+path+"\n", Options{})
	row := func() any {
		b, err := p.Process(context.Background(), rowsOf(t, `{}`))
		if err != nil {
			t.Fatal(err)
		}
		return b.Rows[0]["c"]
	}
	if got := row(); got != "v1" {
		t.Fatalf("got %v", got)
	}
	write("function main(row) return 'v2' end")
	if err := p.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := row(); got != "v2" {
		t.Errorf("after reload: %v", got)
	}
	write("function main(row) return 'v3' e")
	if err := p.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("broken version: %v", err)
	}
	if got := row(); got != "v2" {
		t.Errorf("after a failed reload: %v", got)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// testEngines are the engines the shared engine tests run on.
var testEngines = []string{EngineGopherLua, EngineLuaJIT}
