package luavm

import (
	"sync"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// Concatenation with .. is an instruction of gopher-lua's interpreter
// (OP_CONCAT), not a library function limitStrings could wrap, and one
// instruction cannot be interrupted: `s = s .. s` in a loop went from 512
// MiB to 1 GiB in one step after the watchdog had decided to stop it, and a
// server peaked at 1895 MiB for a 256 MiB limit. gopher-lua has
// no hook for it, so its instruction table is reached by go:linkname (the
// jumpTable of gopher-lua v1.1.2, go.mod's version) and the handler of
// OP_CONCAT wrapped: before the interpreter joins the operands, the size
// of the result is checked against the call's string limit (limitStrings's:
// the script's memory limit or Options.MaxStringSize), and a larger one
// fails the call with ErrStringLimit before any byte is allocated.
// TestConcatLimit fails if the wrapper is not in place (a gopher-lua
// upgrade that renames or changes the table).

//go:linkname luaJumpTable github.com/yuin/gopher-lua.jumpTable
var luaJumpTable [lua.OP_NOP + 1]func(L *lua.LState, inst uint32, baseFrame unsafe.Pointer) int

// concatLimits maps each VM's *lua.LState to its string limit (int64),
// from limitStrings until the VM is closed.
var concatLimits sync.Map

// concatCheckBytes is the result size from which a concatenation looks its
// limit up: smaller ones cost one addition per operand.
const concatCheckBytes = 64 << 10

func init() {
	// Registering the wrapper only; gopher-lua's init (which fills the
	// table) has run: it is imported by this package.
	next := luaJumpTable[lua.OP_CONCAT]
	if next == nil {
		return // TestConcatLimit says so
	}
	luaJumpTable[lua.OP_CONCAT] = func(L *lua.LState, inst uint32, baseFrame unsafe.Pointer) int {
		checkConcat(L, inst)
		return next(L, inst, baseFrame)
	}
}

// checkConcat raises the string limit error when the concatenation inst
// (R(A) := R(B) .. ... .. R(C)) would build a string over L's limit.
func checkConcat(L *lua.LState, inst uint32) {
	b, c := int(inst&0x1ff), int(inst>>9)&0x1ff
	size := 0.0
	for r := b; r <= c; r++ {
		switch v := L.Get(r + 1).(type) { // register r of the running function
		case lua.LString:
			size += float64(len(v))
		case lua.LNumber:
			size += 32 // its text; other operands go to a __concat metamethod
		}
	}
	if size < concatCheckBytes {
		return
	}
	if limit, ok := concatLimits.Load(L); ok && size > float64(limit.(int64)) {
		L.RaiseError("..: a string of %.0f bytes is %s of %d bytes (the script's memory limit or luavm.Options.MaxStringSize)", size, stringLimitMsg, limit.(int64))
	}
}
