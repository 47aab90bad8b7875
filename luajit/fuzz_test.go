//go:build luajit && cgo

package luajit

import (
	"errors"
	"strings"
	"testing"
)

// FuzzInstrument: the rewriter keeps line numbers, and LuaJIT compiles the
// rewritten source exactly when it compiles the original (a check added in
// the wrong place would turn valid scripts into syntax errors).
//
//	go test -tags luajit -run '^$' -fuzz FuzzInstrument -fuzztime 20000x ./luajit/
func FuzzInstrument(f *testing.F) {
	for _, s := range []string{
		"function main(row) return row.a end",
		"local t = {} for i = 1, 10 do t[i] = i end while #t > 0 do table.remove(t) end",
		"repeat local x = 1 until x == 1",
		"::top:: goto top",
		"local s = [[ do ]] .. 'repeat' -- function\n--[==[ ) ]==] return s",
		"local f = function(...) return select('#', ...) end",
		"function a.b.c:d(x, y) do return x end end",
		"return 1e+5, 0x1p4, .5, 3.",
		"x = \"a\\\"do\" y = 'b\\'repeat'",
		"for k, v in pairs({}) do break end",
		"do ; end",
		"if x then elseif y then else end",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out, err := instrument(src)
		if err != nil {
			if !errors.Is(err, errReserved) || !strings.Contains(src, checkName) {
				t.Fatalf("instrument(%q): %v", src, err)
			}
			return
		}
		if strings.Count(out, "\n") != strings.Count(src, "\n") {
			t.Fatalf("line count changed:\n%q\n%q", src, out)
		}
		_, errSrc := compile(src, "fuzz")
		_, errOut := compile(out, "fuzz")
		if (errSrc == nil) != (errOut == nil) {
			t.Fatalf("compiles: original %v, rewritten %v\n%q\n%q", errSrc, errOut, src, out)
		}
	})
}
