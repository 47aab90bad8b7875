package luavm

import (
	"testing"

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
