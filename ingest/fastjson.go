package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// rowDecoder decodes JSON objects into rows. Flat objects of plain values
// (the common event: strings without escapes, numbers, booleans, null) are
// scanned here without reflection; anything else (nested values, escapes,
// non-ASCII, malformed input) goes to compute.DecodeRow, which decides and
// gives the error. Both produce the same row for the same input
// (FuzzFastRow checks it). Keys are interned across rows.
type rowDecoder struct {
	keys map[string]string
	// order is the previous row's keys in order: rows of one input mostly
	// repeat it, and comparing with the key expected at a position is
	// cheaper than hashing it.
	order []string
	// values[j] caches the boxed string values of the field at position j
	// of order (reset when that key changes): low-cardinality columns
	// (country, action, device) then cost no allocation per row. A field
	// with more than maxValues distinct values stops being cached.
	values []valueCache
}

type valueCache struct {
	vals map[string]any
	off  bool
}

// maxValues bounds one field's cached values; maxValueLen the length of a
// cached value.
const (
	maxValues   = 256
	maxValueLen = 64
)

// stringValue returns the boxed string b of the field at position j.
func (d *rowDecoder) stringValue(j int, b []byte) any {
	if j >= len(d.values) || len(b) > maxValueLen {
		return string(b)
	}
	c := &d.values[j]
	if c.off {
		return string(b)
	}
	if v, ok := c.vals[string(b)]; ok {
		return v
	}
	if len(c.vals) >= maxValues {
		c.off, c.vals = true, nil
		return string(b)
	}
	if c.vals == nil {
		c.vals = map[string]any{}
	}
	var v any = string(b)
	c.vals[string(b)] = v
	return v
}

// maxOrder bounds the remembered key order.
const maxOrder = 64

// maxInterned bounds the interned keys so that inputs with ever-new keys
// cannot grow it without end.
const maxInterned = 4096

func (d *rowDecoder) decode(b []byte) (Row, error) {
	if row, ok := d.fast(b); ok {
		return row, nil // the fast path takes valid UTF-8 only
	}
	if err := checkUTF8(b, "line"); err != nil {
		return nil, err
	}
	return compute.DecodeRow(b)
}

// ErrInvalidUTF8 is wrapped by the error of a line (or CSV field) that is
// not valid UTF-8. Such a line is a bad line (its table's on_bad_line
// policy), not stored with U+FFFD in place of its bytes: encoding/json
// replaced them silently, so that two keys differing only in invalid bytes
// became one partition and the bytes were lost.
var ErrInvalidUTF8 = errors.New("invalid UTF-8")

// checkUTF8 returns an error naming the byte offset in b (a line, a field)
// of its first invalid UTF-8 sequence, or nil.
func checkUTF8(b []byte, what string) error {
	if utf8.Valid(b) {
		return nil
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("%w at byte %d of the %s (0x%02x)", ErrInvalidUTF8, i, what, b[i])
		}
		i += size
	}
	return ErrInvalidUTF8
}

func (d *rowDecoder) key(b []byte) string {
	if k, ok := d.keys[string(b)]; ok {
		return k
	}
	k := string(b)
	if d.keys == nil {
		d.keys = map[string]string{}
	}
	if len(d.keys) < maxInterned {
		d.keys[k] = k
	}
	return k
}

