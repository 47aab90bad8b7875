package luavm

import (
	"bytes"
	"encoding/json"

	lua "github.com/yuin/gopher-lua"
)

// The json module is implemented in Go: Lua code calls json.encode /
// json.decode and never walks a document in interpreted code. json.encode of a
// row proxy marshals the Go map itself, so fields Lua did not touch keep their
// exact Go values (an int64 keeps every digit, nil stays null).
var jsonFuncs = map[string]lua.LGFunction{
	"encode": jsonEncode,
	"decode": jsonDecode,
}

func openJSON(L *lua.LState) *lua.LTable {
	mod := L.SetFuncs(L.NewTable(), jsonFuncs)
	mod.RawSetString("null", Null)
	return mod
}

func jsonEncode(L *lua.LState) int {
	v := L.CheckAny(1)
	goValue, err := fromLua(v, 0)
	if err != nil {
		L.RaiseError("json.encode: %v", err)
		return 0
	}
	if t, ok := v.(*lua.LTable); ok && isEmptyTable(t) {
		goValue = map[string]any{} // an empty table encodes as {}, as lua-cjson does
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(goValue); err != nil {
		L.RaiseError("json.encode: %v", err)
		return 0
	}
	out := buf.Bytes()
	L.Push(lua.LString(out[:len(out)-1])) // drop Encode's trailing newline
	return 1
}

func isEmptyTable(t *lua.LTable) bool {
	k, _ := t.Next(lua.LNil)
	return k == lua.LNil
}

func jsonDecode(L *lua.LState) int {
	s := L.CheckString(1)
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		L.RaiseError("json.decode: %v", err)
		return 0
	}
	if dec.More() {
		L.RaiseError("json.decode: trailing data after the JSON value at offset %d", dec.InputOffset())
		return 0
	}
	L.Push(decodedToLua(L, v))
	return 1
}

func decodedToLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return Null
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return lua.LString(x)
		}
		return floatNumber(f)
	case []any:
		t := L.CreateTable(len(x), 0)
		for _, e := range x {
			t.Append(decodedToLua(L, e))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(x))
		for k, e := range x {
			t.RawSetString(k, decodedToLua(L, e))
		}
		return t
	default:
		return ToLua(L, x)
	}
}
