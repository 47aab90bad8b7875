package luavm

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// jsonCall runs json.encode / json.decode on a bare state, as a script would.
func jsonCall(L *lua.LState, fn lua.LGFunction, arg lua.LValue) (lua.LValue, error) {
	err := L.CallByParam(lua.P{Fn: L.NewFunction(fn), NRet: 1, Protect: true}, arg)
	if err != nil {
		return nil, err
	}
	v := L.Get(-1)
	L.Pop(1)
	return v, nil
}

// FuzzJSONRoundTrip: for any input, json.decode either fails cleanly or gives
// a value whose encoding is a fixed point of decode+encode.
func FuzzJSONRoundTrip(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null],"b":null,"c":{}}`, `[]`, `[[[]]]`, `"\u00e9"`, `12345678901234567890`, `{"1":2}`, `1e400`, `[1,`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		L := lua.NewState(lua.Options{SkipOpenLibs: true})
		defer L.Close()
		jsonEncode := (&jsonEncoder{}).encode // one encoder for both calls: its reused buffer must not leak into enc1
		v, err := jsonCall(L, jsonDecode, lua.LString(s))
		if err != nil {
			return // invalid JSON: a clean Lua error is all we ask
		}
		enc1, err := jsonCall(L, jsonEncode, v)
		if err != nil {
			return // e.g. nesting deeper than maxDepth
		}
		v2, err := jsonCall(L, jsonDecode, enc1)
		if err != nil {
			t.Fatalf("decode of our own encoding %q failed: %v", enc1, err)
		}
		enc2, err := jsonCall(L, jsonEncode, v2)
		if err != nil {
			t.Fatalf("re-encode failed: %v", err)
		}
		if enc1.String() != enc2.String() {
			t.Fatalf("not a fixed point: %q -> %q -> %q", s, enc1, enc2)
		}
	})
}

// TestJSONEncodeRowMatchesEncodingJSON: json.encode of a row proxy writes
// what encoding/json writes for the Go map (HTML escaping off), and the
// encoder's reused buffer does not leak one result into the next.
func TestJSONEncodeRowMatchesEncodingJSON(t *testing.T) {
	m := newTestManager(t, Options{})
	src := `
local json = require("json")
function twice(row)
  local first = json.encode(row)
  row.s = "changed"
  local plain = json.encode({1, "x", {k = true}})
  return first, json.encode(row), plain
end
`
	if err := m.Load("e", src, ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	row := map[string]any{
		"s": "q\" <&> \b\f\x01 \u2028 \xff é", "i": int64(-9007199254740993), "u": uint64(math.MaxUint64), "f": 1e-7, "f32": float32(0.1),
		"n": nil, "num": json.Number("123456789012345678901234"), "raw": json.RawMessage(`{"a":[1,2]}`), "b": true, "i32": int32(7),
		"t": time.Date(2024, 5, 1, 10, 0, 0, 1500, time.UTC), "m": map[string]any{"z": []any{1.5, "y"}}, "empty": map[string]any{},
	}
	std := func(v any) string {
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(out.String(), "\n")
	}
	wantFirst := std(row)
	err := m.Do(context.Background(), "e", func(vm *VM) error {
		fn, err := vm.Func("twice")
		if err != nil {
			return err
		}
		res, err := vm.Call(fn, 3, vm.Row(row))
		if err != nil {
			return err
		}
		if res[0].String() != wantFirst {
			t.Errorf("first json.encode(row):\n got %s\nwant %s", res[0], wantFirst)
		}
		if want := std(row); res[1].String() != want {
			t.Errorf("second json.encode(row):\n got %s\nwant %s", res[1], want)
		}
		if res[2].String() != `[1,"x",{"k":true}]` {
			t.Errorf("json.encode(table) = %s", res[2])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
