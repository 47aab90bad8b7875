package luavm

import (
	lua "github.com/yuin/gopher-lua"
)

// The sandbox keeps one call from changing what a later call on the same VM
// sees, as the LuaJIT engine does (luajit/host.lua): the globals are a proxy
// emptied after each call (see VM.proxy); what is shared by every call is
// made read-only here.
//
//   - The library tables (string, table, math, coroutine) and the modules
//     require returns (json, RegisterModule's) are empty proxies whose
//     metatable reads from the real table and refuses writes ("string is
//     read-only"); the real tables are reachable from no script.
//   - Strings' metatable reads the real string table and is hidden
//     (getmetatable("") is false), so ("x"):upper() cannot be redirected.
//   - getmetatable hides the metatables of host values (rows, json.null;
//     gopher-lua's would hand them out to be changed); setmetatable takes a
//     table only, as in Lua 5.1 (gopher-lua's would set the metatable of
//     every string, number or userdata of the process).
//   - rawset, table.insert, table.remove and table.sort refuse the read-only
//     proxies (they would write past __newindex).
//   - getfenv and setfenv (getfenv(0) is the real globals table), module,
//     newproxy and _printregs are left out, as in LuaJIT's sandbox.
//   - collectgarbage("collect") and ("step") do nothing (gopher-lua's would
//     run a full Go GC of the process per call); ("count") is the process's
//     live Go heap in KiB, read without stopping the world; other options
//     fail.
//
// Cost: a library read (string.upper) passes one __index more; measured in
// BenchmarkLibraryAccess (see docs/pool.md, "Isolation of globals").

// removedGlobals are the functions of gopher-lua's base library the sandbox
// leaves out whatever the config allows.
var removedGlobals = []string{"getfenv", "setfenv", "module", "newproxy", "_printregs"}

// sealedLibs are the library tables made read-only, when opened.
var sealedLibs = []string{"string", "table", "math", "coroutine"}

// seal makes the libraries in g read-only and replaces the base functions
// that could reach past the sandbox. It runs once per VM, after the
// libraries are opened and wrapped (openLibs).
func (vm *VM) seal(g *lua.LTable) {
	L := vm.L
	vm.sealed = make(map[*lua.LTable]string, len(sealedLibs)+2)
	for _, name := range removedGlobals {
		g.RawSetString(name, lua.LNil)
	}
	if tab, ok := g.RawGetString("table").(*lua.LTable); ok {
		for _, name := range []string{"insert", "remove", "sort"} {
			vm.refuseSealed(tab, name)
		}
	}
	if str, ok := g.RawGetString("string").(*lua.LTable); ok {
		// gopher-lua's string metatable is the string table itself (with
		// __index = itself): replace it by a hidden one, and drop __index
		// from the table, where string.__index would hand out the real
		// table.
		str.RawSetString("__index", lua.LNil)
		meta := L.NewTable()
		meta.RawSetString("__index", str)
		meta.RawSetString("__metatable", lua.LFalse)
		L.SetMetatable(lua.LString(""), meta)
	}
	for _, name := range sealedLibs {
		if lib, ok := g.RawGetString(name).(*lua.LTable); ok {
			g.RawSetString(name, vm.readOnly(name, lib))
		}
	}
	g.RawSetString("getmetatable", L.NewFunction(getMetatable))
	g.RawSetString("setmetatable", L.NewFunction(setMetatable))
	if rawset, ok := g.RawGetString("rawset").(*lua.LFunction); ok && rawset.IsG {
		g.RawSetString("rawset", L.NewFunction(func(L *lua.LState) int {
			vm.checkWritable(L, L.CheckTable(1))
			return rawset.GFunction(L)
		}))
	}
	g.RawSetString("collectgarbage", L.NewFunction(collectGarbage))
}

