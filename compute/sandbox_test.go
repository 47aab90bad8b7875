package compute

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/luavm"
)

// sandboxProcessor is a processor of one string column `c` running code on
// engine, whose gopher-lua pool has one VM: every row of every batch runs
// on the same VM, on both engines, so a leak from one row to the next
// shows.
func sandboxProcessor(t *testing.T, engine, code string, extra string) *Processor {
	t.Helper()
	yaml := fmt.Sprintf("computed:\n  - name: c\n    type: string\n    engine: %s\n%s    func: |\n", engine, extra)
	for _, ln := range strings.Split(code, "\n") {
		yaml += "      " + ln + "\n"
	}
	return newProcessor(t, yaml, Options{LuaConfig: luavm.ScriptConfig{Pool: luavm.PoolConfig{Strategy: luavm.StrategyCore, Core: 1}}})
}

// TestSandboxIsolatesCalls is the sandbox of both engines (testEngines:
// gopher-lua, and LuaJIT under the luajit build tag): what one row does to
// the libraries, the globals or the metatables it can reach is not seen by
// the next rows on the same VM, and what the sandbox leaves out stays out.
// The first row of a batch runs attack (in a pcall); every row returns
// check, which must be want on the rows after the attack, in that batch and
// the next.
func TestSandboxIsolatesCalls(t *testing.T) {
	pwned := `function() return "pwned" end`
	for _, tc := range []struct {
		name, attack, check, want string
		refused                   bool // the attack must fail (else it runs, and is undone)
	}{
		{"library function replaced", `string.upper = ` + pwned, `string.upper("a")`, "A", true},
		{"library function removed", `math.floor = nil; table.concat = nil`, `math.floor(1.5) .. table.concat({"a", "b"})`, "1ab", true},
		{"rawset on a library", `rawset(string, "upper", ` + pwned + `)`, `string.upper("a")`, "A", true},
		{"table.insert into a library", `table.insert(math, "pwned")`, `rawget(math, 1)`, "nil", true},
		{"string method through the string metatable", `getmetatable("").__index.upper = ` + pwned, `("a"):upper()`, "A", true},
		{"string metatable replaced", `setmetatable("", {__index = function() return ` + pwned + ` end})`, `("a"):upper()`, "A", true},
		{"json module", `require("json").encode = ` + pwned, `require("json").encode({1})`, "[1]", true},
		{"host module", `require("sluice").delete = nil`, `type(require("sluice").delete) .. type(require("sluice").encode)`, "functionfunction", true},
		{"global written", `leak = "pwned"`, `leak`, "nil", false},
		{"library global replaced", `string = {upper = ` + pwned + `}`, `string.upper("a")`, "A", false},
		{"rawset(_G)", `rawset(_G, "leak", "pwned")`, `leak`, "nil", false},
		{"table.insert(_G)", `table.insert(_G, "pwned")`, `rawget(_G, 1)`, "nil", false},
		{"_G's metatable replaced", `setmetatable(_G, {__index = function() return "pwned" end})`, `undefinedName`, "nil", true},
		{"the globals behind _G", `getmetatable(_G).__index.string = nil`, `type(string)`, "table", true},
		{"hidden metatables", `error("none")`, `tostring(getmetatable(_G)) .. tostring(getmetatable(string)) .. tostring(getmetatable("")) .. tostring(getmetatable({}))`, "falsefalsefalsenil", true},
		{"row metatable", `getmetatable(row).__index = ` + pwned, `row.x`, "nil", true},
		{"row metatable replaced", `setmetatable(row, {__index = ` + pwned + `})`, `row.x`, "nil", true},
		{"json.null metatable", `setmetatable(require("json").null, {__index = ` + pwned + `})`,
			`select(2, pcall(function() return require("json").null.x end)) ~= "pwned"`, "true", true},
		{"getfenv and setfenv", `getfenv(0).string = nil`, `type(getfenv) .. type(setfenv) .. type(string)`, "nilniltable", true},
		{"collectgarbage", `collectgarbage("stop")`, `type(collectgarbage("count")) .. tostring(collectgarbage("collect")) .. tostring((pcall(collectgarbage, "setpause", 1)))`, "number0false", true},
		{"left out of the sandbox", `io.write("x")`,
			`reach("io") .. reach("os") .. reach("debug") .. reach("load") .. reach("loadstring") .. reach("loadfile") .. reach("dofile") .. reach("package") .. reach("module") .. reach("newproxy") .. reach("getfenv")`,
			"-----------", true},
		{"require of a library or a file", `require("os").exit(1)`,
			`tostring(pcall(require, "os")) .. tostring(pcall(require, "io")) .. tostring(pcall(require, "ffi")) .. tostring(pcall(require, "debug")) .. tostring(pcall(require, "nofile"))`,
			"falsefalsefalsefalsefalse", true},
		{"string.dump", `string.dump(main)`, `(pcall(string.dump, main))`, "false", true},
	} {
		code := fmt.Sprintf(`local function reach(name)
  local ok, v = pcall(function() return _G[name] end)
  if ok and v ~= nil then return "+" end
  return "-"
end
function main(row)
  if row.attack then
    local ok = pcall(function() %s end)
    return ok and "attack ran" or "attack refused"
  end
  return tostring(%s)
end`, tc.attack, tc.check)
		for _, engine := range testEngines {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				p := sandboxProcessor(t, engine, code, "")
				for batch, lines := range [][]string{{`{"attack":true}`, `{}`, `{}`}, {`{}`, `{"attack":true}`, `{}`}} {
					b, err := p.Process(context.Background(), rowsOf(t, lines...))
					if err != nil {
						t.Fatal(err)
					}
					if len(b.Errors) > 0 {
						t.Fatalf("batch %d: %v", batch, b.Errors)
					}
					attacked := false
					for i, row := range b.Rows {
						if row["attack"] == true {
							attacked = true
							if want := "attack refused"; tc.refused && row["c"] != want {
								t.Errorf("batch %d row %d: %v, want %s", batch, i, row["c"], want)
							}
							continue
						}
						if attacked && row["c"] != tc.want {
							t.Errorf("batch %d row %d (after the attack): %s gave %q, want %q", batch, i, tc.check, row["c"], tc.want)
						}
					}
				}
			})
		}
	}
}

