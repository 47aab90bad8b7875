package luavm

import (
	"context"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// The sandbox shared with LuaJIT is tested on both engines by compute's
// TestSandboxIsolatesCalls; these are the luavm-only parts.

// TestSandboxAllowedLoadRunsInTheCallsGlobals: a chunk from an allowed
// load or loadstring writes the call's globals, dropped after the call
// (gopher-lua gives it the real globals table, which nothing empties), and
// several calls in one Do each start clean.
func TestSandboxAllowedLoadRunsInTheCallsGlobals(t *testing.T) {
	m := newTestManager(t, Options{})
	src := `function write(code)
  loadstring(code)()
  local given = false
  load(function() if given then return nil end given = true return "leak2 = 2" end)()
  return leak
end
function read() return tostring(leak) .. tostring(leak2) end`
	if err := m.Load("load.lua", src, ScriptConfig{Allow: []string{"load"}, Pool: PoolConfig{Strategy: StrategyCore, Core: 1}}); err != nil {
		t.Fatal(err)
	}
	err := m.Do(context.Background(), "load.lua", func(vm *VM) error {
		write, _ := vm.Func("write")
		read, _ := vm.Func("read")
		if v, err := vm.Call1(write, lua.LString(`leak = "pwned"`)); err != nil || v != lua.LString("pwned") {
			t.Fatalf("write: %v %v", v, err)
		}
		if v, err := vm.Call1(read, lua.LNil); err != nil || v != lua.LString("nilnil") {
			t.Errorf("the next call in the same Do sees %v (%v)", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := m.Invoke(context.Background(), "load.lua", "read", 1); err != nil || res[0] != "nilnil" {
		t.Errorf("the next Invoke sees %v (%v)", res, err)
	}
}

// TestSandboxSharedGlobalsKeepRawWrites: with ShareGlobals the globals table
// is the base one; a rawset there is kept, and does not empty it.
func TestSandboxSharedGlobalsKeepRawWrites(t *testing.T) {
	m := newTestManager(t, Options{})
	src := `function write() rawset(_G, "kept", 1) return 1 end
function read() return type(kept) .. type(string) .. type(read) end`
	if err := m.Load("shared.lua", src, ScriptConfig{ShareGlobals: true, Pool: PoolConfig{Strategy: StrategyCore, Core: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Invoke(context.Background(), "shared.lua", "write", 1); err != nil {
		t.Fatal(err)
	}
	res, err := m.Invoke(context.Background(), "shared.lua", "read", 1)
	if err != nil || res[0] != "numbertablefunction" {
		t.Errorf("after rawset(_G) with shared globals: %v %v", res, err)
	}
}
