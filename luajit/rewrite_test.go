package luajit

import (
	"errors"
	"strings"
	"testing"
)

func TestInstrument(t *testing.T) {
	const c = " " + checkName + "();"
	for _, tc := range []struct{ in, want string }{
		{"while x do y() end", "while x do" + c + " y() end"},
		{"for i=1,2 do end", "for i=1,2 do" + c + " end"},
		{"repeat x() until y", "repeat" + c + " x() until y"},
		{"local f = function(a, b) return a end", "local f = function(a, b)" + c + " return a end"},
		{"function t.a:b(...) end", "function t.a:b(...)" + c + " end"},
		{"::top:: goto top", "::top::" + c + " goto top"},
		{"x = 'do' .. \"repeat\" -- do\n--[[ do ]] y = [==[ do ]==]", "x = 'do' .. \"repeat\" -- do\n--[[ do ]] y = [==[ do ]==]"},
		{"x = 'a\\'do'", "x = 'a\\'do'"},
		{"x = 1e+5 do end", "x = 1e+5 do" + c + " end"},
		{"undo = redo", "undo = redo"},
	} {
		got, err := instrument(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got = strings.TrimPrefix(got, "local "+checkName+" = ...; ")
		if got != tc.want {
			t.Errorf("instrument(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if strings.Count(got, "\n") != strings.Count(tc.in, "\n") {
			t.Errorf("%q: line count changed", tc.in)
		}
	}
	// LuaJIT skips a first line starting with #: the binding goes after it
	got, err := instrument("#!/usr/bin/env luajit\ndo end")
	if want := "#!/usr/bin/env luajit\nlocal " + checkName + " = ...; do" + c + " end"; err != nil || got != want {
		t.Errorf("shebang: got %q, want %q", got, want)
	}
	if _, err := instrument("local " + checkName + " = function() end"); !errors.Is(err, errReserved) {
		t.Errorf("reserved name: %v", err)
	}
}