// TestSandboxCollectGarbageIsCheap: collectgarbage() from a script does not
// collect the process's Go heap (on gopher-lua it ran runtime.GC per call,
// a denial of service at one line per row).
func TestSandboxCollectGarbageIsCheap(t *testing.T) {
	const rows = 200
	lines := make([]string, rows)
	for i := range lines {
		lines[i] = `{}`
	}
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) {
			p := sandboxProcessor(t, engine, `function main(row) collectgarbage() collectgarbage("collect") return "ok" end`, "")
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b, err := p.Process(context.Background(), rowsOf(t, lines...))
			runtime.ReadMemStats(&after)
			if err != nil || len(b.Errors) > 0 {
				t.Fatalf("%v %v", err, b.Errors)
			}
			// The batch itself may start a GC or two; 2 per row is what a
			// collecting collectgarbage costs.
			if n := after.NumGC - before.NumGC; n > rows/20 {
				t.Errorf("%d rows calling collectgarbage ran %d Go GCs", rows, n)
			}
		})
	}
}

// TestColumnAllowOpensLibraryOnEveryEngine: a column's own allow: opens the
// library on both engines (LuaJIT was once given the processor's list
// only), and only for that column.
func TestColumnAllowOpensLibraryOnEveryEngine(t *testing.T) {
	const code = `function main(row)
  local ok, v = pcall(function() return os.time end)
  return ok and type(v) or "closed"
end`
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) {
			for extra, want := range map[string]string{"    allow: [os]\n": "function", "": "closed"} {
				p := sandboxProcessor(t, engine, code, extra)
				b, err := p.Process(context.Background(), rowsOf(t, `{}`))
				if err != nil || len(b.Errors) > 0 {
					t.Fatalf("%v %v", err, b.Errors)
				}
				// gopher-lua puts the line of the call before its
				// json.decode errors, LuaJIT does not.
				if got, _ := b.Rows[0]["c"].(string); got != want && !(strings.HasPrefix(got, "error: ") && strings.HasSuffix(got, " "+want)) {
					t.Errorf("allow %q: os.time is %v, want %s", strings.TrimSpace(extra), got, want)
				}
			}
		})
	}
}