// readOnly returns an empty table that reads lib's fields through its
// metatable and refuses writes; lib itself stays out of the scripts' reach.
func (vm *VM) readOnly(name string, lib *lua.LTable) *lua.LTable {
	L := vm.L
	meta := L.NewTable()
	meta.RawSetString("__index", lib)
	meta.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("%s is read-only", name)
		return 0
	}))
	meta.RawSetString("__metatable", lua.LFalse)
	proxy := L.NewTable()
	proxy.Metatable = meta
	vm.sealed[proxy] = name
	return proxy
}

// checkWritable raises the read-only error for the sealed tables, and marks
// the globals dirty when t is the globals proxy (a raw write does not pass
// its __newindex). Every table with no metatable, most of them, costs one
// comparison.
func (vm *VM) checkWritable(L *lua.LState, t *lua.LTable) {
	if t.Metatable == lua.LNil {
		return
	}
	if t == vm.proxy {
		vm.dirty = vm.proxyMeta != nil // with ShareGlobals, proxy is base: never emptied
		return
	}
	if name, ok := vm.sealed[t]; ok {
		L.RaiseError("%s is read-only", name)
	}
}

// refuseSealed wraps the table library's function name, which writes to its
// first argument raw, with checkWritable.
func (vm *VM) refuseSealed(tab *lua.LTable, name string) {
	fn, ok := tab.RawGetString(name).(*lua.LFunction)
	if !ok || !fn.IsG {
		return
	}
	tab.RawSetString(name, vm.L.NewFunction(func(L *lua.LState) int {
		vm.checkWritable(L, L.CheckTable(1))
		return fn.GFunction(L)
	}))
}

// getMetatable is gopher-lua's getmetatable (which honours __metatable),
// except that host values (rows, json.null) have their metatables hidden:
// false.
func getMetatable(L *lua.LState) int {
	v := L.CheckAny(1)
	mt := L.GetMetatable(v)
	if _, ok := mt.(*lua.LTable); ok && v.Type() != lua.LTTable {
		mt = lua.LFalse
	}
	L.Push(mt)
	return 1
}

// setMetatable is Lua 5.1's setmetatable: on a table only, and not over a
// protected (__metatable) metatable.
func setMetatable(L *lua.LState) int {
	t := L.CheckTable(1)
	mt := L.Get(2)
	if mt != lua.LNil {
		mt = L.CheckTable(2)
	}
	if cur, ok := t.Metatable.(*lua.LTable); ok && cur.RawGetString("__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	t.Metatable = mt
	L.SetTop(1)
	return 1
}

// collectGarbage is the sandbox's collectgarbage: see the top of this file.
func collectGarbage(L *lua.LState) int {
	switch opt := L.OptString(1, "collect"); opt {
	case "collect":
		L.Push(lua.LNumber(0))
	case "step":
		L.Push(lua.LFalse)
	case "count":
		L.Push(lua.LNumber(float64(liveHeap()) / 1024))
	default:
		L.RaiseError("collectgarbage: option %s is not allowed", opt)
	}
	return 1
}

// loadInProxy makes the chunks of an allowed load, loadstring, loadfile and
// dofile run in the call's globals (the proxy), as the script's own code
// does: gopher-lua gives them the real globals table, whose writes no
// cleanup would undo.
func (vm *VM) loadInProxy(g *lua.LTable) {
	for _, name := range []string{"load", "loadstring", "loadfile"} {
		load, ok := g.RawGetString(name).(*lua.LFunction)
		if !ok || !load.IsG {
			continue
		}
		g.RawSetString(name, vm.L.NewFunction(func(L *lua.LState) int {
			n := load.GFunction(L)
			if n >= 1 {
				if fn, ok := L.Get(-n).(*lua.LFunction); ok {
					fn.Env = vm.proxy
				}
			}
			return n
		}))
	}
	if g.RawGetString("dofile") != lua.LNil {
		g.RawSetString("dofile", vm.L.NewFunction(func(L *lua.LState) int {
			fn, err := L.LoadFile(L.OptString(1, ""))
			if err != nil {
				L.RaiseError("%s", err.Error())
			}
			fn.Env = vm.proxy
			top := L.GetTop()
			L.Push(fn)
			L.Call(0, lua.MultRet)
			return L.GetTop() - top
		}))
	}
}
