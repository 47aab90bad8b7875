package compute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// DecodeRow decodes one JSON object into a row, keeping types exact:
// integers become int64 (all 64 bits, not rounded through float64),
// integers beyond int64 stay json.Number (their text), other numbers become
// float64 (numbers that overflow float64 stay json.Number), null is nil, and
// nested objects and arrays are map[string]any and []any.
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
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return n
}

// AppendJSONRow appends the JSON encoding of row, keys sorted, without the
// keys in omit, to buf. It writes what encoding/json writes for the same
// values (without HTML escaping), faster for the common scalar types.
func AppendJSONRow(buf []byte, row map[string]any, omit map[string]struct{}) ([]byte, error) {
	if len(omit) == 0 {
		return appendRow(buf, row, nil)
	}
	return appendRow(buf, row, func(k string) bool { _, skip := omit[k]; return skip })
}

// appendJSONRowOmitting is AppendJSONRow with the omitted keys as a list
// (linear search: the lists are short and no map is built per call).
func appendJSONRowOmitting(buf []byte, row map[string]any, omit []string) ([]byte, error) {
	if len(omit) == 0 {
		return appendRow(buf, row, nil)
	}
	return appendRow(buf, row, func(k string) bool {
		for _, o := range omit {
			if o == k {
				return true
			}
		}
		return false
	})
}

func appendRow(buf []byte, row map[string]any, skip func(string) bool) ([]byte, error) {
	var arr [32]string
	keys := arr[:0]
	for k := range row {
		if skip == nil || !skip(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, k)
		buf = append(buf, ':')
		var err error
		if buf, err = appendJSONValue(buf, row[k]); err != nil {
			return buf, fmt.Errorf("key %q: %w", k, err)
		}
	}
	return append(buf, '}'), nil
}

func appendJSONValue(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case string:
		return appendJSONString(buf, x), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case float64:
		return appendJSONFloat(buf, x)
	case json.Number:
		if !json.Valid([]byte(x)) {
			return buf, fmt.Errorf("invalid number %q", string(x))
		}
		return append(buf, x...), nil
	case json.RawMessage:
		return append(buf, x...), nil
	case time.Time:
		buf = append(buf, '"')
		buf = x.AppendFormat(buf, time.RFC3339Nano)
		return append(buf, '"'), nil
	case map[string]any:
		return AppendJSONRow(buf, x, nil)
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendJSONValue(buf, e); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return buf, err
	}
	return append(buf, b...), nil
}

// appendJSONFloat formats like encoding/json: shortest repr, 'e' form only
// for very small or large magnitudes, exponent without a leading zero.
func appendJSONFloat(buf []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return buf, fmt.Errorf("unsupported float %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		n := len(buf)
		if n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does with HTML escaping off.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b': // encoding/json writes \b and \f short since Go 1.22
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
