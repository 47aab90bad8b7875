package rdbtool

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// appendString appends s as the lossless JSON form of a Redis string: a JSON
// string when s is valid UTF-8, else {"base64":"..."} (standard alphabet,
// padded). Redis strings are binary-safe, JSON strings are Unicode: this keeps
// every byte and keeps the common case readable. It is not internal/jsonw
// on purpose: jsonw matches encoding/json (invalid UTF-8 becomes \ufffd,
// losing bytes) while exports must be lossless, and this path is SWAR-tuned
// for the bulk string volume of RDB exports.
func appendString(dst, s []byte) []byte {
	mark := len(dst)
	dst, ok := appendQuotedUTF8(dst, s)
	if ok {
		return dst
	}
	dst = append(dst[:mark], `{"base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, s)
	return append(dst, `"}`...)
}

// bigString is the length above which a string is written in pieces
// (appendStringPieces) rather than escaped into the buffer whole.
const bigString = 64 << 10

// appendStringPieces appends s as appendString does, but for a string longer
// than bigString it escapes (or base64-encodes) bigString input bytes at a
// time and calls flush after each piece with the buffer so far; flush
// returns the buffer to go on with (usually emptied after writing it out).
// A huge value then never sits in memory as JSON whole, and the output is
// byte for byte appendString's: validity is decided on the whole string
// first, pieces are cut on rune starts (JSON) or multiples of 3 bytes
// (base64, so no padding in the middle).
func appendStringPieces(dst, s []byte, flush func([]byte) []byte) []byte {
	if len(s) <= bigString {
		return appendString(dst, s)
	}
	if !utf8.Valid(s) {
		dst = append(dst, `{"base64":"`...)
		const piece = bigString / 3 * 3
		for len(s) > 0 {
			n := min(len(s), piece)
			dst = flush(base64.StdEncoding.AppendEncode(dst, s[:n]))
			s = s[n:]
		}
		return append(dst, `"}`...)
	}
	for first := true; len(s) > 0; first = false {
		n := min(len(s), bigString)
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n--
		}
		mark := len(dst)
		dst, _ = appendQuotedUTF8(dst, s[:n]) // valid: the whole string is
		// Keep the opening quote of the first piece and the closing quote of
		// the last: drop the others.
		if !first {
			dst = append(dst[:mark], dst[mark+1:]...)
		}
		s = s[n:]
		if len(s) > 0 {
			dst = flush(dst[:len(dst)-1])
		}
	}
	return dst
}

// appendQuotedUTF8 appends s as a JSON string. It reports false (with dst
// holding partial output the caller discards) if s is not valid UTF-8.
//
// Escapes: '"' and '\\' with a backslash, control bytes < 0x20 as \n \r \t
// \b \f or \u00XX; everything else, including multi-byte UTF-8, is copied.
// U+2028 / U+2029 are valid JSON and copied (encoding/json escapes them only
// for embedding in HTML/JavaScript).
func appendQuotedUTF8(dst, s []byte) ([]byte, bool) {
	// Fast path, the common case: nothing to escape and all ASCII. Check 8
	// bytes at a time, the last word overlapping the one before so no byte
	// is looked at alone, then copy the whole string at once.
	i := 0 // s[:i] is known clean
	if n := len(s); n >= 8 {
		for i+8 <= n && attention(binary.LittleEndian.Uint64(s[i:])) == 0 {
			i += 8
		}
		if i+8 > n && attention(binary.LittleEndian.Uint64(s[n-8:])) == 0 {
			dst = append(dst, '"')
			dst = append(dst, s...)
			return append(dst, '"'), true
		}
	}
	dst = append(dst, '"')
	start := 0 // s[start:i] is safe and not yet copied
	for i < len(s) {
		var c byte
		if i+8 <= len(s) {
			// Every byte needing attention in the next word, exactly: the
			// escapes of a JSON-in-a-string value (a quote every few
			// bytes) are all written from one look at the word.
			m := attentionExact(binary.LittleEndian.Uint64(s[i:]))
			if m == 0 {
				i += 8
				continue
			}
			if m&highBits(binary.LittleEndian.Uint64(s[i:])) == 0 {
				// ASCII only: escape each flagged byte, then move on.
				for ; m != 0; m &= m - 1 {
					j := i + bits.TrailingZeros64(m)>>3
					dst = append(dst, s[start:j]...)
					dst = appendEscape(dst, s[j])
					start = j + 1
				}
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
			c = s[i]
		} else {
			c = s[i]
			if c < utf8.RuneSelf && safeASCII[c] {
				i++
				continue
			}
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, false
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscape(dst, c)
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}

// appendEscape appends the JSON escape of the ASCII byte c: '"', '\\' or a
// control byte.
func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// attentionExact is attention without false positives: bit 7 is set in
// exactly the bytes of x that are control bytes, '"', '\\' or non-ASCII.
// Each test works on the low 7 bits of a byte, where adding at most 0x7f
// cannot carry into the next byte.
func attentionExact(x uint64) uint64 {
	const lo = 0x0101010101010101
	const hi = 0x8080808080808080
	l7 := x &^ hi
	ctl := l7 + lo*(0x80-0x20)     // bit 7 set: low 7 bits >= 0x20
	q := (l7 ^ lo*'"') + lo*0x7f   // bit 7 set: low 7 bits != '"'
	bs := (l7 ^ lo*'\\') + lo*0x7f // bit 7 set: low 7 bits != '\\'
	return (x | ^(ctl & q & bs)) & hi
}

// highBits has bit 7 set in the bytes of x that are non-ASCII.
func highBits(x uint64) uint64 { return x & 0x8080808080808080 }

const hexDigits = "0123456789abcdef"

// safeASCII[c] is true for ASCII bytes copied verbatim into a JSON string.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// attention returns a mask with bit 7 set in (at least) the lowest byte of
// x that is a control byte (< 0x20), '"', '\\' or non-ASCII (>= 0x80), and
// 0 when there is none. Classic SWAR: a byte b is "less than n" when b - n
// borrows into bit 7 while b itself had bit 7 clear; equality is "b XOR v
// less than 1". Borrows can only flag bytes above a flagged byte, so the
// lowest flagged byte is exact (what bits.TrailingZeros64 finds).
func attention(x uint64) uint64 {
	const lo = 0x0101010101010101
	const hi = 0x8080808080808080
	q := x ^ (lo * '"')
	bs := x ^ (lo * '\\')
	// q and bs keep x's bit 7 (neither constant has it), so one &^ x
	// serves all three "less than" tests.
	return ((x-lo*0x20)|(q-lo)|(bs-lo))&^x&hi | x&hi
}

// appendFloat appends a zset score or other double in a JSON-safe form: a
// JSON number in the shortest form that round-trips, or the strings "inf",
// "-inf", "nan", which JSON numbers cannot express.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, `"inf"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-inf"`...)
	case math.IsNaN(f):
		return append(dst, `"nan"`...)
	}
	// Whole scores are common (counters, timestamps): format them as
	// integers, much cheaper than the shortest-float search. -0 keeps the
	// general path so its sign survives.
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 && (f != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}