// keyAt interns the key found at field position j.
func (d *rowDecoder) keyAt(j int, b []byte) string {
	if j < len(d.order) && d.order[j] == string(b) {
		return d.order[j]
	}
	k := d.key(b)
	switch {
	case j < len(d.order):
		d.order[j] = k
		d.values[j] = valueCache{}
	case j == len(d.order) && j < maxOrder:
		d.order = append(d.order, k)
		d.values = append(d.values, valueCache{})
	}
	return k
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// fast scans a flat object; ok is false when the slow path must decide.
func (d *rowDecoder) fast(b []byte) (Row, bool) {
	row := make(Row, max(len(d.order), 8))
	s := flatScanner{b: b}
	for j := 0; ; j++ {
		expect := ""
		if j < len(d.order) {
			expect = d.order[j]
		}
		if st := s.next(expect, 0, 0); st != scanField {
			if st != scanEnd {
				return nil, false
			}
			return row, true
		}
		k := expect
		if !s.expected {
			k = d.keyAt(j, s.key())
		}
		switch s.kind {
		case colbatch.String:
			row[k] = d.stringValue(j, s.str())
		case colbatch.Int:
			row[k] = s.num
		case colbatch.Float:
			row[k] = math.Float64frombits(uint64(s.num))
		case colbatch.Bool:
			row[k] = s.num != 0
		default:
			row[k] = nil
		}
	}
}

// flatScanner scans a flat object of plain values field by field: next
// gives each of its fields in order, then scanEnd, or scanSlow when the
// slow path must decide (fields may have been given by then). Both
// decoders (rows as maps, rows as columns) use it, so they take and refuse
// the same inputs. The field is held as offsets in b, not slices of it:
// storing a pointer costs a write barrier while a collection runs.
type flatScanner struct {
	b  []byte
	i  int
	in bool // past the '{'
	// The field: its key is b[ks:ke]; its value's kind is colbatch.String
	// (b[vs:ve] the bytes between the quotes), Int (num), Float (num its
	// bits), Bool (num 0 or 1) or Null.
	ks, ke, vs, ve int
	num            int64
	kind           colbatch.Kind
	// expected is whether the key is the one next was told to expect.
	expected bool
}

// key returns the key of the field.
func (s *flatScanner) key() []byte { return s.b[s.ks:s.ke] }

// str returns the bytes of a String value.
func (s *flatScanner) str() []byte { return s.b[s.vs:s.ve] }

// What flatScanner.next found.
const (
	scanField = iota // key and val hold the next field
	scanEnd          // the object ended, and only space follows it
	scanSlow         // anything else: the slow path decides
)

// keyWord returns the 8-byte word and mask of key between quotes, as
// next compares it, or a zero mask when it is longer than 6 bytes.
func keyWord(key string) (word, mask uint64) {
	if key == "" || len(key) > 6 {
		return 0, 0
	}
	var w [8]byte
	w[0] = '"'
	copy(w[1:], key)
	w[len(key)+1] = '"'
	return binary.LittleEndian.Uint64(w[:]), 1<<(8*(len(key)+2)) - 1
}

// skipSpace returns the index of the first byte of b from i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// next scans the next field of the object. expect is the key the caller
// expects there (the previous row's at that position), or "": a key that
// is expect byte for byte is not scanned again (expect was plain). A
// nonzero mask holds the bytes of expect between its quotes, word those
// bytes (keyWord): one comparison of 8 bytes then decides.
func (s *flatScanner) next(expect string, word, mask uint64) int {
	b, n := s.b, len(s.b)
	i := skipSpace(b, s.i)
	if !s.in {
		if i >= n || b[i] != '{' {
			return scanSlow
		}
		s.in = true
		i = skipSpace(b, i+1)
		if i < n && b[i] == '}' {
			if skipSpace(b, i+1) != n {
				return scanSlow
			}
			return scanEnd
		}
	} else {
		// After a field: a comma and the next field, or the end.
		if i >= n {
			return scanSlow
		}
		if b[i] == '}' {
			if skipSpace(b, i+1) != n {
				return scanSlow
			}
			return scanEnd
		}
		if b[i] != ',' {
			return scanSlow
		}
		i = skipSpace(b, i+1)
	}
	var ks, ke int
	if mask != 0 && i+8 <= n && binary.LittleEndian.Uint64(b[i:])&mask == word {
		ks, ke, s.expected = i+1, i+1+len(expect), true
	} else if e := i + 1 + len(expect); mask == 0 && expect != "" && e < n && b[e] == '"' && b[i] == '"' && string(b[i+1:e]) == expect {
		ks, ke, s.expected = i+1, e, true
	} else {
		var ok bool
		if ks, ke, ok = plainString(b, i); !ok {
			return scanSlow
		}
		s.expected = false
	}
	i = skipSpace(b, ke+1)
	if i >= n || b[i] != ':' {
		return scanSlow
	}
	i = skipSpace(b, i+1)
	if i >= n {
		return scanSlow
	}
	switch c := b[i]; {
	case c == '"':
		vs, ve, ok := plainString(b, i)
		if !ok {
			return scanSlow
		}
		s.kind, s.vs, s.ve = colbatch.String, vs, ve
		i = ve + 1
	case c == 't':
		if n-i < 4 || string(b[i:i+4]) != "true" {
			return scanSlow
		}
		s.kind, s.num = colbatch.Bool, 1
		i += 4
	case c == 'f':
		if n-i < 5 || string(b[i:i+5]) != "false" {
			return scanSlow
		}
		s.kind, s.num = colbatch.Bool, 0
		i += 5
	case c == 'n':
		if n-i < 4 || string(b[i:i+4]) != "null" {
			return scanSlow
		}
		s.kind = colbatch.Null
		i += 4
	case c == '-' || c >= '0' && c <= '9':
		end, kind, x, ok := scanNumber(b, i)
		if !ok {
			return scanSlow
		}
		s.kind, s.num = kind, x
		i = end
	default:
		return scanSlow // objects, arrays, garbage
	}
	s.ks, s.ke, s.i = ks, ke, i
	return scanField
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// plainString returns the bounds of the contents of the string starting at
// b[i] == '"' when it has no escapes and only printable ASCII or valid
// UTF-8 (what the slow path would return unchanged). It reads 8 bytes at a
// time while they are printable ASCII other than '"' and '\\'.
func plainString(b []byte, i int) (start, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false
	}
	j := i + 1
	for ; j+8 <= len(b); j += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(b[j:])); m != 0 {
			j += bits.TrailingZeros64(m) / 8
			break
		}
	}
	ascii := true
	for ; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(b[i+1:j]) {
				return 0, 0, false
			}
			return i + 1, j, true
		case c == '\\' || c < 0x20:
			return 0, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, 0, false
}

