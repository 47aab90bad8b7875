package luavm

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

func TestToLuaNumbers(t *testing.T) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	f := func(in any, want float64) {
		t.Helper()
		got, ok := ToLua(L, in).(lua.LNumber)
		if !ok || float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Errorf("ToLua(%#v) = %#v, want %v", in, got, want)
		}
	}
	f(0, 0)
	f(int64(-256), -256)
	f(int8(-7), -7)
	f(uint16(1023), 1023)
	f(uint64(1024), 1024)
	f(uint64(math.MaxUint64), math.MaxUint64)
	f(int64(1<<40), 1<<40)
	f(2.5, 2.5)
	f(1000.0, 1000)
	f(-257.0, -257)
	f(math.Copysign(0, -1), math.Copysign(0, -1))
	f(float32(3), 3)
	f(time.Unix(1700000000, 5e8), 1700000000.5)
	f(time.Date(1969, 12, 31, 23, 59, 59, 25e7, time.UTC), -0.75)
	if got := ToLua(L, json.RawMessage(`{"a":[1,null]}`)); got != lua.LString(`{"a":[1,null]}`) {
		t.Errorf("ToLua(json.RawMessage) = %#v, want the JSON text", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = ToLua(L, int64(42)); _ = ToLua(L, 7.0) }); n != 0 {
		t.Errorf("small numbers allocate: %v allocs", n)
	}
}

func TestFromLua(t *testing.T) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	tbl := L.NewTable()
	tbl.RawSetString("self", tbl) // cyclic: cut off, no hang
	if got := FromLua(tbl); got == nil {
		t.Fatal("cyclic table gave nil at the top")
	}
	if got := FromLua(lua.LNumber(1e300)); got != 1e300 {
		t.Errorf("1e300 = %#v", got)
	}
	if got := FromLua(lua.LNumber(-3)); got != int64(-3) {
		t.Errorf("-3 = %#v", got)
	}
	if got := FromLua(Null); got != nil {
		t.Errorf("Null = %#v", got)
	}
	arr := L.NewTable()
	arr.Append(lua.LString("a"))
	arr.Append(Null)
	arr.Append(lua.LTrue)
	if got, ok := FromLua(arr).([]any); !ok || len(got) != 3 || got[0] != "a" || got[1] != nil || got[2] != true {
		t.Errorf("array = %#v", FromLua(arr))
	}
	mixed := L.NewTable()
	mixed.RawSetInt(1, lua.LString("x"))
	mixed.RawSetString("k", lua.LNumber(2))
	if got, ok := FromLua(mixed).(map[string]any); !ok || got["1"] != "x" || got["k"] != int64(2) {
		t.Errorf("mixed = %#v", FromLua(mixed))
	}
}
