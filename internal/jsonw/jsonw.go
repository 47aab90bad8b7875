// Package jsonw appends JSON to byte slices, writing the same bytes as
// encoding/json with SetEscapeHTML(false) for the values rows hold (nil,
// strings, bools, integers, floats, json.Number, json.RawMessage, time.Time,
// map[string]any with sorted keys, []any), without reflection and without
// allocating when the buffer has room. compute (row output and the sluice
// Lua module), luavm (json.encode of a row) and server (query streams) share
// it so that every JSON sluice writes agrees byte for byte. It also skips
// over JSON text without decoding it (SkipValue: table's paths into json
// columns, ingest's change envelopes read it the one way). It depends on
// nothing of ours.
package jsonw

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

const hexDigits = "0123456789abcdef"

// AppendString appends s quoted as encoding/json does with HTML escaping
// off: invalid UTF-8 becomes \ufffd, U+2028 and U+2029 are escaped.
func AppendString(buf []byte, s string) []byte {
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

// AppendFloat appends f as encoding/json formats a float of the given bit
// size (32 or 64): shortest representation, the 'e' form only for very
// small or large magnitudes, the exponent without a leading zero. NaN and
// infinities are an error, as in encoding/json.
func AppendFloat(buf []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return buf, fmt.Errorf("json: unsupported value: %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	buf = strconv.AppendFloat(buf, f, format, -1, bits)
	if format == 'e' {
		n := len(buf)
		if n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, nil
}

// AppendValue appends the JSON encoding of v. Types other than the listed
// ones go through encoding/json (HTML escaping off).
func AppendValue(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case string:
		return AppendString(buf, x), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(buf, x, 10), nil
	case float64:
		return AppendFloat(buf, x, 64)
	case float32:
		return AppendFloat(buf, float64(x), 32)
	case json.Number:
		if x == "" { // encoding/json writes the empty Number as 0
			return append(buf, '0'), nil
		}
		if !IsNumber(string(x)) {
			return buf, fmt.Errorf("json: invalid number literal %q", string(x))
		}
		return append(buf, x...), nil
	case json.RawMessage:
		return appendRaw(buf, x)
	case time.Time:
		if y := x.Year(); y < 0 || y > 9999 { // as Time.MarshalJSON
			return buf, fmt.Errorf("json: time %v: year outside of range [0,9999]", x)
		}
		buf = append(buf, '"')
		buf = x.AppendFormat(buf, time.RFC3339Nano)
		return append(buf, '"'), nil
	case map[string]any:
		if x == nil {
			return append(buf, "null"...), nil
		}
		return AppendObject(buf, x, nil)
	case []any:
		if x == nil {
			return append(buf, "null"...), nil
		}
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = AppendValue(buf, e); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return buf, err
	}
	return append(buf, bytes.TrimSuffix(out.Bytes(), []byte{'\n'})...), nil
}

// AppendObject appends m as a JSON object with its keys sorted, leaving out
// the keys for which skip (if not nil) returns true. An error names the key
// whose value could not be encoded. A nil map is written as {} (a row
// without fields), unlike AppendValue, which writes null as encoding/json.
func AppendObject(buf []byte, m map[string]any, skip func(key string) bool) ([]byte, error) {
	var arr [32]string // rows rarely have more keys: no allocation to sort them
	keys := arr[:0]
	for k := range m {
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
		buf = AppendString(buf, k)
		buf = append(buf, ':')
		var err error
		if buf, err = AppendValue(buf, m[k]); err != nil {
			return buf, fmt.Errorf("key %q: %w", k, err)
		}
	}
	return append(buf, '}'), nil
}

// appendRaw appends raw JSON as encoding/json does: nil is null, the text
// is validated and written compact.
func appendRaw(buf []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(buf, "null"...), nil
	}
	if !bytes.ContainsAny(raw, " \t\r\n") {
		if !json.Valid(raw) {
			return buf, fmt.Errorf("json: invalid raw message %.40q", raw)
		}
		return append(buf, raw...), nil
	}
	out := bytes.NewBuffer(buf)
	if err := json.Compact(out, raw); err != nil {
		return buf, fmt.Errorf("json: raw message: %w", err)
	}
	return out.Bytes(), nil
}

// IsNumber reports whether s is a JSON number literal.
func IsNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}