// specialBytes marks (with its high bit) each byte of the 8 in w that is
// '"', '\\', a control character (below 0x20) or not ASCII (0x80 and up).
// Only the lowest marked byte is sure: a borrow from it may mark the next
// ones; bytes below the first marked one are never marked.
func specialBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ ('"' * ones) // zero bytes where w has '"'
	backslash := w ^ ('\\' * ones)
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (w - 0x20*ones) | w) & highs
}

// scanNumber scans the JSON number at b[i] and returns its end and value:
// kind colbatch.Int (x the int64) or colbatch.Float (x its bits), as
// compute.DecodeRow reads it; ok is false when the slow path must decide
// (not a number, an integer beyond int64: a json.Number there, a float out
// of range). The grammar, the digits and the value are read in one pass.
// A float is strconv.ParseFloat's bit for bit: short decimals (at most 19
// digits, an integer below 2^53 times or divided by a power of ten up to
// 10^22) are exact in float64 arithmetic (both operands are exact and IEEE
// 754 rounds the one product or quotient correctly); anything else goes to
// strconv.
func scanNumber(b []byte, i int) (end int, kind colbatch.Kind, x int64, ok bool) {
	start, n := i, len(b)
	neg := i < n && b[i] == '-'
	if neg {
		i++
	}
	if i >= n {
		return 0, 0, 0, false
	}
	var mant uint64
	digits := 0
	switch c := b[i]; {
	case c == '0':
		i++
		digits = 1
	case c >= '1' && c <= '9':
		for ; i < n && b[i] >= '0' && b[i] <= '9'; i++ {
			mant = mant*10 + uint64(b[i]-'0')
			digits++
		}
	default:
		return 0, 0, 0, false
	}
	isInt, exp := true, 0
	if i < n && b[i] == '.' {
		isInt = false
		i++
		d := i
		for ; i < n && b[i] >= '0' && b[i] <= '9'; i++ {
			mant = mant*10 + uint64(b[i]-'0')
		}
		if i == d {
			return 0, 0, 0, false
		}
		digits += i - d
		exp = d - i
	}
	bigExp := false
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		isInt = false
		i++
		eneg := i < n && b[i] == '-'
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d, e := i, 0
		for ; i < n && b[i] >= '0' && b[i] <= '9'; i++ {
			if i-d < 4 {
				e = e*10 + int(b[i]-'0')
			}
		}
		if i == d {
			return 0, 0, 0, false
		}
		bigExp = i-d > 4
		if eneg {
			e = -e
		}
		exp += e
	}
	if isInt {
		switch {
		case digits <= 18:
			if neg && mant == 0 {
				return i, colbatch.Float, int64(math.Float64bits(math.Copysign(0, -1))), true // -0 is a float
			}
			x = int64(mant)
			if neg {
				x = -x
			}
			return i, colbatch.Int, x, true
		}
		x, ok := bigInt(b[start:i])
		return i, colbatch.Int, x, ok
	}
	if digits > 15 {
		// float64 may round it: the slow path decides (a json.Number then).
		f, err := strconv.ParseFloat(string(b[start:i]), 64)
		return i, colbatch.Float, int64(math.Float64bits(f)), err == nil && compute.FloatKeepsText(string(b[start:i]), f)
	}
	if bigExp || mant > 1<<53 || exp < -22 || exp > 22 {
		f, err := strconv.ParseFloat(string(b[start:i]), 64)
		return i, colbatch.Float, int64(math.Float64bits(f)), err == nil
	}
	f := float64(mant)
	if exp < 0 {
		f /= pow10[-exp]
	} else {
		f *= pow10[exp]
	}
	if neg {
		f = -f
	}
	return i, colbatch.Float, int64(math.Float64bits(f)), true
}

// bigInt parses a JSON integer of 19 digits or more; ok is false beyond
// int64 (a json.Number on the slow path).
func bigInt(s []byte) (int64, bool) {
	x, err := strconv.ParseInt(string(s), 10, 64)
	return x, err == nil
}
