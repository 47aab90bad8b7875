package luavm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// TestGsubMatchesGopherLua: luavm's string.gsub gives what gopher-lua's
// gives (result, count, or an error), on string, table and function
// replacements, captures, position captures, anchors, empty matches and a
// max count.
func TestGsubMatchesGopherLua(t *testing.T) {
	cases := []string{
		`"hello world", "o", "0"`,
		`"hello world", "(o)", "[%1]"`,
		`"hello world", "l+", "%0%0"`,
		`"hello world", "(h)(e)", "%2%1"`,
		`"hello", "l", "%%"`,
		`"hello", "l", "x%"`,
		`"hello", "l", "%x"`,
		`"hello", "l", "%1"`,
		`"hello", "l", "%2"`,
		`"hello", "()l", "%1"`,
		`"abc", "", "-"`,
		`"abc", "x*", "-"`,
		`"abc", "^a", "A"`,
		`"abc", "^b", "B"`,
		`"abc", "b$", "B"`,
		`"aaaa", "a", "b", 2`,
		`"aaaa", "a", "b", 0`,
		`"", "a", "b"`,
		`"$name is $age", "%$(%w+)", {name = "ada", age = 36}`,
		`"$name is $x", "%$(%w+)", {name = "ada", x = false}`,
		`"$name", "%$(%w+)", {name = {}}`,
		`"a1b2", "%d", {["1"] = "one"}`,
		`"()ab", "()a", {[2] = "pos"}`,
		`"hello world", "%w+", function(w) return w:upper() end`,
		`"hello world", "(%w)(%w*)", function(a, b) return b .. a end`,
		`"hello world", "%w+", function(w) if w == "world" then return nil end return 1.5 end`,
		`"hello", "()l()", function(a, b) return a .. ":" .. b end`,
		`"hello", "[", "x"`,
		`"hello", "(l", "x"`,
	}
	m := newTestManager(t, Options{})
	var src strings.Builder
	for i, c := range cases {
		fmt.Fprintf(&src, "function c%d() local r, n = string.gsub(%s) return r, n end\n", i, c)
	}
	if err := m.Load("gsub.lua", src.String(), ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	ref := lua.NewState()
	defer ref.Close()
	if err := ref.DoString(src.String()); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		got, gotErr := m.Invoke(context.Background(), "gsub.lua", fmt.Sprintf("c%d", i), 2)
		ref.SetTop(0)
		wantErr := ref.CallByParam(lua.P{Fn: ref.GetGlobal(fmt.Sprintf("c%d", i)), NRet: 2, Protect: true})
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("gsub(%s): err %v, gopher-lua's %v", c, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		want := []any{FromLua(ref.Get(1)), FromLua(ref.Get(2))}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("gsub(%s) = %q, gopher-lua's %q", c, got, want)
		}
	}
}

// TestGsubLinearAndLimited: gopher-lua's gsub copied the whole result per
// match, uninterruptibly (11 s for 100 000 matches here, against a 2 s
// timeout); luavm's is linear, and refuses a result over the string size
// limit as it grows.
func TestGsubLinearAndLimited(t *testing.T) {
	m := newTestManager(t, Options{MaxStringSize: 1 << 20})
	src := `function spaces(n) local r, k = string.gsub(string.rep("x ", n), " ", "") return #r, k end
function blowup(n) return (string.gsub(string.rep("x", n), "x", string.rep("y", 1000))) end`
	if err := m.Load("g.lua", src, ScriptConfig{Timeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Invoke(context.Background(), "g.lua", "spaces", 2, 100000)
	if err != nil || res[0] != int64(100000) || res[1] != int64(100000) {
		t.Fatalf("gsub over 100000 matches: %v, %v", res, err)
	}
	_, err = m.Invoke(context.Background(), "g.lua", "blowup", 1, 2000)
	if !errors.Is(err, ErrStringLimit) || !strings.Contains(err.Error(), "string.gsub") {
		t.Fatalf("gsub past the limit: %v", err)
	}
	if _, err := m.Invoke(context.Background(), "g.lua", "spaces", 2, 3); err != nil {
		t.Fatal(err)
	}
}
