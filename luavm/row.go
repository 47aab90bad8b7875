package luavm

import (
	lua "github.com/yuin/gopher-lua"
)

// rowTypeName names the row proxy metatable in each VM's registry.
const rowTypeName = "sluice.row"

// rowData is what a row proxy userdata holds: the caller's map, read and
// written in place.
type rowData struct{ m map[string]any }

// NewRow returns a lazy proxy of row for Lua: row.x and row["x"] convert only
// the field read; row.x = v writes FromLua(v) into the Go map and row.x = nil
// deletes the key; pairs(row) iterates the keys in sorted order; json.encode
// (row) marshals the Go map itself. The proxy must not be used after the call
// that received it returns if the caller reuses the map.
func NewRow(L *lua.LState, row map[string]any) lua.LValue {
	ud := L.NewUserData()
	ud.Value = &rowData{m: row}
	ud.Metatable = L.GetTypeMetatable(rowTypeName)
	return ud
}

// Row is NewRow without allocating: the VM keeps one proxy and points it at
// row. The value is valid until the next Row call on this VM, so it suits the
// hot path of one row per call (Do + Call1); a script that keeps the proxy
// past the call (in a global or upvalue) sees the next row through it, so
// use NewRow when rows must outlive the call.
func (vm *VM) Row(row map[string]any) lua.LValue {
	if vm.row == nil {
		vm.rowData = &rowData{}
		vm.row = vm.L.NewUserData()
		vm.row.Value = vm.rowData
		vm.row.Metatable = vm.L.GetTypeMetatable(rowTypeName)
	}
	vm.rowData.m = row
	return vm.row
}

func installRowType(L *lua.LState) {
	mt := L.NewTypeMetatable(rowTypeName)
	mt.RawSetString("__index", L.NewFunction(rowIndex))
	mt.RawSetString("__newindex", L.NewFunction(rowNewIndex))
	mt.RawSetString("__len", L.NewFunction(rowLen))
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString("row"))
		return 1
	}))
}

func checkRow(L *lua.LState) *rowData {
	ud := L.CheckUserData(1)
	r, ok := ud.Value.(*rowData)
	if !ok {
		L.ArgError(1, "row expected")
	}
	return r
}

func rowIndex(L *lua.LState) int {
	r := checkRow(L)
	key := L.CheckString(2)
	v, ok := r.m[key]
	if !ok || v == nil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(ToLua(L, v))
	return 1
}

func rowNewIndex(L *lua.LState) int {
	r := checkRow(L)
	key := L.CheckString(2)
	v := L.Get(3)
	if v == lua.LNil {
		delete(r.m, key)
		return 0
	}
	r.m[key] = FromLua(v)
	return 0
}

func rowLen(L *lua.LState) int {
	r := checkRow(L)
	L.Push(lua.LNumber(len(r.m)))
	return 1
}

// rowPairs is pairs() for a row proxy (gopher-lua's pairs has no __pairs):
// it walks a sorted snapshot of the keys taken when pairs was called.
func rowPairs(L *lua.LState, r *rowData) int {
	keys := sortedKeys(r.m)
	i := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		for i < len(keys) {
			k := keys[i]
			i++
			if v, ok := r.m[k]; ok {
				L.Push(lua.LString(k))
				if v == nil {
					L.Push(Null)
				} else {
					L.Push(ToLua(L, v))
				}
				return 2
			}
		}
		L.Push(lua.LNil)
		return 1
	}))
	L.Push(lua.LNil)
	L.Push(lua.LNil)
	return 3
}
