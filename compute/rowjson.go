package compute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/sluicedb/sluice/internal/jsonw"
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
