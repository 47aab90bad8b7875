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

// TestPatternsMatchGopherLua: find, match and gmatch on luavm's matcher give
// what gopher-lua's give (results or an error), but where gopher-lua departs
// from Lua 5.1.
func TestPatternsMatchGopherLua(t *testing.T) {
	cases := []string{
		`string.find("hello world", "o w")`,
		`string.find("hello world", "(o)%s(w)")`,
		`string.find("hello world", "()o()")`,
		`string.find("hello world", "l+", 5)`,
		`string.find("hello world", "l+", -3)`,
		`string.find("hello world", "l", 50)`,
		`string.find("hello", "")`,
		`string.find("a.b", ".", 1, true)`,
		`string.find("a+b", "+", 1, true)`,
		`string.find("key=val", "^(%w+)=(%w+)$")`,
		`string.find("x", "[")`,
		`string.find("f(a(b)c)", "%b()")`,
		`string.find("THE (quick) fox", "%f[%a]%a+")`,
		`string.find("abcabc", "(abc)%1")`,
		`string.match("hello world", "%w+")`,
		`string.match("hello world", "(%w+) (%w+)")`,
		`string.match("hello world", "o", -3)`,
		`string.match("hello", "x")`,
		`string.match("2024-05-01", "(%d+)-(%d+)-(%d+)")`,
		`string.match("  trim  ", "^%s*(.-)%s*$")`,
		`string.match("abc", "()b()")`,
		`select("#", string.match("abc", "z"))`,
		`("x=1, y=2"):match("y=(%d)")`,
	}
	gmatch := []string{
		`"hello world from lua", "%a+"`,
		`"k1=v1, k2=v2", "(%w+)=(%w+)"`,
		`"abc", ""`,
		`"abc", "()"`,
	}
	var src strings.Builder
	for i, c := range cases {
		fmt.Fprintf(&src, "function c%d() return %s end\n", i, c)
	}
	for i, c := range gmatch {
		fmt.Fprintf(&src, "function g%d() local out = {} for a, b in string.gmatch(%s) do out[#out+1] = tostring(a) .. \"|\" .. tostring(b) end return table.concat(out, \",\") end\n", i, c)
	}
	m := newTestManager(t, Options{})
	if err := m.Load("pat.lua", src.String(), ScriptConfig{}); err != nil {
		t.Fatal(err)
	}
	ref := lua.NewState()
	defer ref.Close()
	if err := ref.DoString(src.String()); err != nil {
		t.Fatal(err)
	}
	check := func(fn, what string) {
		got, gotErr := m.Invoke(context.Background(), "pat.lua", fn, lua.MultRet)
		ref.SetTop(0)
		wantErr := ref.CallByParam(lua.P{Fn: ref.GetGlobal(fn), NRet: lua.MultRet, Protect: true})
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("%s: err %v, gopher-lua's %v", what, gotErr, wantErr)
			return
		}
		if wantErr != nil {
			return
		}
		var want []any
		for i := 1; i <= ref.GetTop(); i++ {
			want = append(want, FromLua(ref.Get(i)))
		}
		// gopher-lua's match returns nothing where Lua returns nil.
		if len(want) == 0 && len(got) == 1 && got[0] == nil {
			return
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, gopher-lua's %v", what, got, want)
		}
	}
	for i, c := range cases {
		if strings.Contains(c, "select") || strings.Contains(c, `"l", 50`) || strings.Contains(c, "%f") {
			continue // Lua's answers, not gopher-lua's (which differ), checked below
		}
		check(fmt.Sprintf("c%d", i), c)
	}
	for i, c := range gmatch {
		check(fmt.Sprintf("g%d", i), "gmatch("+c+")")
	}
	// c12: %f is a frontier (gopher-lua's: the letter f).
	for fn, want := range map[string]string{"c5": "[<nil>]", "c12": "[1 3]", "c21": "[1]"} {
		got, err := m.Invoke(context.Background(), "pat.lua", fn, lua.MultRet)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("%s: %v, %v, want %s", fn, got, err, want)
		}
	}
}

// TestPathologicalPatternTimesOut: a pattern that backtracks for ever (25
// a* before a b that is not there) ends with ErrTimeout near the script's
// timeout, in each pattern function, and the script's next call runs.
func TestPathologicalPatternTimesOut(t *testing.T) {
	m := newTestManager(t, Options{})
	src := `local s, p = ("a"):rep(30), ("a*"):rep(25) .. "b"
function find() return string.find(s, p) end
function match() return s:match(p) end
function gmatch() for x in s:gmatch(p) do return x end end
function gsub() return (s:gsub(p, "x")) end
function ok() return ("abc"):find("b") end`
	const timeout = 300 * time.Millisecond
	if err := m.Load("slow.lua", src, ScriptConfig{Timeout: timeout}); err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"find", "match", "gmatch", "gsub"} {
		start := time.Now()
		// The test's own bound: a matcher that does not see the script's
		// deadline backtracks for ever, and the test must fail, not hang
		// (ctx has no deadline: the script's timeout is what is tested).
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := m.Invoke(ctx, "slow.lua", fn, 1); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(timeout + 10*time.Second):
			cancel()
			t.Fatalf("%s: still running %v after it started, timeout %v (the match is left running)", fn, time.Since(start), timeout)
		}
		cancel()
		elapsed := time.Since(start)
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("%s: %v, want ErrTimeout", fn, err)
		}
		if elapsed > timeout+2*time.Second {
			t.Errorf("%s: stopped after %v, timeout %v", fn, elapsed, timeout)
		}
		if res, err := m.Invoke(context.Background(), "slow.lua", "ok", 1); err != nil || res[0] != int64(2) {
			t.Fatalf("after %s: %v, %v", fn, res, err)
		}
	}
}
