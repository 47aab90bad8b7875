package pattern

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/yuin/gopher-lua/pm"
)

// FuzzMatchesPM: Find gives what gopher-lua's pm.Find gives (the same
// matches and captures, or both an error) on small patterns and subjects
// (small, so that pm, which cannot be stopped, ends).
func FuzzMatchesPM(f *testing.F) {
	for _, seed := range [][2]string{
		{"%w+", "hello world"}, {"(o)%s(w)", "hello world"}, {"()l()", "hello"}, {"^a", "abc"}, {"b$", "abc"},
		{"%b()", "f(a(b)c)"}, {"(a)%1", "aab"}, {"[%-x]+", "a-x-b"}, {"[^%s]", " x"}, {".-y", "xxy"}, {"a?b", "b"},
		{"[", "x"}, {"(", "x"}, {"%", "x"}, {"%f[%a]%a", " ab"}, {"x*", ""},
	} {
		f.Add(seed[0], seed[1], 0, -1)
	}
	f.Fuzz(func(t *testing.T, p, s string, offset, limit int) {
		if len(p) > 8 || len(s) > 16 || offset < 0 || offset > len(s) {
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
