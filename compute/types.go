package compute

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/coltype"
)

// Type is the type of a computed column: package coltype's Type, the one
// type system of schema and computed columns (coltype.Parse reads a name).
type Type = coltype.Type

// The column types (see coltype for their aliases).
const (
	Int32     = coltype.Int32
	Int64     = coltype.Int64
	Float64   = coltype.Float64
	String    = coltype.String
	Bool      = coltype.Bool
	Timestamp = coltype.Timestamp
	JSON      = coltype.JSON
	Date      = coltype.Date
	Bytes     = coltype.Bytes
	UUID      = coltype.UUID
	TimeOfDay = coltype.TimeOfDay
)

// ErrType is wrapped by every coercion error: the function returned a value
// the column's type does not accept.
var ErrType = errors.New("wrong result type")

// Coerce converts a function's result to the Go representation of type t:
// int32, int64, float64, string, bool, time.Time (UTC), json.RawMessage,
// []byte, or coltype's DateValue, TimeOfDayValue, UUIDValue, DecimalValue.
//
// A date, time of day, uuid or decimal column takes its text (2026-11-29,
// 13:45:00.5, a uuid's, 12.50) or its coltype value, a date also a time at
// midnight UTC, a decimal also a number (a float by its shortest text);
// one that would lose a digit is an error. A bytes column takes a string
// as its bytes (Lua strings are byte strings), and []byte.
//
// Numbers (any Go integer or float type, json.Number) go to int32, int64,
// float64 and timestamp (unix seconds; a fraction keeps nanoseconds); a
// float going to an integer type must be whole and in range. Strings go to
// string and json (which must then be valid JSON). Bools go to bool. json
// also takes []byte, json.RawMessage, maps and slices (encoded in Go), and
// timestamp also takes a time.Time. Anything else wraps ErrType. A nil v
// returns nil, nil: whether a nil result is allowed is the caller's policy.
func Coerce(v any, t Type) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t {
	case Int32, Int64, Float64, Timestamp:
		if t == Timestamp {
			if tm, ok := v.(time.Time); ok {
				return tm.UTC(), nil
			}
		}
		i, f, isInt, ok := number(v)
		if !ok {
			return nil, typeError(v, t)
		}
		switch t {
		case Float64:
			if isInt {
				return float64(i), nil
			}
			return f, nil
		case Timestamp:
			if isInt {
				return time.Unix(i, 0).UTC(), nil
			}
			sec, frac := math.Modf(f)
			if math.IsNaN(f) || sec > math.MaxInt64 || sec < math.MinInt64 {
				return nil, fmt.Errorf("%w: %v is not a unix time", ErrType, f)
			}
			return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
		}
		if !isInt {
			if f != math.Trunc(f) || f >= 1<<63 || f < -(1<<63) || math.IsNaN(f) {
				return nil, fmt.Errorf("%w: %v is not a whole number in range of %s", ErrType, f, t)
			}
			i = int64(f)
		}
		if t == Int32 {
			if i > math.MaxInt32 || i < math.MinInt32 {
				return nil, fmt.Errorf("%w: %d overflows int32", ErrType, i)
			}
			return int32(i), nil
		}
		return i, nil
	case String:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case JSON:
		switch x := v.(type) {
		case json.RawMessage:
			if !json.Valid(x) {
				return nil, fmt.Errorf("%w: invalid JSON %.64q", ErrType, x)
			}
			return x, nil
		case string:
			if !json.Valid([]byte(x)) {
				return nil, fmt.Errorf("%w: string is not valid JSON: %.64q", ErrType, x)
			}
			return json.RawMessage(x), nil
		case []byte:
			if !json.Valid(x) {
				return nil, fmt.Errorf("%w: bytes are not valid JSON: %.64q", ErrType, x)
			}
			return json.RawMessage(x), nil
		case map[string]any, []any:
			b, err := json.Marshal(x)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrType, err)
			}
			return json.RawMessage(b), nil
		}
	case Date:
		switch x := v.(type) {
		case coltype.DateValue:
			return x, nil
		case string:
			return parsed(coltype.ParseDate(x))
		case time.Time:
			if d := coltype.DateOf(x); d.Time().Equal(x) {
				return d, nil
			}
			return nil, fmt.Errorf("%w: time %v is not a whole day", ErrType, x)
		}
	case TimeOfDay:
		switch x := v.(type) {
		case coltype.TimeOfDayValue:
			return x, nil
		case string:
			return parsed(coltype.ParseTimeOfDay(x))
		}
	case UUID:
		switch x := v.(type) {
		case coltype.UUIDValue:
			return x, nil
		case string:
			return parsed(coltype.ParseUUID(x))
		}
	case Bytes:
		// A script's string is its bytes (Lua strings are byte strings):
		// taken as they are, not as base64.
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case []byte:
			return x, nil
		case coltype.BytesValue:
			return []byte(x), nil
		}
	}
	if t.IsDecimal() {
		var text string
		switch x := v.(type) {
		case coltype.DecimalValue:
			text = x.String()
		case string:
			text = x
		case json.Number:
			text = string(x)
		default:
			i, f, isInt, ok := number(v)
			switch {
			case !ok:
				return nil, typeError(v, t)
			case isInt:
				text = strconv.FormatInt(i, 10)
			default:
				text = strconv.FormatFloat(f, 'g', -1, 64)
			}
		}
		return parsed(coltype.ParseDecimal(text, t.Precision(), t.Scale()))
	}
	return nil, typeError(v, t)
}

// parsed is a coltype parser's value, its error wrapping ErrType.
func parsed[T any](v T, err error) (any, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrType, err)
	}
	return v, nil
}

func typeError(v any, t Type) error {
	return fmt.Errorf("%w: %T cannot be a %s column", ErrType, v, t)
}

// number reports v as an integer (isInt, i) or a float (f).
func number(v any) (i int64, f float64, isInt, ok bool) {
	switch x := v.(type) {
	case int:
		return int64(x), 0, true, true
	case int8:
		return int64(x), 0, true, true
	case int16:
		return int64(x), 0, true, true
	case int32:
		return int64(x), 0, true, true
	case int64:
		return x, 0, true, true
	case uint8:
		return int64(x), 0, true, true
	case uint16:
		return int64(x), 0, true, true
	case uint32:
		return int64(x), 0, true, true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, float64(x), false, true
		}
		return int64(x), 0, true, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, float64(x), false, true
		}
		return int64(x), 0, true, true
	case float32:
		return 0, float64(x), false, true
	case float64:
		return 0, x, false, true
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, 0, true, true
		}
		if fl, err := strconv.ParseFloat(string(x), 64); err == nil {
			return 0, fl, false, true
		}
	}
	return 0, 0, false, false
}
