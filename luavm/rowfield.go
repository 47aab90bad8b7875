package luavm

import (
	"reflect"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// Reading a field of a row, row.x, is the one thing every computed column
// does. Through the proxy's __index metamethod it costs gopher-lua a full Go
// function call (a call frame, the key boxed into an interface, the result
// pushed and popped: 140 of the ~360 ns a one-column row cost on the
// server). So the handler of OP_GETTABLEKS (R(A) := R(B)["constant"], the
// instruction of row.x) is wrapped, as OP_CONCAT's is (concat.go): when
// R(B) is a row proxy, the wrapper reads the field as rowIndex would and
// stores it in R(A) itself; any other value goes to gopher-lua's handler.
// OP_SETTABLEKS (row.x = v) is wrapped the same way, in place of the
// __newindex call (rowNewIndex). A script cannot tell the difference: the
// row's metatable is hidden from it (getmetatable, sandbox.go), so its
// __index and __newindex are always luavm's.
//
// The wrapper needs three things gopher-lua keeps private: the running
// frame (its function's constants and its register base) and the register
// array. Their offsets are read by reflect at init, from the field names
// and types of gopher-lua v1.1.2 (go.mod's version); if any is missing or
// of another type (an upgrade changed them) the wrapper is not installed
// and row.x takes the metamethod as before. TestRowFieldFastPath fails in
// that case.

// rowFieldFast reports whether the wrapper is installed.
var rowFieldFast bool

// Offsets into gopher-lua's LState, registry and callFrame.
var (
	offStateReg, offStateFrame    uintptr // LState.reg, LState.currentFrame
	offRegArray, offRegTop        uintptr // registry.array, registry.top
	offFrameFn, offFrameLocalBase uintptr // callFrame.Fn, callFrame.LocalBase
	errRowFieldLayout             string  // why the wrapper is not installed
)

// opBitRK marks RK(C) as a constant index (gopher-lua's opBitRk).
const opBitRK = 1 << 8

func init() {
	if errRowFieldLayout = locateState(); errRowFieldLayout != "" {
		return
	}
	next := luaJumpTable[lua.OP_GETTABLEKS]
	if next == nil {
		errRowFieldLayout = "no OP_GETTABLEKS handler"
		return
	}
	nextSet := luaJumpTable[lua.OP_SETTABLEKS]
	if nextSet == nil {
		errRowFieldLayout = "no OP_SETTABLEKS handler"
		return
	}
	luaJumpTable[lua.OP_GETTABLEKS] = func(L *lua.LState, inst uint32, baseFrame unsafe.Pointer) int {
		if getRowField(L, inst) {
			return 0
		}
		return next(L, inst, baseFrame)
	}
	luaJumpTable[lua.OP_SETTABLEKS] = func(L *lua.LState, inst uint32, baseFrame unsafe.Pointer) int {
		if setRowField(L, inst) {
			return 0
		}
		return nextSet(L, inst, baseFrame)
	}
	rowFieldFast = true
}

// locateState finds the offsets; it returns why it cannot ("" if it can).
func locateState() string {
	field := func(t reflect.Type, name string, want func(reflect.Type) bool) (reflect.StructField, bool) {
		f, ok := t.FieldByName(name)
		if !ok || len(f.Index) != 1 || !want(f.Type) {
			return f, false
		}
		return f, true
	}
	ptrTo := func(name string) func(reflect.Type) bool {
		return func(t reflect.Type) bool {
			return t.Kind() == reflect.Pointer && t.Elem().Name() == name && t.Elem().Kind() == reflect.Struct
		}
	}
	is := func(want reflect.Type) func(reflect.Type) bool {
		return func(t reflect.Type) bool { return t == want }
	}
	state := reflect.TypeOf(lua.LState{})
	reg, ok := field(state, "reg", ptrTo("registry"))
	if !ok {
		return "LState.reg"
	}
	frame, ok := field(state, "currentFrame", ptrTo("callFrame"))
	if !ok {
		return "LState.currentFrame"
	}
	array, ok := field(reg.Type.Elem(), "array", is(reflect.TypeOf([]lua.LValue(nil))))
	if !ok {
		return "registry.array"
	}
	top, ok := field(reg.Type.Elem(), "top", is(reflect.TypeOf(0)))
	if !ok {
		return "registry.top"
	}
	fn, ok := field(frame.Type.Elem(), "Fn", is(reflect.TypeOf((*lua.LFunction)(nil))))
	if !ok {
		return "callFrame.Fn"
	}
	base, ok := field(frame.Type.Elem(), "LocalBase", is(reflect.TypeOf(0)))
	if !ok {
		return "callFrame.LocalBase"
	}
	offStateReg, offStateFrame = reg.Offset, frame.Offset
	offRegArray, offRegTop = array.Offset, top.Offset
	offFrameFn, offFrameLocalBase = fn.Offset, base.Offset
	return ""
}

// running is the state of the running Lua function that the wrappers
// read: its register array (from the function's base), and the function
// (for its constants).
type running struct {
	array *[]lua.LValue
	lbase int
	fn    *lua.LFunction
}

// rowAt returns the running function's state and the row proxy in its
// register x (relative to its base); ok is false when register x holds
// something else (or the state is not what the offsets expect), and then
// gopher-lua's handler runs the instruction.
func rowAt(L *lua.LState, x int) (run running, r *rowData, ok bool) {
	frame := *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(L), offStateFrame))
	reg := *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(L), offStateReg))
	if frame == nil || reg == nil {
		return run, nil, false
	}
	run.array = (*[]lua.LValue)(unsafe.Add(reg, offRegArray))
	run.lbase = *(*int)(unsafe.Add(frame, offFrameLocalBase))
	if run.lbase+x >= len(*run.array) {
		return run, nil, false
	}
	ud, ok := (*run.array)[run.lbase+x].(*lua.LUserData)
	if !ok {
		return run, nil, false
	}
	if r, ok = ud.Value.(*rowData); !ok {
		return run, nil, false
	}
	run.fn = *(**lua.LFunction)(unsafe.Add(frame, offFrameFn))
	if run.fn == nil || run.fn.Proto == nil {
		return run, nil, false
	}
	return run, r, true
}

