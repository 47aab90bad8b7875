package ingest

import (
	"errors"
	"fmt"
	"math"
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
	ok := scanFlat(b, func(field int, key []byte, v flatValue) {
		k := d.keyAt(field, key)
		switch v.kind {
		case colbatch.String:
			row[k] = d.stringValue(field, v.s)
		case colbatch.Int:
			row[k] = v.i
		case colbatch.Float:
			row[k] = math.Float64frombits(uint64(v.i))
		case colbatch.Bool:
			row[k] = v.i != 0
		default:
			row[k] = nil
		}
	})
	if !ok {
		return nil, false
	}
	return row, true
}

// flatValue is one scalar of a flat object: kind is colbatch.String (s
// the bytes between the quotes), Int, Float (i its bits), Bool or Null.
type flatValue struct {
	s    []byte
	i    int64
	kind colbatch.Kind
}

// scanFlat scans a flat object of plain values, calling field for each of
// its fields in order (field is its position); ok is false when the slow
// path must decide (fields may have been reported by then). Both decoders
// (rows as maps, rows as columns) share it, so they take and refuse the
// same inputs.
func scanFlat(b []byte, field func(j int, key []byte, v flatValue)) bool {
	i, n := 0, len(b)
	for i < n && isSpace(b[i]) {
		i++
	}
	if i >= n || b[i] != '{' {
		return false
	}
	i++
	for i < n && isSpace(b[i]) {
		i++
	}
	if i < n && b[i] == '}' {
		i++
		for i < n && isSpace(b[i]) {
			i++
		}
		return i == n
	}
	for j := 0; ; j++ {
		for i < n && isSpace(b[i]) {
			i++
		}
		ks, ke, ok := plainString(b, i)
		if !ok {
			return false
		}
		i = ke + 1
		for i < n && isSpace(b[i]) {
			i++
		}
		if i >= n || b[i] != ':' {
			return false
		}
		i++
		for i < n && isSpace(b[i]) {
			i++
		}
		if i >= n {
			return false
		}
		var v flatValue
		switch c := b[i]; {
		case c == '"':
			vs, ve, ok := plainString(b, i)
			if !ok {
				return false
			}
			v = flatValue{kind: colbatch.String, s: b[vs:ve]}
			i = ve + 1
		case c == 't':
			if n-i < 4 || string(b[i:i+4]) != "true" {
				return false
			}
			v = flatValue{kind: colbatch.Bool, i: 1}
			i += 4
		case c == 'f':
			if n-i < 5 || string(b[i:i+5]) != "false" {
				return false
			}
			v = flatValue{kind: colbatch.Bool}
			i += 5
		case c == 'n':
			if n-i < 4 || string(b[i:i+4]) != "null" {
				return false
			}
			v = flatValue{kind: colbatch.Null}
			i += 4
		case c == '-' || c >= '0' && c <= '9':
			end, isInt, ok := scanNumber(b, i)
			if !ok {
				return false
			}
			s := b[i:end]
			if isInt && string(s) != "-0" {
				x, ok := parseInt(s)
				if !ok {
					return false // beyond int64: json.Number on the slow path
				}
				v = flatValue{kind: colbatch.Int, i: x}
			} else {
				x, err := strconv.ParseFloat(string(s), 64)
				if err != nil {
					return false
				}
				v = flatValue{kind: colbatch.Float, i: int64(math.Float64bits(x))}
			}
			i = end
		default:
			return false // objects, arrays, garbage
		}
		field(j, b[ks:ke], v)
		for i < n && isSpace(b[i]) {
			i++
		}
		if i >= n {
			return false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '}' {
			return false
		}
		i++
		for i < n && isSpace(b[i]) {
			i++
		}
		return i == n
	}
}

// parseInt parses the digits of a JSON integer (scanNumber checked the
// grammar); ok is false beyond int64.
func parseInt(s []byte) (int64, bool) {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) > 18 {
		// Might not fit: let strconv decide.
		x, err := strconv.ParseInt(string(s), 10, 64)
		if neg && err != nil && string(s) == "9223372036854775808" {
			return math.MinInt64, true
		}
		if err != nil {
			return 0, false
		}
		if neg {
			x = -x
		}
		return x, true
	}
	var x int64
	for _, c := range s {
		x = x*10 + int64(c-'0')
	}
	if neg {
		x = -x
	}
	return x, true
}

// plainString returns the bounds of the contents of the string starting at
// b[i] == '"' when it has no escapes and only printable ASCII or valid
// UTF-8 (what the slow path would return unchanged).
func plainString(b []byte, i int) (start, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
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

// scanNumber checks the JSON number grammar from b[i] and returns its end.
func scanNumber(b []byte, i int) (end int, isInt, ok bool) {
	n := len(b)
	if i < n && b[i] == '-' {
		i++
	}
	if i >= n {
		return 0, false, false
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < n && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, false, false
	}
	isInt = true
	if i < n && b[i] == '.' {
		isInt = false
		i++
		d := i
		for i < n && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false, false
		}
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		isInt = false
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < n && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false, false
		}
	}
	return i, isInt, true
}
