package luavm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	lua "github.com/yuin/gopher-lua"
)

// reportScript is the script of the published pool report.
const reportScript = `
function helloLua(n)
  goSayHello("hello", "my name is lua") -- calls Go
  return n, 100000
end
`

func newTestManager(t testing.TB, opts Options) *Manager {
	t.Helper()
	m := NewManager(opts)
	t.Cleanup(func() { m.Close() })
	return m
}

func TestInvokeScriptFuncReportShape(t *testing.T) {
	m := newTestManager(t, Options{})
	var said atomic.Int64
	var got []string
	var mu sync.Mutex
	m.Register("goSayHello", func(L *lua.LState) int {
		said.Add(1)
		mu.Lock()
		got = append(got, L.CheckString(1)+"|"+L.CheckString(2))
		mu.Unlock()
		return 0
	})
	if err := m.Load("test.lua", reportScript, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	res, err := m.InvokeScriptFunc("test.lua", "helloLua", 30*time.Second, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0] != int64(1) || res[1] != int64(100000) {
		t.Fatalf("results = %#v, want [1 100000]", res)
	}
	if said.Load() != 1 || got[0] != "hello|my name is lua" {
		t.Fatalf("goSayHello called %d times with %q", said.Load(), got)
	}
}

func TestLoadSameSourceIsNoOpAndSwapIsAtomic(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("s", `function v() return 1 end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	before := m.lookup("s")
	if err := m.Load("s", `function v() return 1 end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	if m.lookup("s") != before {
		t.Fatal("loading the same source again made a new version")
	}

	// A call in flight on the old version finishes on the old code while new
	// calls get the new code; the old VM is closed when it comes back.
	entered := make(chan struct{})
	leave := make(chan struct{})
	m.Register("block", func(L *lua.LState) int { close(entered); <-leave; return 0 })
	if err := m.Load("b", `function v() block() return "old" end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	oldPool := m.lookup("b").pool
	var oldRes []any
	var oldErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		oldRes, oldErr = m.Invoke(context.Background(), "b", "v", 1)
	}()
	<-entered
	if err := m.Load("b", `function v() return "new" end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Invoke(context.Background(), "b", "v", 1)
	if err != nil || res[0] != "new" {
		t.Fatalf("new call: %v %v", res, err)
	}
	close(leave)
	wg.Wait()
	if oldErr != nil || oldRes[0] != "old" {
		t.Fatalf("call in flight: %v %v, want old", oldRes, oldErr)
	}
	alive, _, _, _ := oldPool.counts()
	if alive != 0 {
		t.Fatalf("old version still has %d VMs after its last call returned", alive)
	}
}

func TestCompileErrorKeepsPreviousVersion(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("s.lua", `function f() return 1 end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	err := m.Load("s.lua", "function f()\n  return 1 +\nend\n", ScriptConfig{})
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *CompileError", err)
	}
	if ce.Script != "s.lua" || ce.Line != 3 {
		t.Fatalf("compile error names %s:%d (%q), want s.lua:3", ce.Script, ce.Line, ce.Msg)
	}
	res, err := m.Invoke(context.Background(), "s.lua", "f", 1)
	if err != nil || res[0] != int64(1) {
		t.Fatalf("previous version not running: %v %v", res, err)
	}
	// A runtime error in the main chunk fails Load the same way.
	err = m.Load("s.lua", "x = nil + 1", ScriptConfig{})
	var call *CallError
	if !errors.As(err, &call) || call.Line != 1 {
		t.Fatalf("main chunk error = %v, want *CallError at line 1", err)
	}
	if _, err := m.Invoke(context.Background(), "s.lua", "f", 1); err != nil {
		t.Fatal(err)
	}
}

func TestUnload(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("s", `function f() return 1 end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Unload("s"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Invoke(context.Background(), "s", "f", 1); !errors.Is(err, ErrNoScript) || !strings.Contains(err.Error(), "s") {
		t.Fatalf("after unload: %v, want ErrNoScript naming the script", err)
	}
	if err := m.Unload("s"); !errors.Is(err, ErrNoScript) {
		t.Fatalf("second unload: %v", err)
	}
}

func TestConversionsRoundTrip(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("id", `function id(...) return ... end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	in := []any{nil, true, int64(42), 2.5, "s", []any{int64(1), "two"}, map[string]any{"a": int64(1), "b": []any{"x"}}}
	out, err := m.Invoke(context.Background(), "id", "id", len(in), in...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(out), fmt.Sprint(in); got != want {
		t.Fatalf("round trip = %s, want %s", got, want)
	}
	// []byte and the int kinds come back as string and int64.
	out, err = m.Invoke(context.Background(), "id", "id", 2, []byte("b"), uint16(7))
	if err != nil || out[0] != "b" || out[1] != int64(7) {
		t.Fatalf("got %#v %v", out, err)
	}
}

func TestJSONModule(t *testing.T) {
	m := newTestManager(t, Options{})
	src := `
local json = require("json")
function roundtrip(s) return json.encode(json.decode(s)) end
function isnull(s) return json.decode(s).x == json.null end
function enc(v) return json.encode(v) end
function bad(s) return json.decode(s) end
`
	if err := m.Load("j", src, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Invoke(context.Background(), "j", "roundtrip", 1, `{"a":[1,2.5,"x",null],"b":null,"c":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != `{"a":[1,2.5,"x",null],"b":null,"c":{}}` {
		t.Fatalf("round trip = %s", res[0])
	}
	res, err = m.Invoke(context.Background(), "j", "isnull", 1, `{"x":null}`)
	if err != nil || res[0] != true {
		t.Fatalf("json.null: %v %v", res, err)
	}
	res, err = m.Invoke(context.Background(), "j", "enc", 1, map[string]any{"k": "<v>"})
	if err != nil || res[0] != `{"k":"<v>"}` {
		t.Fatalf("encode: %v %v", res, err)
	}
	_, err = m.Invoke(context.Background(), "j", "bad", 1, `{"x":`)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Func != "bad" || ce.Line != 6 || !strings.Contains(ce.Msg, "json.decode") {
		t.Fatalf("bad json: %v", err)
	}
}

func TestRowProxy(t *testing.T) {
	m := newTestManager(t, Options{})
	src := `
local json = require("json")
function f(row)
  row.sum = row.a + row.b
  row.b = nil
  local keys = {}
  for k, v in pairs(row) do keys[#keys+1] = k end
  return table.concat(keys, ","), json.encode(row), row.missing == nil
end
`
	if err := m.Load("r", src, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	row := map[string]any{"a": int64(1), "b": int64(2), "big": int64(9007199254740993), "n": nil}
	err := m.Do(context.Background(), "r", func(vm *VM) error {
		fn, err := vm.Func("f")
		if err != nil {
			return err
		}
		res, err := vm.Call(fn, 3, NewRow(vm.State(), row))
		if err != nil {
			return err
		}
		if res[0].String() != "a,big,n,sum" {
			t.Errorf("pairs keys = %s", res[0])
		}
		if res[1].String() != `{"a":1,"big":9007199254740993,"n":null,"sum":3}` {
			t.Errorf("json.encode(row) = %s", res[1])
		}
		if res[2] != lua.LTrue {
			t.Errorf("missing field not nil")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if row["sum"] != int64(3) {
		t.Fatalf("write did not reach the Go map: %#v", row)
	}
	if _, ok := row["b"]; ok {
		t.Fatalf("row.b = nil did not delete: %#v", row)
	}
}

func TestDoCall1AndFunc(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("d", `function double(x) return x * 2 end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	err := m.Do(context.Background(), "d", func(vm *VM) error {
		fn, err := vm.Func("double")
		if err != nil {
			return err
		}
		for i := 1; i <= 100; i++ {
			v, err := vm.Call1(fn, lua.LNumber(i))
			if err != nil {
				return err
			}
			sum += float64(v.(lua.LNumber))
		}
		if _, err := vm.Func("nope"); !errors.Is(err, ErrNoFunction) {
			t.Errorf("Func(nope) = %v, want ErrNoFunction", err)
		}
		return nil
	})
	if err != nil || sum != 10100 {
		t.Fatalf("sum = %v, err = %v", sum, err)
	}
}

func TestGlobalsDoNotLeakBetweenCalls(t *testing.T) {
	src := `
counter = 0
function bump() counter = counter + 1; leaked = (leaked or 0) + 1; return counter, leaked end
function clobber() string = nil; bump = nil; assert(not pcall(setmetatable, _G, {}), "_G's metatable is protected") return 1 end
function usestring() return string.upper("ok") end
`
	for _, share := range []bool{false, true} {
		m := newTestManager(t, Options{})
		cfg := ScriptConfig{Pool: PoolConfig{Strategy: StrategyCore, Core: 1}, ShareGlobals: share}
		if err := m.Load("g", src, cfg); err != nil {
			t.Fatal(err)
		}
		var last []any
		for range 3 {
			res, err := m.Invoke(context.Background(), "g", "bump", 2)
			if err != nil {
				t.Fatal(err)
			}
			last = res
		}
		if !share && (last[0] != int64(1) || last[1] != int64(1)) {
			t.Fatalf("isolated: third call saw %v, want [1 1]", last)
		}
		if share && last[0] != int64(3) {
			t.Fatalf("shared globals: third call saw %v, want counter 3 (the isolation test must be able to fail)", last)
		}
		if !share {
			if _, err := m.Invoke(context.Background(), "g", "clobber", 1); err != nil {
				t.Fatal(err)
			}
			res, err := m.Invoke(context.Background(), "g", "usestring", 1)
			if err != nil || res[0] != "OK" {
				t.Fatalf("after clobber: %v %v", res, err)
			}
			if _, err := m.Invoke(context.Background(), "g", "bump", 2); err != nil {
				t.Fatalf("bump gone after clobber: %v", err)
			}
		}
	}
}

func TestSandbox(t *testing.T) {
	m := newTestManager(t, Options{})
	src := `function probe() return type(io), type(os), type(debug), type(load), type(loadstring), type(dofile), type(string), type(math), type(table) end
function use(name) return _G[name] end
function execute() return os.execute("true") end
function missing() return type(notDefinedAnywhere) end`
	if err := m.Load("sb", src, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	// Every left-out library and function says so and how to allow it
	// (a bare os.execute gave "attempt to index a non-table object(nil)").
	for name, allow := range map[string]string{"io": "io", "os": "os", "debug": "debug", "coroutine": "coroutine", "channel": "channel",
		"load": "load", "loadstring": "load", "loadfile": "load", "dofile": "load", "package": "require"} {
		_, err := m.Invoke(context.Background(), "sb", "use", 1, name)
		if err == nil || !strings.Contains(err.Error(), name+" is not available in the sandbox; allow it with ScriptConfig.Allow (\""+allow+"\")") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	var ce *CallError
	if _, err := m.Invoke(context.Background(), "sb", "execute", 1); !errors.As(err, &ce) || ce.Line != 3 || !strings.Contains(err.Error(), "the library os is not available") {
		t.Errorf("os.execute: err = %v", err)
	}
	if res, err := m.Invoke(context.Background(), "sb", "missing", 1); err != nil || res[0] != "nil" {
		t.Errorf("other missing globals stay nil: %v, %v", res, err)
	}
	hinted := ScriptConfig{AllowHint: "allow: [%s] in the column's config"}
	if err := m.Load("hinted", src, hinted); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Invoke(context.Background(), "hinted", "execute", 1); err == nil || !strings.Contains(err.Error(), "allow it with allow: [os] in the column's config") {
		t.Errorf("AllowHint: err = %v", err)
	}
	if err := m.Load("open", src, ScriptConfig{Allow: []string{"os", "io", "debug", "load"}}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Invoke(context.Background(), "open", "probe", 9)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res); got != "[table table table function function function table table table]" {
		t.Fatalf("allowed libs: %s", got)
	}
	if err := m.Load("x", src, ScriptConfig{Allow: []string{"net"}}); err == nil || !strings.Contains(err.Error(), "net") {
		t.Fatalf("unknown lib: %v", err)
	}
	// require of a file is refused in the sandbox; Go modules work.
	m.RegisterModule("greet", map[string]lua.LGFunction{"hi": func(L *lua.LState) int { L.Push(lua.LString("hi " + L.CheckString(1))); return 1 }})
	if err := m.Load("req", `function f() return require("greet").hi("bob") end function g() return require("os") end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	res, err = m.Invoke(context.Background(), "req", "f", 1)
	if err != nil || res[0] != "hi bob" {
		t.Fatalf("module: %v %v", res, err)
	}
	if _, err := m.Invoke(context.Background(), "req", "g", 1); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("require(os) in sandbox: %v", err)
	}
}

func TestStats(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("s", `function ok() return 1 end function bad() error("boom") end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		m.Invoke(context.Background(), "s", "ok", 1)
	}
	m.Invoke(context.Background(), "s", "bad", 1)
	st := m.Stats()
	if len(st) != 1 || st[0].Script != "s" || st[0].Calls != 6 || st[0].Errors != 1 || st[0].VMsCore < 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestLoadFile(t *testing.T) {
	m := newTestManager(t, Options{})
	path := t.TempDir() + "/f.lua"
	if err := os.WriteFile(path, []byte("function f(a, b) return a .. b end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.LoadFile(path, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Invoke(context.Background(), path, "f", 1, "a", "b")
	if err != nil || res[0] != "ab" {
		t.Fatalf("%v %v", res, err)
	}
	if err := m.LoadFile(path+".missing", ScriptConfig{}); err == nil || !strings.Contains(err.Error(), "f.lua.missing") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestDoPanicDiscardsVM(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("p", `function ok(n) return n end`, ScriptConfig{Pool: PoolConfig{Strategy: StrategyCore, Core: 1}}); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic in f did not propagate")
			}
		}()
		m.Do(context.Background(), "p", func(vm *VM) error { panic("in f") })
	}()
	st := stats(t, m, "p")
	if st.VMsClosed != 1 || st.VMsCore != 0 {
		t.Fatalf("the VM of a panicking f was kept: %+v", st)
	}
	if _, err := m.Invoke(context.Background(), "p", "ok", 1, 1); err != nil {
		t.Fatal(err)
	}
}

func TestReusedRow(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load("r", `function f(row) row.total = row.price * row.qty return row.id end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	rows := []map[string]any{
		{"id": "a", "price": 2.5, "qty": int64(4)},
		{"id": "b", "price": 1.0, "qty": int64(3)},
	}
	err := m.Do(context.Background(), "r", func(vm *VM) error {
		fn, err := vm.Func("f")
		if err != nil {
			return err
		}
		for _, row := range rows {
			id, err := vm.Call1(fn, vm.Row(row))
			if err != nil {
				return err
			}
			if id.String() != row["id"] {
				t.Errorf("id = %s, want %s", id, row["id"])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows[0]["total"] != int64(10) || rows[1]["total"] != int64(3) {
		t.Fatalf("rows = %v", rows)
	}
}

// TestCollector: the Manager's collector reads Stats at scrape time, one
// series per script, label values escaped, help and type given.
func TestCollector(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.Load(`a"b.lua`, `function ok() return 1 end function bad() error("x") end`, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	m.Invoke(context.Background(), `a"b.lua`, "ok", 1)
	m.Invoke(context.Background(), `a"b.lua`, "bad", 1)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		"# HELP luavm_calls_total Lua function calls.\n# TYPE luavm_calls_total counter\n",
		`luavm_calls_total{script="a\"b.lua"} 2` + "\n",
		`luavm_errors_total{script="a\"b.lua"} 1` + "\n",
		`luavm_vms_core{script="a\"b.lua"} 1` + "\n",
		`luavm_vms_created_total{script="a\"b.lua"} 1` + "\n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, buf.String())
		}
	}
	if len(families) != len(statFamilies) {
		t.Errorf("%d families, want %d:\n%s", len(families), len(statFamilies), buf.String())
	}
}
