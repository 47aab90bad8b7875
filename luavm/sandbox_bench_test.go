package luavm

import (
	"context"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// BenchmarkLibraryAccess is what the sandbox's read-only library tables cost
// a call: a function reading three library fields (string.upper,
// math.floor, a string method) per call, in one Do, on the locked thread.
func BenchmarkLibraryAccess(b *testing.B) {
	m := NewManager(Options{})
	b.Cleanup(func() { m.Close() })
	const src = `function lib(s) return string.upper(s) .. math.floor(2.5) .. s:lower() end`
	if err := m.Load("lib.lua", src, ScriptConfig{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	err := m.Do(context.Background(), "lib.lua", func(vm *VM) error {
		fn, err := vm.Func("lib")
		if err != nil {
			return err
		}
		arg := lua.LString("ab")
		ct := startCPU(b)
		defer ct.stop(b)
		for range b.N {
			if _, err := vm.Call1(fn, arg); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
