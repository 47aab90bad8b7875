package jsonw

import "testing"

// TestSkipValue: the end of each value, the same over a string and over
// bytes, and no end for text that does not close.
func TestSkipValue(t *testing.T) {
	for _, c := range []struct {
		doc  string
		end  int
		ok   bool
		desc string
	}{
		{`"a\"b",1`, 6, true, "a string with an escaped quote"},
		{`{"a":[1,"]"]} x`, 13, true, "an object with a bracket in a string"},
		{`[[],{}]`, 7, true, "nested empties"},
		{`-1.5e3}`, 6, true, "a number ends at a delimiter"},
		{`true `, 4, true, "a literal ends at a space"},
		{`{"a":1`, 0, false, "an unclosed object"},
		{`"abc`, 0, false, "an unclosed string"},
		{`["\"]`, 0, false, "a string whose quote is escaped never closes"},
		{``, 0, false, "nothing"},
		{`,`, 0, false, "a delimiter where a value should be"},
	} {
		end, ok := SkipValue(c.doc, 0)
		bend, bok := SkipValue([]byte(c.doc), 0)
		if end != bend || ok != bok {
			t.Errorf("%s: string %d %v, bytes %d %v", c.desc, end, ok, bend, bok)
		}
		if ok != c.ok || (ok && end != c.end) {
			t.Errorf("%s: SkipValue(%q) = %d, %v; want %d, %v", c.desc, c.doc, end, ok, c.end, c.ok)
		}
	}
	if i := SkipSpace(" \t\r\nx", 0); i != 4 {
		t.Errorf("SkipSpace = %d, want 4", i)
	}
	if end, escaped, ok := SkipString(`"a\nb" `, 0); end != 6 || !escaped || !ok {
		t.Errorf("SkipString = %d %v %v, want 6 true true", end, escaped, ok)
	}
}
