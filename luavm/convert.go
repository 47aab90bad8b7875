package luavm

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Null is json.null: the Lua value JSON null decodes to, and that encodes back
// to null, so nulls survive a decode/encode round trip (a Lua table cannot hold
// nil). FromLua turns it into Go nil. It is one immutable value shared by
// every VM.
var Null lua.LValue = &lua.LUserData{Value: nullValue{}}

type nullValue struct{}

func (nullValue) String() string { return "null" }

// smallNumbers holds the Lua numbers -256..1023 already boxed in an
// lua.LValue interface: converting a float64 to an interface allocates, and
// small whole numbers (counts, flags, enum codes, quantities) are the most
// common values a row hands to a script.
var smallNumbers = func() (t [1280]lua.LValue) {
	for i := range t {
		t[i] = lua.LNumber(i - 256)
	}
	return t
}()

// intNumber converts an integer without allocating when it is small.
func intNumber(i int64) lua.LValue {
	if i >= -256 && i < 1024 {
		return smallNumbers[i+256]
	}
	return lua.LNumber(i)
}

// floatNumber converts a float without allocating when it is a small whole
// number (but not -0, which must stay negative).
func floatNumber(f float64) lua.LValue {
	if f >= -256 && f < 1024 && f == math.Trunc(f) && !(f == 0 && math.Signbit(f)) {
		return smallNumbers[int(f)+256]
	}
	return lua.LNumber(f)
}

// maxDepth bounds the nesting FromLua and json.encode follow, which also stops
// them on cyclic tables.
const maxDepth = 100

// ToLua converts a Go value to a Lua value: nil, bool, integers, floats,
// string, []byte, json.Number, []any, map[string]any (recursively), and
// lua.LValue as is; a time.Time becomes a number of Unix seconds with the
// fraction and a json.RawMessage the string of its JSON text (FromLua gives
// these back as a number and a string, not as the Go types). Any other value becomes a userdata holding it, which
// FromLua gives back unchanged. Integers beyond ±2^53 lose digits, since Lua
// 5.1 numbers are float64; rows keep them exact by staying in Go (NewRow).
func ToLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case lua.LValue:
		return x
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case []byte:
		return lua.LString(x)
	case int:
		return intNumber(int64(x))
	case int8:
		return intNumber(int64(x))
	case int16:
		return intNumber(int64(x))
	case int32:
		return intNumber(int64(x))
	case int64:
		return intNumber(int64(x))
	case uint:
		if x < 1024 {
			return intNumber(int64(x))
		}
		return lua.LNumber(x)
	case uint8:
		return intNumber(int64(x))
	case uint16:
		return intNumber(int64(x))
	case uint32:
		return intNumber(int64(x))
	case uint64:
		if x < 1024 {
			return intNumber(int64(x))
		}
		return lua.LNumber(x)
	case float32:
		return floatNumber(float64(x))
	case float64:
		return floatNumber(float64(x))
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return floatNumber(f)
		}
		return lua.LString(x)
	case time.Time:
		// Unix seconds with the fraction, so that scripts do arithmetic on
		// timestamps (row.ts + 60); float64 keeps sub-microsecond precision
		// for dates near now.
		return floatNumber(float64(x.Unix()) + float64(x.Nanosecond())/1e9)
	case json.RawMessage:
		// The JSON text, for json.decode.
		return lua.LString(x)
	case []any:
		t := L.CreateTable(len(x), 0)
		for _, e := range x {
			t.Append(toLuaElem(L, e))
		}
		return t
	case []string:
		t := L.CreateTable(len(x), 0)
		for _, e := range x {
			t.Append(lua.LString(e))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(x))
		for k, e := range x {
			t.RawSetString(k, toLuaElem(L, e))
		}
		return t
	case fmt.Stringer:
		// A date, time of day, uuid or decimal column's value: its text
		// (2026-11-29, 13:45:00, a uuid's, 12.50), which a script compares
		// and returns as it would the string columns that held them.
		return lua.LString(x.String())
	default:
		ud := L.NewUserData()
		ud.Value = v
		return ud
	}
}