// rk is RK(x) of the running function: a constant or a register; nil if
// out of range.
func (run running) rk(x int) lua.LValue {
	if x&opBitRK != 0 {
		if k := x &^ opBitRK; k < len(run.fn.Proto.Constants) {
			return run.fn.Proto.Constants[k]
		}
		return nil
	}
	if run.lbase+x < len(*run.array) {
		return (*run.array)[run.lbase+x]
	}
	return nil
}

// getRowField runs inst (OP_GETTABLEKS A B C: R(A) := R(B)[RK(C)]) when
// R(B) is a row proxy and RK(C) a string, and reports whether it did;
// otherwise gopher-lua's handler runs it (nothing was changed).
func getRowField(L *lua.LState, inst uint32) bool {
	run, r, ok := rowAt(L, int(inst&0x1ff))
	if !ok {
		return false
	}
	a := run.lbase + int(inst>>18)&0xff
	if a >= len(*run.array) {
		return false
	}
	key, ok := run.rk(int(inst>>9) & 0x1ff).(lua.LString)
	if !ok {
		return false
	}
	(*run.array)[a] = r.lua(L, string(key))
	reg := *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(L), offStateReg))
	if top := (*int)(unsafe.Add(reg, offRegTop)); a >= *top {
		*top = a + 1
	}
	return true
}

// setRowField runs inst (OP_SETTABLEKS A B C: R(A)[RK(B)] := RK(C)) when
// R(A) is a row proxy and RK(B) a string, as the proxy's __newindex
// (rowNewIndex) would, and reports whether it did; otherwise gopher-lua's
// handler runs it (nothing was changed).
func setRowField(L *lua.LState, inst uint32) bool {
	run, r, ok := rowAt(L, int(inst>>18)&0xff)
	if !ok {
		return false
	}
	// RK(B), the key, is in a register for an assignment (gopher-lua
	// loads the constant there first); RK(C) is the value.
	key, ok := run.rk(int(inst & 0x1ff)).(lua.LString)
	if !ok {
		return false
	}
	v := run.rk(int(inst>>9) & 0x1ff)
	if v == nil {
		return false
	}
	r.setLua(string(key), v)
	return true
}
