package pattern

import (
	"strings"
	"testing"
)

// BenchmarkFind is Find on patterns typical of computed columns: a trim, a
// key=value split, a date, every word of a 1 KB text (gmatch/gsub), a
// balanced %b and a search that fails at each position.
func BenchmarkFind(b *testing.B) {
	text := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog, ", 23))
	for _, bc := range []struct {
		name, pattern string
		src           []byte
		limit         int
	}{
		{"trim", "^%s*(.-)%s*$", []byte("   some value with spaces   "), 1},
		{"keyValue", "(%w+)=(%w+)", []byte("user_agent: x; key=value; other"), 1},
		{"date", "^(%d%d%d%d)-(%d%d)-(%d%d)T", []byte("2024-05-01T12:00:00Z"), 1},
		{"words", "%a+", text, -1},
		{"set", "[%w_%.]+@[%w%.]+", []byte("contact: some.one_x@example.com, please"), 1},
		{"balanced", "%b()", []byte("f(a, g(b, c), h(d(e)))"), -1},
		{"noMatch", "xyz%d", text, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := Find(bc.pattern, bc.src, 0, bc.limit, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