// toLuaElem converts a container element: nil becomes Null, because a Lua
// table cannot hold nil and the slot would silently vanish.
func toLuaElem(L *lua.LState, v any) lua.LValue {
	if v == nil {
		return Null
	}
	return ToLua(L, v)
}

// Number stands in a results slice (out []any) for a number result held,
// unboxed, in a float64 slice beside it: converting a float64 to an
// interface allocates, and a computed column's result is mostly a number.
// compute's column path and the engines that fill such slices agree on it
// (compute.Processor.ProcessColumns, luajit.Script.ValuesColumnsNumbers);
// NumberToGo gives the value FromLua would have.
var Number any = numberMark{}

type numberMark struct{}

// NumberToGo is FromLua of the Lua number f: an int64 when f is whole and
// in range, otherwise the float64.
func NumberToGo(f float64) any { return numberToGo(f) }

// FromLua converts a Lua value to Go: nil and Null to nil, booleans, whole
// numbers to int64 and others to float64, strings, tables to []any when they
// are a sequence 1..n and to map[string]any otherwise (number keys written in
// decimal), a row proxy to its Go map, other userdata to their Value, and
// functions to the *lua.LFunction itself. Nesting deeper than 100 (a cyclic
// table) is cut off with nil.
func FromLua(v lua.LValue) any {
	out, _ := fromLua(v, 0)
	return out
}

func fromLua(v lua.LValue, depth int) (any, error) {
	switch x := v.(type) {
	case *lua.LNilType:
		return nil, nil
	case lua.LBool:
		return bool(x), nil
	case lua.LNumber:
		return numberToGo(float64(x)), nil
	case lua.LString:
		return string(x), nil
	case *lua.LTable:
		if depth >= maxDepth {
			return nil, fmt.Errorf("table nested deeper than %d (cyclic?)", maxDepth)
		}
		return tableToGo(x, depth+1)
	case *lua.LUserData:
		if x == Null {
			return nil, nil
		}
		if r, ok := x.Value.(*rowData); ok {
			return r.goMap(), nil
		}
		return x.Value, nil
	default:
		return v, nil
	}
}

func numberToGo(f float64) any {
	if isInt64(f) {
		return int64(f)
	}
	return f
}

// isInt64 reports whether the Lua number f comes back to Go as an int64.
func isInt64(f float64) bool {
	return f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 && !math.IsInf(f, 0)
}

func tableToGo(t *lua.LTable, depth int) (any, error) {
	n := t.MaxN()
	count := 0
	isArray := true
	var firstErr error
	t.ForEach(func(k, _ lua.LValue) {
		count++
		if num, ok := k.(lua.LNumber); !ok || float64(num) != math.Trunc(float64(num)) || num < 1 || int(num) > n {
			isArray = false
		}
	})
	if isArray && count == n && n > 0 {
		out := make([]any, n)
		for i := 1; i <= n; i++ {
			e, err := fromLua(t.RawGetInt(i), depth)
			if err != nil {
				return nil, err
			}
			out[i-1] = e
		}
		return out, nil
	}
	out := make(map[string]any, count)
	t.ForEach(func(k, val lua.LValue) {
		if firstErr != nil {
			return
		}
		e, err := fromLua(val, depth)
		if err != nil {
			firstErr = err
			return
		}
		out[keyString(k)] = e
	})
	return out, firstErr
}

func keyString(k lua.LValue) string {
	if n, ok := k.(lua.LNumber); ok {
		if v, isInt := numberToGo(float64(n)).(int64); isInt {
			return strconv.FormatInt(v, 10)
		}
	}
	return k.String()
}

// sortedKeys returns the keys of m in order, so pairs() over a row proxy is
// deterministic.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
