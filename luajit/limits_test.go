//go:build luajit && cgo

package luajit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/luavm"
)

// TestBuiltinsWithinMemoryLimit: table.concat of many references to one
// big string is refused before it is built, and a builtin whose result
// cannot be sized first (gsub) fails at the allocator's hard limit with
// the memory error, instead of taking the VM to gigabytes.
func TestBuiltinsWithinMemoryLimit(t *testing.T) {
	s := load(t, `function main(row)
  if row.fn == "concat" then
    local big, t = ("x"):rep(1048576), {}
    for i = 1, 3000 do t[i] = big end
    return #table.concat(t)
  end
  if row.fn == "gsub" then return #(("x"):rep(1000000):gsub("x", ("y"):rep(300))) end
  return #table.concat({"a", "b"}, ",")
end`, Config{MemoryLimit: 16 << 20, Timeout: 20 * time.Second})
	out, errs := run(t, s, map[string]any{"fn": "concat"}, map[string]any{"fn": "gsub"}, map[string]any{"fn": "ok"})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "table.concat") || !strings.Contains(errs[0].Error(), "memory limit") {
		t.Errorf("concat: %v, %v", out[0], errs[0])
	}
	if !errors.Is(errs[1], luavm.ErrMemoryLimit) {
		t.Errorf("gsub: %v, %v, want the memory limit", out[1], errs[1])
	}
	if errs[2] != nil || out[2] != float64(3) && out[2] != int64(3) {
		t.Errorf("after them: %v, %v", out[2], errs[2])
	}
}

// TestResultSizeLimit: a string returned, a table's JSON or a field written
// to the row over MaxResultBytes fails the row with ErrResultSize.
func TestResultSizeLimit(t *testing.T) {
	s := load(t, `function main(row)
  local big = ("x"):rep(2000000)
  if row.fn == "string" then return big end
  if row.fn == "table" then return {big} end
  if row.fn == "write" then row.big = big return 1 end
  return ("x"):rep(1000)
end`, Config{MaxResultBytes: 1000000})
	out, errs := run(t, s, map[string]any{"fn": "string"}, map[string]any{"fn": "table"}, map[string]any{"fn": "write"}, map[string]any{"fn": "ok"})
	for i, what := range []string{"string", "table", "write"} {
		if !errors.Is(errs[i], luavm.ErrResultSize) || !strings.Contains(errs[i].Error(), "max_result_bytes") {
			t.Errorf("%s: %.100v, %v, want ErrResultSize", what, out[i], errs[i])
		}
	}
	if errs[3] != nil || len(out[3].(string)) != 1000 {
		t.Errorf("a small result: %.100v, %v", out[3], errs[3])
	}
}
