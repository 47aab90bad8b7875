//go:build luajit && cgo

package luajit

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/luavm"
)

// TestPatternsMatchLuaJIT: host.c's find, match, gmatch and gsub give what
// LuaJIT's own give (results or an error), the original reached through
// require("string") with require allowed.
func TestPatternsMatchLuaJIT(t *testing.T) {
	cases := []string{
		`find("hello world", "o w")`, `find("hello world", "(o)%s(w)")`, `find("hello world", "()o()")`,
		`find("hello world", "l+", 5)`, `find("hello world", "l+", -3)`, `find("hello world", "l", 50)`,
		`find("hello", "", 6)`, `find("hello", "", 7)`, `find("hello", "")`, `find("a.b", ".", 1, true)`,
		`find("a+b", "+", 1, true)`, `find("a+b", "b", -100)`, `find("key=val", "^(%w+)=(%w+)$")`, `find("x", "[")`,
		`find("x", "%")`, `find("f(a(b)c)", "%b()")`, `find("f(a", "%b()")`, `find("THE (quick) fox", "%f[%a]%a+")`,
		`find("abcabc", "(abc)%1")`, `find("abc", "%2")`, `find("abc", "(()")`, `find("abc", "a)")`, `find("a\0b", "%z")`,
		`find("x^y", "^y")`, `find("x^y", "x^")`, `find("a$b", "$b")`, `find("[]", "[]]")`, `find("a-z", "[%-]")`,
		`find("hello", "[^aeiou]+")`, `find("HeLLo", "%u+")`, `find("abc", "b?c")`, `find("aaab", "a-b")`,
		`match("hello world", "%w+")`, `match("hello world", "(%w+) (%w+)")`, `match("hello world", "o", -3)`,
		`match("hello", "x")`, `match("2024-05-01", "(%d+)-(%d+)-(%d+)")`, `match("  trim  ", "^%s*(.-)%s*$")`,
		`match("abc", "()b()")`, `match("abc", "b", 10)`,
		`gsub("hello world", "o", "0")`, `gsub("hello world", "(o)", "[%1]")`, `gsub("hello world", "l+", "%0%0")`,
		`gsub("hello", "l", "%%")`, `gsub("hello", "l", "x%")`, `gsub("hello", "l", "%x")`, `gsub("hello", "l", "%2")`,
		`gsub("abc", "", "-")`, `gsub("abc", "x*", "-")`, `gsub("abc", "^a", "A")`, `gsub("aaaa", "a", "b", 2)`,
		`gsub("$name is $x", "%$(%w+)", {name = "ada", x = false})`, `gsub("$n", "%$(%w+)", {n = {}})`,
		`gsub("hello world", "%w+", function(w) return w:upper() end)`, `gsub("abc", "%w", 5)`,
		`gsub("hello", "()l", "%1")`, `gsub("hello", "l", {})`,
		`find("x", "%b")`, `find("x", "%bx")`, `find("x", "%fx")`, `find("x", "(x))")`, `find("x", "(x")`,
		`find("x", "%0")`, `find("x", ("()"):rep(33))`, `find(("a"):rep(200), ("a?"):rep(200))`,
		`find(("a"):rep(199), ("a?"):rep(199))`, `match("ab", "(a)(b")`, `gsub("abc", "b", {b = true})`,
		`gsub("abc", "(b)", "%1%2")`, `find("abc", "()a%1")`, `find("a]", "[a-%]]")`, `find("\200", "[%a\100-\250]")`,
		`gsub("a\0b(", "\0", "x")`, `find("a\0(", "\0(")`, `find("a g", "%g+")`, `find("a g", "%G+")`,
	}
	gmatch := []string{`"hello world from lua", "%a+"`, `"k1=v1, k2=v2", "(%w+)=(%w+)"`, `"abc", ""`, `"abc", "()"`, `"^a^a", "^a"`}
	var src strings.Builder
	src.WriteString(`local S = require("string")
local function pack(ok, ...)
  local t = {tostring(ok)}
  for i = 1, select("#", ...) do t[#t + 1] = tostring((select(i, ...))) end
  return table.concat(t, ",")
end
local function both(name, ...)
  return pack(pcall(string[name], ...)), pack(pcall(S[name], ...))
end
local function gm(lib, s, p)
  local out = {}
  for a, b in lib.gmatch(s, p) do out[#out + 1] = tostring(a) .. "|" .. tostring(b) end
  return table.concat(out, ",")
end
function main(row)
  local out = {}
`)
	for _, c := range cases {
		name, args, _ := strings.Cut(strings.TrimSuffix(c, ")"), "(")
		fmt.Fprintf(&src, "  do local a, b = both(%q, %s) out[#out + 1] = a .. \"\\t\" .. b end\n", name, args)
	}
	for _, c := range gmatch {
		fmt.Fprintf(&src, "  out[#out + 1] = gm(string, %s) .. \"\\t\" .. gm(S, %s)\n", c, c)
	}
	src.WriteString("  return table.concat(out, \"\\n\")\nend\n")
	s := load(t, src.String(), Config{Allow: []string{"require"}})
	out, errs := run(t, s, map[string]any{})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	lines := strings.Split(out[0].(string), "\n")
	all := append(append([]string(nil), cases...), gmatch...)
	if len(lines) != len(all) {
		t.Fatalf("%d results for %d cases", len(lines), len(all))
	}
	// Both failing must fail with the same message: a bad pattern is
	// reported in LuaJIT's words.
	for i, line := range lines {
		got, want, _ := strings.Cut(line, "\t")
		if got != want {
			t.Errorf("%s = %q, LuaJIT's %q", all[i], got, want)
		}
	}
}

