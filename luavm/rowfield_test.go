package luavm

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"runtime"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// TestRowFieldFastPath: row.x is read by the OP_GETTABLEKS wrapper
// (rowfield.go), not by the __index metamethod, and gives what the
// metamethod gives (row[k], a key in a register, still takes it) for every
// kind of cell and map value, for a row held by column and a map row, in a
// nested function too; other values (tables, strings) still index as
// before. The probe: the metatable's __index is replaced by one that fails,
// so a read that reaches it fails.
func TestRowFieldFastPath(t *testing.T) {
	if !rowFieldFast {
		t.Fatalf("the row.x wrapper is not installed: gopher-lua's %s is not as rowfield.go expects", errRowFieldLayout)
	}
	m := newTestManager(t, Options{})
	keys := []string{"int", "big", "float", "negzero", "str", "yes", "no", "null", "missing", "obj", "ts", "raw"}
	src := `
function slow(row, k)
  return row[k]
end
function others(row)
  local t = {a = 1}
  local function inner() return row.int end
  return inner() + t.a, ("x"):upper(), #row
end
`
	for _, k := range keys {
		src += "function fast_" + k + "(row) return row." + k + " end\n"
	}
	if err := m.Load("fast.lua", src, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	row := map[string]any{
		"int": int64(1 << 40), "big": json.Number("123456789012345678901234567890"), "float": 2.5, "negzero": math.Copysign(0, -1),
		"str": "s", "yes": true, "no": false, "null": nil, "obj": map[string]any{"k": []any{int64(1), nil}},
		"ts": time.Unix(1700000000, 5e8), "raw": json.RawMessage(`{"a":1}`),
	}
	cb := &colbatch.Batch{}
	cb.AddRow(1)
	r := cb.AddRow(2)
	for k, v := range row {
		cb.Set(cb.ColumnOf(k), r, v)
	}
	show := func(v lua.LValue) string {
		b, _ := json.Marshal(FromLua(v))
		return v.Type().String() + " " + string(b)
	}
	err := m.Do(context.Background(), "fast.lua", func(vm *VM) error {
		slow, err := vm.Func("slow")
		if err != nil {
			return err
		}
		others, err := vm.Func("others")
		if err != nil {
			return err
		}
		for name, proxy := range map[string]func() lua.LValue{"map": func() lua.LValue { return vm.Row(row) }, "columns": func() lua.LValue { return vm.RowAt(cb, r) }} {
			mt := vm.L.GetTypeMetatable(rowTypeName).(*lua.LTable)
			index := mt.RawGetString("__index")
			for _, k := range keys {
				want, err := vm.Call(slow, 1, proxy(), lua.LString(k))
				if err != nil {
					t.Fatal(err)
				}
				fast, err := vm.Func("fast_" + k)
				if err != nil {
					t.Fatal(err)
				}
				mt.RawSetString("__index", vm.L.NewFunction(func(L *lua.LState) int {
					L.RaiseError("row.%s took the metamethod", L.CheckString(2))
					return 0
				}))
				got, err := vm.Call1(fast, proxy())
				mt.RawSetString("__index", index)
				if err != nil {
					t.Fatalf("%s: row.%s: %v", name, k, err)
				}
				if show(got) != show(want[0]) {
					t.Errorf("%s: row.%s = %s, row[k] = %s", name, k, show(got), show(want[0]))
				}
			}
			got, err := vm.Call(others, 3, proxy())
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != lua.LNumber(1<<40+1) || got[1] != lua.LString("X") || got[2] != lua.LNumber(len(row)) {
				t.Errorf("%s: inner, table, string and #row: %v", name, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRowNumbersKept: the numbers a script reads from rows held by column
// (boxed in blocks, rowData.number) keep their values when the script keeps
// them past their row, across blocks and collections.
func TestRowNumbersKept(t *testing.T) {
	m := newTestManager(t, Options{})
	src := `
local kept = {}
function keep(row) kept[#kept + 1] = row.f; kept[#kept + 1] = row.i; return #kept end
function sum() local s = 0 for _, v in ipairs(kept) do s = s + v end return s end`
	if err := m.Load("keep.lua", src, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	const rows = 3*numberBlock + 7
	cb := &colbatch.Batch{}
	want := 0.0
	for r := range rows {
		cb.AddRow(r + 1)
		f, i := float64(r)+0.5, int64(r)*1_000_003
		cb.Set(cb.ColumnOf("f"), r, f)
		cb.Set(cb.ColumnOf("i"), r, i)
		want += f + float64(i)
	}
	err := m.Do(context.Background(), "keep.lua", func(vm *VM) error {
		keep, err := vm.Func("keep")
		if err != nil {
			return err
		}
		for r := range rows {
			if _, err := vm.Call1(keep, vm.RowAt(cb, r)); err != nil {
				return err
			}
			if r%100 == 0 {
				runtime.GC()
			}
		}
		sum, err := vm.Func("sum")
		if err != nil {
			return err
		}
		got, err := vm.Call1(sum, lua.LNil)
		if err != nil {
			return err
		}
		if got != lua.LNumber(want) {
			t.Errorf("the numbers kept sum to %v, want %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRowFieldWrites: row.x = v (the OP_SETTABLEKS wrapper, rowfield.go)
// changes the row as row[k] = v (the __newindex metamethod) does, for every
// kind of value and a delete, on a map row and a row held by column (the
// cells Set makes of the map row's values); the probe is a failing
// __newindex again.
func TestRowFieldWrites(t *testing.T) {
	m := newTestManager(t, Options{})
	const writes = `{"num", 2.5}, {"int", 3}, {"big", 2^63}, {"huge", 2^70}, {"neg", -7}, {"str", "s"}, {"yes", true}, {"no", false},
  {"tab", {a = 1, b = {true, "x"}}}, {"null", json.null}, {"kept", "new"}, {"gone", nil}, {"reg", x}, {"inc", row.inc + 1}`
	src := `local json = require("json")
function slow(row)
  local x = row.inc * 2
  for _, kv in ipairs({` + writes + `}) do
    local k, v = kv[1], kv[2]
    row[k] = v
  end
  row["gone"] = nil
end
function fast(row)
  local x = row.inc * 2
  row.num = 2.5 row.int = 3 row.big = 2^63 row.huge = 2^70 row.neg = -7 row.str = "s" row.yes = true row.no = false
  row.tab = {a = 1, b = {true, "x"}} row.null = json.null row.kept = "new" row.gone = nil row.reg = x row.inc = row.inc + 1
end`
	if err := m.Load("writes.lua", src, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	base := map[string]any{"inc": int64(41), "kept": "old", "gone": 1.5}
	show := func(row map[string]any) string {
		keys := sortedKeys(row)
		var b []byte
		for _, k := range keys {
			b = fmt.Appendf(b, "%s=%#v ", k, row[k])
		}
		return string(b)
	}
	columns := func() (*colbatch.Batch, int) {
		cb := &colbatch.Batch{}
		cb.AddRow(1)
		r := cb.AddRow(2)
		for k, v := range base {
			cb.Set(cb.ColumnOf(k), r, v)
		}
		return cb, r
	}
	err := m.Do(context.Background(), "writes.lua", func(vm *VM) error {
		slow, err := vm.Func("slow")
		if err != nil {
			return err
		}
		fast, err := vm.Func("fast")
		if err != nil {
			return err
		}
		mt := vm.L.GetTypeMetatable(rowTypeName).(*lua.LTable)
		newIndex := mt.RawGetString("__newindex")
		failing := vm.L.NewFunction(func(L *lua.LState) int {
			L.RaiseError("row.%s = v took the metamethod", L.CheckString(2))
			return 0
		})
		// map rows
		want, got := maps.Clone(base), maps.Clone(base)
		if _, err := vm.Call1(slow, vm.Row(want)); err != nil {
			t.Fatal(err)
		}
		mt.RawSetString("__newindex", failing)
		_, err = vm.Call1(fast, vm.Row(got))
		mt.RawSetString("__newindex", newIndex)
		if err != nil {
			t.Fatalf("map row: %v", err)
		}
		if show(got) != show(want) {
			t.Errorf("map row:\n row.x = v: %s\nrow[k] = v: %s", show(got), show(want))
		}
		// rows held by column: the cells
		wcb, wr := columns()
		gcb, gr := columns()
		if _, err := vm.Call1(slow, vm.RowAt(wcb, wr)); err != nil {
			t.Fatal(err)
		}
		mt.RawSetString("__newindex", failing)
		_, err = vm.Call1(fast, vm.RowAt(gcb, gr))
		mt.RawSetString("__newindex", newIndex)
		if err != nil {
			t.Fatalf("row held by column: %v", err)
		}
		cells := func(cb *colbatch.Batch, r int) string {
			var b []byte
			for _, k := range sortedKeys(cb.Rows()[r]) {
				c := cb.Cols[cb.Find(k)].Cells[r]
				v, _ := cb.Any(c)
				b = fmt.Appendf(b, "%s=%d:%#v ", k, c.Kind, v)
			}
			return string(b)
		}
		// what the map row holds, as cells (colbatch's Set of each value)
		mcb := &colbatch.Batch{}
		mr := mcb.AddRow(1)
		for k, v := range want {
			mcb.Set(mcb.ColumnOf(k), mr, v)
		}
		if g, w := cells(gcb, gr), cells(mcb, mr); g != w {
			t.Errorf("row held by column:\n row.x = v: %s\n   the map: %s", g, w)
		}
		if g, w := cells(wcb, wr), cells(mcb, mr); g != w {
			t.Errorf("row held by column:\nrow[k] = v: %s\n   the map: %s", g, w)
		}
		if len(want) != 13 || want["inc"] != int64(42) || want["reg"] != int64(82) {
			t.Errorf("the writes did not all land: %s", show(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
