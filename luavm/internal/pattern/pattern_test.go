package pattern

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yuin/gopher-lua/pm"
)

// FuzzMatchesPM: Find gives what gopher-lua's pm.Find gives (the same
// matches and captures, or both an error) on small patterns and subjects
// (small, so that pm, which cannot be stopped, ends), but for the patterns
// where pm departs from Lua 5.1 (pmDeparts), which the table tests cover.
func FuzzMatchesPM(f *testing.F) {
	for _, seed := range [][2]string{
		{"%w+", "hello world"}, {"(o)%s(w)", "hello world"}, {"()l()", "hello"}, {"^a", "abc"}, {"b$", "abc"},
		{"%b()", "f(a(b)c)"}, {"(a)%1", "aab"}, {"[%-x]+", "a-x-b"}, {"[^%s]", " x"}, {".-y", "xxy"}, {"a?b", "b"},
		{"[", "x"}, {"(", "x"}, {"%", "x"}, {"%f[%a]%a", " ab"}, {"x*", ""},
	} {
		f.Add(seed[0], seed[1], 0, -1)
	}
	f.Fuzz(func(t *testing.T, p, s string, offset, limit int) {
		if len(p) > 8 || len(s) > 16 || offset < 0 || offset > len(s) || pmDeparts(p) {
			return
		}
		want, wantErr := pmFind(p, []byte(s), offset, limit)
		done := make(chan struct{})
		timer := time.AfterFunc(10*time.Second, func() { close(done) })
		defer timer.Stop()
		got, err := Find(p, []byte(s), offset, limit, done)
		if errors.Is(err, ErrInterrupted) {
			t.Fatalf("Find(%q, %q) ran past 10s", p, s)
		}
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Find(%q, %q): err %v, pm's %v", p, s, err, wantErr)
		}
		if err != nil {
			return
		}
		if g, w := dump(got), dumpPM(want); g != w {
			t.Fatalf("Find(%q, %q, %d, %d) = %s, pm's %s", p, s, offset, limit, g, w)
		}
	})
}

// pmDeparts reports whether p is a pattern on which gopher-lua's pm does
// not do what Lua 5.1 does, and Find does Lua's: p has a %f (pm: the letter
// f, no frontier), ends in '%' or in a %b without its two bytes (pm: no
// error, no match), or has a set in which a '-' follows a class or a range
// or ends a range, and is not last, or a range up to '%' (pm: another
// set), or has a
// position capture and a back-reference (pm: a panic or a match where
// nothing matches in Lua).
func pmDeparts(p string) bool {
	if strings.Contains(p, "()") && strings.ContainsAny(p, "123456789") {
		return true
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%':
			if i+1 == len(p) || p[i+1] == 'f' || p[i+1] == 'b' && i+3 >= len(p) {
				return true
			}
			if p[i+1] == 'b' {
				i += 2 // its two bytes, whatever they are
			}
			i++
		case '[':
			i++
			if i < len(p) && p[i] == '^' {
				i++
			}
			for first := true; i < len(p) && (first || p[i] != ']'); first = false {
				member := i
				if p[i] == '%' {
					i++
				} else if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
					if p[i+2] == '-' || p[i+2] == '%' {
						return true // a range up to '-', or up to '%' (in Lua, not an escape)
					}
					i += 2
				}
				i++
				if i+1 < len(p) && p[i] == '-' && p[i+1] != ']' && (p[member] == '%' || i-member == 3) {
					return true
				}
			}
		}
	}
	return false
}

// pmFind is pm.Find with its panics (which gopher-lua turns into Lua
// errors) as errors.
func pmFind(p string, s []byte, offset, limit int) (m []*pm.MatchData, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pm panicked: %v", r)
		}
	}()
	return pm.Find(p, s, offset, limit)
}

func dump(ms []*MatchData) string {
	out := ""
	for _, m := range ms {
		out += fmt.Sprint(m.captures)
	}
	return out
}

func dumpPM(ms []*pm.MatchData) string {
	out := ""
	for _, m := range ms {
		var c []uint32
		for i := 0; i < m.CaptureLength(); i++ {
			v := uint32(m.Capture(i)) << 1
			if m.IsPosCapture(i) {
				v |= 1
			}
			c = append(c, v)
		}
		out += fmt.Sprint(c)
	}
	return out
}
