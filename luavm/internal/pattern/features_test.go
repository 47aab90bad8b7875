package pattern

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// find is string.find's answer for the first match of p in s, as Lua
// prints it: "start end captures..." (1-based, inclusive), "nil", or
// "error: message".
func find(p, s string) string {
	ms, err := Find(p, []byte(s), 0, 1, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	if len(ms) == 0 {
		return "nil"
	}
	return matchString(ms[0], s)
}

func matchString(m *MatchData, s string) string {
	out := fmt.Sprintf("%d %d", m.Capture(0)+1, m.Capture(1))
	for i := 2; i < m.CaptureLength(); i += 2 {
		if m.IsPosCapture(i) {
			out += fmt.Sprintf(" %d", m.Capture(i))
		} else {
			out += fmt.Sprintf(" %q", s[m.Capture(i):m.Capture(i+1)])
		}
	}
	return out
}

// TestFeatures: each item of Lua 5.1's patterns (reference manual §5.4.1)
// matches what Lua matches, including the ones where gopher-lua's pm
// departs from Lua (%f, '-' in sets, back-references to position captures).
func TestFeatures(t *testing.T) {
	for _, c := range []struct{ pattern, subject, want string }{
		// single bytes, '.', and escapes of non-letters
		{"b", "abc", "2 2"},
		{"x", "abc", "nil"},
		{".", "", "nil"},
		{"a.c", "xa\x00c", "2 4"},
		{"%.", "a.b", "2 2"},
		{"%%", "5%", "2 2"},
		{"%q", "q", "1 1"}, // an escaped non-class letter is itself
		{"\x00", "a\x00", "2 2"},
		// classes and their complements, in the C locale
		{"%a+", "12abZ3", "3 5"},
		{"%A+", "ab12+c", "3 5"},
		{"%c", "a\tb", "2 2"},
		{"%C+", "\x01ab\x7f", "2 3"},
		{"%d+", "ab123c", "3 5"},
		{"%D+", "12ab3", "3 4"},
		{"%l+", "ABcdE", "3 4"},
		{"%L+", "abCD1e", "3 5"},
		{"%p+", "ab!?,c", "3 5"},
		{"%P+", "!!ab!", "3 4"},
		{"%s+", "a \t\n\v\f\rb", "2 7"},
		{"%S+", "  ab ", "3 4"},
		{"%u+", "abCDe", "3 4"},
		{"%U+", "ABcd1E", "3 5"},
		{"%w+", "..a1_", "3 4"},
		{"%W+", "ab.-c", "3 4"},
		{"%x+", "xyz0fFgG", "4 6"},
		{"%X+", "0fgh1", "3 4"},
		{"%z", "a\x00", "2 2"},
		{"%Z+", "\x00ab\x00", "2 3"},
		{"%a", "\xc9\xe9", "nil"}, // bytes above 127 are in no class
		// sets
		{"[abc]+", "xxcabx", "3 5"},
		{"[^abc]+", "abxyc", "3 4"},
		{"[a-c]+", "zbcad", "2 4"},
		{"[%d%s]+", "ab1 2c", "3 5"},
		{"[%a-]+", "1a-b2", "2 4"},
		{"[a-]+", "x-a", "2 3"},
		{"[-a]+", "x-a", "2 3"},
		{"[]]", "a]", "2 2"},     // ']' first is a member
		{"[^]]+", "]ab]", "2 3"}, // so it is after '^'
		{"[%]]", "a]", "2 2"},
		{"[%a-z]", "-", "1 1"},  // a class, then '-', then 'z'
		{"[a-c-e]", "-", "1 1"}, // a range, then '-', then 'e'
		{"[a-c-e]", "e", "1 1"},
		{"[a-c-e]", "d", "nil"},
		{"[0--]", "0", "nil"},  // the range '0'-'-' is empty
		{"[0-%0]", "0", "1 1"}, // the range '0'-'%' is empty, then '0'
		{"[!-%%]", "%", "1 1"}, // a range up to '%', then '%'
		{"[!-%%]", "#", "1 1"},
		{"[z-a]", "m", "nil"},
		{"[.]", "a.", "2 2"},
		{"[^%a]", "ab1", "3 3"},
		// quantifiers
		{"a*", "aaab", "1 3"},
		{"a*", "b", "1 0"},
		{"a+", "baaa", "2 4"},
		{"a+", "b", "nil"},
		{"a-b", "aaab", "1 4"},
		{"<(.-)>", "<a><b>", "1 3 \"a\""},
		{"<(.*)>", "<a><b>", "1 6 \"a><b\""},
		{"a?b", "b", "1 1"},
		{"a?b", "ab", "1 2"},
		{"[ab]?c", "xbc", "2 3"},
		{"%d?%d", "7", "1 1"},
		{"*a", "*a", "1 2"}, // a quantifier with nothing before is itself
		{"a**", "aa*", "1 3"},
		// anchors
		{"^a", "ba", "nil"},
		{"^a", "ab", "1 1"},
		{"a^", "a^", "1 2"}, // '^' elsewhere is itself
		{"^^", "^", "1 1"},
		{"a$", "aba", "3 3"},
		{"a$", "ab", "nil"},
		{"a$b", "a$b", "1 3"}, // '$' elsewhere is itself
		{"^$", "", "1 0"},
		{"$", "ab", "3 2"},
		// captures
		{"(a)(b)", "xab", "2 3 \"a\" \"b\""},
		{"((a)b)", "ab", "1 2 \"ab\" \"a\""},
		{"()", "ab", "1 0 1"},
		{"a()b()", "xab", "2 3 3 4"},
		{"(()a)", "a", "1 1 \"a\" 1"},
		{"(%d+)-(%d+)", "x 12-345", "3 8 \"12\" \"345\""},
		{"(a*(.)%w(%s*))", "aaab  x", "1 6 \"aaab  \" \"a\" \"  \""},
		{strings.Repeat("()", 32), "", "1 0" + strings.Repeat(" 1", 32)},
		// back-references
		{"(a)%1", "aab", "1 2 \"a\""},
		{"(ab)%1", "abab", "1 4 \"ab\""},
		{"([\"'])(.-)%1", `x = 'it"s'`, "5 10 \"'\" \"it\\\"s\""},
		{"(a)%1", "ab", "nil"},
		{"()%1", "ab", "nil"}, // a position capture has no text: nothing matches
		{"b%1", "x", "nil"},   // not reached: no error, as in Lua
		// %b
		{"%b()", "f(a(b)c)d", "2 8"},
		{"%b()", "(()", "2 3"},
		{"%b()", ")(", "nil"},
		{"%bxx", "axbxx", "2 4"},
		{"%b[]+", "[a][b]+", "4 7"}, // a quantifier after %b is itself: "[a]" then '+'
		// %f
		{"%f[%a]%a+", "THE (quick) fox", "1 3"},
		{"%f[%a]", "  ab", "3 2"},
		{"%f[%A]", "ab", "3 2"}, // after the last byte is '\0', not a letter
		{"%f[%z]", "ab", "3 2"},
		{"%f[^%z]", "ab", "1 0"},
		{"%f[%w]%w+%f[%W]", "one, two", "1 3"},
		{"x%f[a]", "xa", "1 1"},
		{"x%f[a]", "x a", "nil"},
		// errors, whether or not the subject gets that far
		{"%", "x", "error: malformed pattern (ends with '%') (at byte 1 of the pattern)"},
		{"ab%", "x", "error: malformed pattern (ends with '%') (at byte 3 of the pattern)"},
		{"[a", "x", "error: malformed pattern (missing ']') (at byte 1 of the pattern)"},
		{"[]", "x", "error: malformed pattern (missing ']') (at byte 1 of the pattern)"},
		{"[^]", "x", "error: malformed pattern (missing ']') (at byte 1 of the pattern)"},
		{"[a%", "x", "error: malformed pattern (missing ']') (at byte 1 of the pattern)"},
		{"[%]", "x", "error: malformed pattern (missing ']') (at byte 1 of the pattern)"},
		{"x(", "x", "error: unfinished capture (at byte 3 of the pattern)"},
		{"((a)", "x", "error: unfinished capture (at byte 5 of the pattern)"},
		{"a)", "x", "error: invalid pattern capture (at byte 2 of the pattern)"},
		{"%1", "x", "error: invalid capture index %1 (at byte 1 of the pattern)"},
		{"(a)%2", "aa", "error: invalid capture index %2 (at byte 4 of the pattern)"},
		{"(a%1)", "aa", "error: invalid capture index %1 (at byte 3 of the pattern)"},
		{"b%0", "x", "error: invalid capture index %0 (at byte 2 of the pattern)"},
		{"%b(", "x", "error: malformed pattern (missing arguments to '%b') (at byte 1 of the pattern)"},
		{"%fa", "x", "error: missing '[' after '%f' in pattern (at byte 1 of the pattern)"},
		{"%f[a", "x", "error: malformed pattern (missing ']') (at byte 3 of the pattern)"},
		{strings.Repeat("()", 33), "", "error: too many captures (at byte 65 of the pattern)"},
		{strings.Repeat("(", 33) + strings.Repeat(")", 33), "", "error: too many captures (at byte 33 of the pattern)"},
	} {
		if got := find(c.pattern, c.subject); got != c.want {
			t.Errorf("find(%q, %q) = %s, want %s", c.pattern, c.subject, got, c.want)
		}
	}
}

// TestFindAll: every match from offset on, at most limit, as gmatch and gsub
// see them: after an empty match one byte on, after a longer one where it
// ended; an anchored pattern only at offset.
func TestFindAll(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		offset, limit    int
		want             string
	}{
		{"%a+", "one two  three", 0, -1, "1 3|5 7|10 14"},
		{"%a+", "one two  three", 0, 2, "1 3|5 7"},
		{"%a+", "one two  three", 4, -1, "5 7|10 14"},
		{"a*", "baa", 0, -1, "1 0|2 3|4 3"},
		{"", "ab", 0, -1, "1 0|2 1|3 2"},
		{"()", "ab", 0, -1, "1 0 1|2 1 2|3 2 3"},
		{"^a", "aaa", 0, -1, "1 1"},
		{"^a", "aaa", 1, -1, "2 2"},
		{"^b", "aaa", 0, -1, ""},
		{"(%w+)=(%w+)", "a=1, b=2", 0, -1, "1 3 \"a\" \"1\"|6 8 \"b\" \"2\""},
		{"x", "abc", 3, -1, ""},
	} {
		ms, err := Find(c.pattern, []byte(c.subject), c.offset, c.limit, nil)
		if err != nil {
			t.Errorf("Find(%q, %q): %v", c.pattern, c.subject, err)
			continue
		}
		var got []string
		for _, m := range ms {
			got = append(got, matchString(m, c.subject))
		}
		if strings.Join(got, "|") != c.want {
			t.Errorf("Find(%q, %q, %d, %d) = %s, want %s", c.pattern, c.subject, c.offset, c.limit, strings.Join(got, "|"), c.want)
		}
	}
}

// TestErrorIsTyped: a malformed pattern is a *Error with its offset.
func TestErrorIsTyped(t *testing.T) {
	_, err := Find("ab[c", []byte("x"), 0, 1, nil)
	var perr *Error
	if !errors.As(err, &perr) || perr.Pos != 2 {
		t.Fatalf("err = %#v, want a *Error at 2", err)
	}
}

// TestInterrupted: a pattern that backtracks for ever stops with
// ErrInterrupted soon after done is closed, and the matcher is usable after.
func TestInterrupted(t *testing.T) {
	done := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(done) })
	start := time.Now()
	_, err := Find(strings.Repeat("a*", 25)+"b", []byte(strings.Repeat("a", 30)), 0, 1, done)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("stopped after %v", elapsed)
	}
	if got := find("a*b", "aab"); got != "1 3" {
		t.Errorf("after: %s", got)
	}
}
