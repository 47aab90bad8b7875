package compute

import (
	"sync"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicedb/sluice/internal/jsonw"
	"github.com/sluicedb/sluice/luavm"
)

// LuaModule is the name of the host module compute gives every script,
// require("sluice"): row operations done in Go in one call, so that a script
// crosses the Go/Lua boundary once per operation rather than once per key
// (the lua-resty-core lesson):
//
//	sluice.encode(row [, omit])  JSON of the row (keys sorted) without the keys
//	                             in the array omit; the row is not changed
//	sluice.delete(row, keys)     deletes the keys in the array keys from the row
//	sluice.config(key)           the value of key in the function's params:
//	                             (a string, number or bool), nil if unset
//
// row is the row proxy a function receives (or a plain table). encode writes
// the same bytes as json.encode, with compute's encoder (AppendJSONRow).
const LuaModule = "sluice"

var luaModuleFuncs = map[string]lua.LGFunction{
	"encode": luaEncode,
	"delete": luaDelete,
	"config": luaConfig,
}

func luaConfig(L *lua.LState) int {
	v, ok := luavm.HostOf(L).Param(L.CheckString(1))
	if !ok {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(luavm.ToLua(L, v))
	return 1
}

// registerLuaModule adds the module to m; scripts loaded afterwards see it.
func registerLuaModule(m *luavm.Manager) {
	if m != nil {
		m.RegisterModule(LuaModule, luaModuleFuncs)
	}
}

var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuf keeps one huge row from pinning a huge buffer in the pool.
const maxPooledBuf = 64 << 10

func luaEncode(L *lua.LState) int {
	v := luavm.FromLua(L.CheckAny(1))
	var arr [16]string
	omit := arr[:0]
	if t, ok := L.Get(2).(*lua.LTable); ok {
		for i := 1; i <= t.Len(); i++ {
			omit = append(omit, lua.LVAsString(t.RawGetInt(i)))
		}
	}
	bp := encodeBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	var err error
	switch x := v.(type) {
	case map[string]any:
		buf, err = appendJSONRowOmitting(buf, x, omit)
	case nil:
		buf = append(buf, "null"...)
	default:
		buf, err = jsonw.AppendValue(buf, x)
	}
	if err != nil {
		L.RaiseError("sluice.encode: %v", err)
	}
	L.Push(lua.LString(buf)) // copies buf
	if cap(buf) <= maxPooledBuf {
		*bp = buf
		encodeBufs.Put(bp)
	}
	return 1
}

func luaDelete(L *lua.LState) int {
	keys := L.CheckTable(2)
	switch x := L.CheckAny(1).(type) {
	case *lua.LUserData:
		if !luavm.IsRow(x) {
			L.ArgError(1, "row expected")
		}
		for i := 1; i <= keys.Len(); i++ {
			luavm.DeleteField(x, lua.LVAsString(keys.RawGetInt(i)))
		}
	case *lua.LTable:
		for i := 1; i <= keys.Len(); i++ {
			x.RawSetString(lua.LVAsString(keys.RawGetInt(i)), lua.LNil)
		}
	default:
		L.ArgError(1, "row or table expected")
	}
	return 0
}
