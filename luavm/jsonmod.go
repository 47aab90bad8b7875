package luavm

import (
	"bytes"
	"encoding/json"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicedb/sluice/internal/jsonw"
)

// The json module is implemented in Go: Lua code calls json.encode /
// json.decode and never walks a document in interpreted code. json.encode of a
// row proxy encodes the Go map itself with internal/jsonw, so fields Lua did
// not touch keep their exact Go values (an int64 keeps every digit, nil stays
// null) and the bytes are what encoding/json writes with SetEscapeHTML(false).
func openJSON(L *lua.LState) *lua.LTable {
	enc := &jsonEncoder{}
	mod := L.SetFuncs(L.NewTable(), map[string]lua.LGFunction{
		"encode": enc.encode,
		"decode": jsonDecode,
	})
	mod.RawSetString("null", Null)
	return mod
}

// maxKeptEncodeBuffer bounds the buffer a VM keeps between json.encode
// calls, so one huge document does not pin its memory for the VM's life.
const maxKeptEncodeBuffer = 64 << 10

// jsonEncoder is json.encode for one VM. An LState runs one call at a time,
// so buf needs no lock; it is reused by every call, so that the only
// allocation of encoding a row proxy is the result's LString.
type jsonEncoder struct {
	buf []byte
}

func (e *jsonEncoder) encode(L *lua.LState) int {
	v := L.CheckAny(1)
	var err error
	buf := e.buf[:0]
	switch x := v.(type) {
	case *lua.LUserData:
		if r, ok := x.Value.(*rowData); ok {
			buf, err = jsonw.AppendValue(buf, r.goMap())
			break
		}
		buf, err = e.appendLua(buf, v)
	case *lua.LTable:
		if isEmptyTable(x) {
			buf = append(buf, "{}"...) // an empty table encodes as {}, as lua-cjson does
			break
		}
		buf, err = e.appendLua(buf, v)
	default:
		buf, err = e.appendLua(buf, v)
	}
	if err != nil {
		L.RaiseError("json.encode: %v", err)
		return 0
	}
	L.Push(lua.LString(buf))
	if cap(buf) <= maxKeptEncodeBuffer {
		e.buf = buf[:0]
	}
	return 1
}

// appendLua converts v to Go values (tables to maps and slices) and encodes
// them.
func (e *jsonEncoder) appendLua(buf []byte, v lua.LValue) ([]byte, error) {
	goValue, err := fromLua(v, 0)
	if err != nil {
		return buf, err
	}
	return jsonw.AppendValue(buf, goValue)
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
			// Only a number beyond float64's range fails here (the decoder
			// checked the syntax): JSON has no infinity, and LuaJIT's
			// json.decode says the same (luajit/host.c, dec_value).
			L.RaiseError("json.decode: number %s is out of range (JSON has no infinity)", string(x))
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
