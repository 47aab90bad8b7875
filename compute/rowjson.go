package compute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/jsonw"
)

// DecodeRow decodes one JSON object into a row, keeping types exact:
// integers become int64 (all 64 bits, not rounded through float64),
// integers beyond int64 stay json.Number (their text), other numbers become
// float64 (numbers that overflow float64, and those float64 would round,
// stay json.Number: see FloatKeepsText), null is nil, and nested objects
// and arrays are map[string]any and []any.
func DecodeRow(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var row map[string]any
	if err := dec.Decode(&row); err != nil {
		return nil, err
	}
	if row == nil {
		return nil, fmt.Errorf("not a JSON object: %.40q", data)
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON object at byte %d", dec.InputOffset())
	}
	normalizeMap(row)
	return row, nil
}

func normalizeMap(m map[string]any) {
	for k, v := range m {
		m[k] = normalize(v)
	}
}

func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		return normalizeNumber(x)
	case map[string]any:
		normalizeMap(x)
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
	}
	return v
}

func normalizeNumber(n json.Number) any {
	s := string(n)
	isInt := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == 'e' || c == 'E' {
			isInt = false
			break
		}
	}
	if isInt && s != "-0" { // -0 is a float: an int64 has no negative zero
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
		return n // beyond int64: keep every digit
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && FloatKeepsText(s, f) {
		return f
	}
	return n
}

// FloatKeepsText reports whether f, the float64 ParseFloat read from the
// JSON number text, is that number: its shortest text denotes the same
// decimal. Every number of up to 15 significant digits passes (float64
// holds 15 decimal digits) and none of over 17 does (float64's shortest
// text has at most 17); between, the texts are compared. A number that
// fails (a decimal(38,s) value's 38 digits) keeps its text as a
// json.Number in the decoders, so that a decimal column takes it exactly
// or refuses it, never a rounded float (a float64 column rounds it when it
// converts it, as before). It allocates nothing.
func FloatKeepsText(text string, f float64) bool {
	var a [24]byte
	n1, d1, e1, ok := canonicalDecimal(text, a[:0])
	if !ok || len(d1) > 17 {
		return false
	}
	if len(d1) <= 15 {
		return true
	}
	var buf [32]byte
	var b [24]byte
	n2, d2, e2, _ := canonicalDecimal(string(strconv.AppendFloat(buf[:0], f, 'e', -1, 64)), b[:0])
	return n1 == n2 && string(d1) == string(d2) && e1 == e2
}

// canonicalDecimal is a decimal number's text as sign, its significant
// digits (no leading or trailing zeros, appended to buf) and the exponent
// of their last digit, so that two texts of one number give the same
// three (zero: no digits, 0). ok is false when it has more digits than
// buf holds (then it is no float64's shortest text).
func canonicalDecimal(s string, buf []byte) (neg bool, digits []byte, exp int, ok bool) {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		exp, _ = strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	}
	zeros := 0 // zeros met after the last non-zero digit, not yet appended
	for i := 0; i < len(mant); i++ {
		c := mant[i]
		switch {
		case c == '.':
			exp -= len(mant) - i - 1 // the digits after the point
		case c == '0' && len(buf) == 0:
			// a leading zero
		case c == '0':
			zeros++
		default:
			if len(buf)+zeros+1 > cap(buf) {
				return neg, nil, 0, false
			}
			for ; zeros > 0; zeros-- {
				buf = append(buf, '0')
			}
			buf = append(buf, c)
		}
	}
	if len(buf) == 0 {
		return false, nil, 0, true
	}
	return neg, buf, exp + zeros, true
}

// AppendJSONRow appends the JSON encoding of row, keys sorted, without the
// keys in omit, to buf. It writes what encoding/json writes for the same
// values (without HTML escaping), faster for the common scalar types; the
// encoder is internal/jsonw, shared with luavm's json.encode and server.
func AppendJSONRow(buf []byte, row map[string]any, omit map[string]struct{}) ([]byte, error) {
	if len(omit) == 0 {
		return jsonw.AppendObject(buf, row, nil)
	}
	return jsonw.AppendObject(buf, row, func(k string) bool { _, skip := omit[k]; return skip })
}

// appendJSONRowOmitting is AppendJSONRow with the omitted keys as a list
// (linear search: the lists are short and no map is built per call).
func appendJSONRowOmitting(buf []byte, row map[string]any, omit []string) ([]byte, error) {
	if len(omit) == 0 {
		return jsonw.AppendObject(buf, row, nil)
	}
	return jsonw.AppendObject(buf, row, func(k string) bool { return slices.Contains(omit, k) })
}