// TestPathologicalPatternTimesOut: a pattern that backtracks for ever (25
// a* before a b that is not there) ends with a timeout near the script's
// timeout in each pattern function, also under pcall, and the next row runs.
func TestPathologicalPatternTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := load(t, `local s, p = ("a"):rep(30), ("a*"):rep(25) .. "b"
function main(row)
  if row.fn == "find" then return string.find(s, p) end
  if row.fn == "match" then return s:match(p) end
  if row.fn == "gmatch" then for x in s:gmatch(p) do return x end end
  if row.fn == "gsub" then return (s:gsub(p, "x")) end
  if row.fn == "pcall" then return pcall(string.find, s, p) end
  return ("abc"):find("b")
end`, Config{Timeout: timeout})
	for _, fn := range []string{"find", "match", "gmatch", "gsub", "pcall"} {
		start := time.Now()
		out, errs := run(t, s, map[string]any{"fn": fn}, map[string]any{"fn": "ok"})
		elapsed := time.Since(start)
		if !errors.Is(errs[0], luavm.ErrTimeout) {
			t.Errorf("%s: %v, %v, want a timeout", fn, out[0], errs[0])
		}
		if elapsed > timeout+2*time.Second {
			t.Errorf("%s: stopped after %v, timeout %v", fn, elapsed, timeout)
		}
		if errs[1] != nil || out[1] != float64(2) && out[1] != int64(2) {
			t.Errorf("after %s: %v, %v", fn, out[1], errs[1])
		}
	}
}

// FuzzPatternsMatchLuaJIT: on small patterns and subjects, host.c's find,
// match, gmatch and gsub give what LuaJIT's own give (both failing counts
// as the same).
func FuzzPatternsMatchLuaJIT(f *testing.F) {
	for _, seed := range [][2]string{
		{"%w+", "hello world"}, {"(o)%s(w)", "hello world"}, {"()l()", "hello"}, {"^a", "abc"}, {"b$", "abc"},
		{"%b()", "f(a(b)c)"}, {"(a)%1", "aab"}, {"[%-x]+", "a-x-b"}, {"%f[%a]%a", " ab"}, {"x*", ""}, {"[", "x"},
	} {
		f.Add(seed[0], seed[1])
	}
	s := load(f, `local S = require("string")
local function pack(ok, ...)
  local t = {tostring(ok)}
  if not ok then return "error" end
  for i = 1, select("#", ...) do t[#t + 1] = tostring((select(i, ...))) end
  return table.concat(t, ",")
end
local function gm(lib, s, p)
  local ok, it = pcall(lib.gmatch, s, p)
  if not ok then return "error" end
  local out, n = {}, 0
  while n < 100 do
    local ok2, a, b = pcall(it)
    if not ok2 then return "error" end
    if a == nil then break end
    n = n + 1
    out[n] = tostring(a) .. "|" .. tostring(b)
  end
  return table.concat(out, ",")
end
function main(row)
  local s, p = row.s, row.p
  for _, name in ipairs({"find", "match"}) do
    local a, b = pack(pcall(string[name], s, p)), pack(pcall(S[name], s, p))
    if a ~= b then return name .. ": " .. a .. " vs " .. b end
  end
  local a, b = pack(pcall(string.gsub, s, p, "<%0>")), pack(pcall(S.gsub, s, p, "<%0>"))
  if a ~= b then return "gsub: " .. a .. " vs " .. b end
  a, b = gm(string, s, p), gm(S, s, p)
  if a ~= b then return "gmatch: " .. a .. " vs " .. b end
  return "same"
end`, Config{Allow: []string{"require"}, Timeout: 10 * time.Second})
	f.Fuzz(func(t *testing.T, p, subject string) {
		if len(p) > 8 || len(subject) > 16 {
			return
		}
		out, errs := run(t, s, map[string]any{"p": p, "s": subject})
		if errs[0] != nil || out[0] != "same" {
			t.Fatalf("pattern %q on %q: %v %v", p, subject, out[0], errs[0])
		}
	})
}
