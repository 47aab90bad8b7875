package rdbtool

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// checkString encodes s with appendString and decodes the result with
// encoding/json, which must give back exactly s.
func checkString(t testing.TB, s []byte) {
	t.Helper()
	out := appendString([]byte("prefix"), s)
	if !bytes.HasPrefix(out, []byte("prefix")) {
		t.Fatalf("appendString clobbered dst: %q", out)
	}
	out = out[len("prefix"):]
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("appendString(%q) = %s: not JSON: %v", s, out, err)
	}
	switch v := v.(type) {
	case string:
		if !utf8.Valid(s) {
			t.Fatalf("appendString(%q) = %s: invalid UTF-8 written as a JSON string", s, out)
		}
		if v != string(s) {
			t.Fatalf("appendString(%q) = %s: decodes to %q", s, out, v)
		}
	case map[string]any:
		if utf8.Valid(s) {
			t.Fatalf("appendString(%q) = %s: valid UTF-8 written as base64", s, out)
		}
		b64, _ := v["base64"].(string)
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || !bytes.Equal(got, s) || len(v) != 1 {
			t.Fatalf("appendString(%q) = %s: base64 form decodes to %q (%v)", s, out, got, err)
		}
	default:
		t.Fatalf("appendString(%q) = %s: decoded to %T", s, out, v)
	}
}

func TestAppendStringAgainstEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "a", "plain ascii text that is longer than eight bytes", `"`, `\`, "\x00", "\x1f", "\x7f", "\n\r\t\b\f",
		"héllo wörld", "日本語", "🙂", "\u2028\u2029", "\xff", "abc\xffdef", "\xc3", "12345678\xe6\x97", "\xed\xa0\x80",
		"ends with quote 1234567\"", "0123456\\", string(make([]byte, 40)),
	} {
		checkString(t, []byte(s))
	}
	// Every byte value at every position of a 17-byte window (both sides of
	// the 8-byte fast path).
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 17; pos++ {
			b := bytes.Repeat([]byte("x"), 17)
			b[pos] = byte(c)
			checkString(t, b)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		b := make([]byte, rng.IntN(64))
		for j := range b {
			switch rng.IntN(4) {
			case 0:
				b[j] = byte(rng.IntN(256))
			default:
				b[j] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		checkString(t, b)
	}
}

func TestAppendStringMatchesEncodingJSONBytes(t *testing.T) {
	// For valid UTF-8 without <, >, & and U+2028/9 (which encoding/json
	// escapes for HTML), our output is byte-identical to encoding/json's
	// apart from the \b \f short forms it also uses.
	for _, s := range []string{"a\"b\\c\nd\te\x01f", "héllo 日本語 🙂", "\b\f\r"} {
		want, _ := json.Marshal(s)
		got := appendString(nil, []byte(s))
		if !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "abc", "\xff", "héllo", "\x00\"\\", "0123456789abcdef\x80"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) { checkString(t, s) })
}

func TestAppendFloat(t *testing.T) {
	f := func(in float64, want string) {
		t.Helper()
		if got := string(appendFloat(nil, in)); got != want {
			t.Errorf("appendFloat(%v) = %s, want %s", in, got, want)
		}
	}
	f(1, "1")
	f(-2.5, "-2.5")
	f(1e21, "1e+21")
	f(123456789, "123456789")
	f(math.Copysign(0, -1), "-0")
	f(1<<53-1, "9007199254740991")
	f(math.Inf(1), `"inf"`)
	f(math.Inf(-1), `"-inf"`)
	f(math.NaN(), `"nan"`)
	for _, v := range []float64{0.1, 1.0 / 3, 1e-300, math.MaxFloat64, 123456789012345678, -42, 1<<53 - 1, math.Copysign(0, -1)} {
		var back float64
		if err := json.Unmarshal(appendFloat(nil, v), &back); err != nil || back != v {
			t.Errorf("appendFloat(%v) does not round-trip through encoding/json: %v %v", v, back, err)
		}
	}
}

func BenchmarkAppendString(b *testing.B) {
	s := []byte("user:12345:session some ordinary ascii value with a few words in it, typical of a cache entry")
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	buf := make([]byte, 0, 256)
	for b.Loop() {
		buf = appendString(buf[:0], s)
	}
}

// BenchmarkAppendStringJSONText is the escape-heavy case: a cached JSON
// document stored as a Redis string, a quote every few bytes.
func BenchmarkAppendStringJSONText(b *testing.B) {
	var doc bytes.Buffer
	for i := 0; doc.Len() < 4096; i++ {
		doc.WriteString(`{"id":12345,"name":"item 7","tags":["red","green"],"price":12.50},`)
	}
	s := doc.Bytes()
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	buf := make([]byte, 0, 8192)
	for b.Loop() {
		buf = appendString(buf[:0], s)
	}
}

// TestAppendStringPiecesEqualsWhole: a big string written in pieces is byte
// for byte what appendString writes whole, whatever falls on a piece
// boundary (multi-byte runes, escapes, invalid UTF-8 turning it into
// base64), and no piece handed to flush is much over bigString.
func TestAppendStringPiecesEqualsWhole(t *testing.T) {
	unit := []string{"a", "é", "日本", "🙂", "\"", "\\", "\n", "\x01", "plain text "}
	var cases [][]byte
	for _, n := range []int{bigString - 1, bigString, bigString + 1, 3*bigString + 7} {
		for shift := 0; shift < 4; shift++ {
			var b []byte
			for i := 0; len(b) < n; i++ {
				b = append(b, unit[(i+shift)%len(unit)]...)
			}
			b = b[:n]
			for len(b) > 0 && !utf8.Valid(b) { // cut mid-rune: trim to valid
				b = b[:len(b)-1]
			}
			cases = append(cases, b)
			bad := bytes.Clone(b)
			bad[len(bad)/2] = 0xff
			cases = append(cases, bad)
		}
	}
	for i, s := range cases {
		want := appendString([]byte("prefix"), s)
		var out []byte
		pieces := 0
		got := appendStringPieces([]byte("prefix"), s, func(b []byte) []byte {
			pieces++
			if len(b) > 7*bigString {
				t.Errorf("case %d: a piece of %d bytes", i, len(b))
			}
			out = append(out, b...)
			return b[:0]
		})
		out = append(out, got...)
		if !bytes.Equal(out, want) {
			t.Fatalf("case %d (%d bytes): pieces differ from the whole (%d vs %d bytes)", i, len(s), len(out), len(want))
		}
		if len(s) > bigString && pieces == 0 {
			t.Errorf("case %d: a %d-byte string was not written in pieces", i, len(s))
		}
	}
}
