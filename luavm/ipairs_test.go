package luavm

import (
	"context"
	"errors"
	"testing"
)

// TestIpairs: luavm's allocation-free ipairs keeps Lua's semantics: indexes
// from 1 in order, stop at the first nil, big indexes past the pre-boxed
// range, a non-table argument is an error naming the line.
func TestIpairs(t *testing.T) {
	m := newTestManager(t, Options{})
	const src = `
function sum(n)
  local t = {}
  for i = 1, n do t[i] = i * 10 end
  local s, last = 0, 0
  for i, v in ipairs(t) do
    if i ~= last + 1 then error("index " .. i .. " after " .. last) end
    last = i
    s = s + v
  end
  return s, last
end
function holes()
  local n = 0
  for _ in ipairs({1, 2, nil, 4}) do n = n + 1 end
  return n
end
function notable()
  for _ in ipairs(42) do end
end
`
	if err := m.Load("ipairs.lua", src, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []int64{0, 5, 2000} {
		res, err := m.Invoke(ctx, "ipairs.lua", "sum", 2, n)
		if err != nil {
			t.Fatal(err)
		}
		if want := 10 * n * (n + 1) / 2; res[0] != want || res[1] != n {
			t.Errorf("sum(%d) = %v, want [%d %d]", n, res, want, n)
		}
	}
	if res, err := m.Invoke(ctx, "ipairs.lua", "holes", 1); err != nil || res[0] != int64(2) {
		t.Errorf("ipairs over a hole: %v, %v; want 2", res, err)
	}
	var ce *CallError
	if _, err := m.Invoke(ctx, "ipairs.lua", "notable", 0); err == nil {
		t.Error("ipairs(42) did not fail")
	} else if !errors.As(err, &ce) || ce.Line != 19 {
		t.Errorf("ipairs(42): %v (want a CallError at line 19)", err)
	}
}
