package server

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/table"
)

// rowEncoder writes query rows as JSON objects with the keys in projection
// order. The key prefixes are encoded once per query, and the values are
// the few types table.Query returns, so no per-row sort or reflection.
type rowEncoder struct {
	cols []string
	keys [][]byte // `"name":` with a leading comma for all but the first
}

func newRowEncoder(cols []string) *rowEncoder {
	e := &rowEncoder{cols: cols}
	for i, c := range cols {
		var k []byte
		if i > 0 {
			k = append(k, ',')
		}
		k = appendString(k, c)
		e.keys = append(e.keys, append(k, ':'))
	}
	return e
}

func (e *rowEncoder) append(buf []byte, row table.Row) ([]byte, error) {
	buf = append(buf, '{')
	for i, c := range e.cols {
		buf = append(buf, e.keys[i]...)
		switch v := row[c].(type) {
		case nil:
			buf = append(buf, "null"...)
		case int64:
			buf = strconv.AppendInt(buf, v, 10)
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				buf = append(buf, "null"...)
				break
			}
			buf = appendFloat(buf, v)
		case string:
			buf = appendString(buf, v)
		case bool:
			buf = strconv.AppendBool(buf, v)
		case time.Time:
			buf = append(buf, '"')
			buf = v.UTC().AppendFormat(buf, time.RFC3339Nano)
			buf = append(buf, '"')
		case json.RawMessage:
			buf = append(buf, v...)
		default:
			// Not a type table.Query returns today: encode it as
			// compute does any other value.
			one, err := compute.AppendJSONRow(nil, map[string]any{"v": v}, nil)
			if err != nil {
				return buf, err
			}
			buf = append(buf, one[len(`{"v":`):len(one)-1]...)
		}
	}
	return append(buf, '}'), nil
}

// appendFloat formats like encoding/json.
func appendFloat(buf []byte, f float64) []byte {
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
	return buf
}

const hex = "0123456789abcdef"

// appendString quotes s as encoding/json does (without HTML escaping).
func appendString(buf []byte, s string) []byte {
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
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			if r == utf8.RuneError {
				buf = append(buf, `\ufffd`...)
			} else {
				buf = append(buf, '\\', 'u', '2', '0', '2', hex[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