// checkStoppedInTime fails t when rows stopped by a time limit of limit
// took longer than 3x the limit plus half a second: loose enough for a
// loaded CI machine, tight enough that a watchdog firing a couple of
// seconds late fails.
func checkStoppedInTime(t *testing.T, what string, took, limit time.Duration) {
	t.Helper()
	if bound := 3*limit + 500*time.Millisecond; took > bound {
		t.Errorf("%s: stopped after %v, over %v for a limit of %v", what, took, bound, limit)
	}
}

// TestTimeoutIsPerRow: on both engines a row that never ends is stopped by
// the column's timeout, in time, and the rows around it are computed.
func TestTimeoutIsPerRow(t *testing.T) {
	const limit = 200 * time.Millisecond
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) {
			p := newProcessor(t, fmt.Sprintf(`
computed:
  - name: c
    type: int64
    engine: %s
    timeout: %v
    func: |
      function main(row)
        if row.spin then local x = 0 while true do x = x + 1 end end
        return row.n
      end
`, engine, limit), Options{})
			start := time.Now()
			b, err := p.Process(context.Background(), rowsOf(t, `{"n":1}`, `{"n":2,"spin":true}`, `{"n":3}`))
			if err != nil {
				t.Fatal(err)
			}
			checkStoppedInTime(t, "the spinning row", time.Since(start), limit)
			if len(b.Errors) != 1 || !errors.Is(b.Errors[0], luavm.ErrTimeout) || b.Errors[0].Row != 1 {
				t.Fatalf("errors: %v", b.Errors)
			}
			if b.Rows[0]["c"] != int64(1) || b.Rows[2]["c"] != int64(3) {
				t.Errorf("rows: %v", b.Rows)
			}
		})
	}
}

// TestJSONDecodeOutOfRange: JSON has no infinity, so json.decode of a number
// beyond float64's range fails on both engines (LuaJIT returned inf,
// gopher-lua the number's text as a string), and one too small to be told
// from zero is 0.
func TestJSONDecodeOutOfRange(t *testing.T) {
	const code = `local json = require("json")
function main(row)
  local ok, v = pcall(json.decode, row.text)
  if not ok then return "error: " .. v end
  if type(v) == "table" then v = v[1] end
  return type(v) .. " " .. tostring(v)
end`
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) {
			p := sandboxProcessor(t, engine, code, "")
			for text, want := range map[string]string{
				"1e999":    "json.decode: number 1e999 is out of range (JSON has no infinity)",
				"[-1E999]": "json.decode: number -1E999 is out of range (JSON has no infinity)",
				"1e-999":   "number 0",
				"[2.5e10]": "number 25000000000",
			} {
				row := map[string]any{"text": text}
				b, err := p.Process(context.Background(), []map[string]any{row})
				if err != nil || len(b.Errors) > 0 {
					t.Fatalf("%v %v", err, b.Errors)
				}
				// gopher-lua puts the line of the call before its
				// json.decode errors, LuaJIT does not.
				if got, _ := b.Rows[0]["c"].(string); got != want && !(strings.HasPrefix(got, "error: ") && strings.HasSuffix(got, " "+want)) {
					t.Errorf("json.decode(%q): %q, want %q", text, got, want)
				}
			}
		})
	}
}
