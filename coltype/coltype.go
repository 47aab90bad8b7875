// Package coltype is the one type system of sluice's columns: the type
// names a config may give a schema column or a computed column, their
// aliases, and the one parser of them. Package compute coerces a
// function's result to a Type and package table stores columns of a Type;
// both re-export this Type (compute.Type and table.Type are aliases of it),
// so a name parses the same way everywhere. It also holds the Go values of
// the types Go has no value for (a date, a time of day, a uuid, a decimal),
// which every package that reads or writes such a column shares.
//
// coltype imports nothing of sluice: it sits below compute and table.
package coltype

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Type is a column type. The zero Type is invalid.
//
// Its low byte is the kind, the number written into table blocks on disk
// (one byte a column): never renumber the kinds; a new kind takes the next
// number. A Decimal also carries its precision (bits 8–15) and scale (bits
// 16–23), which a block writes in two bytes after the kind: the kind stays
// one byte, so a block written before decimals existed reads as it did.
type Type uint32

// The column types; Parse's aliases (Talaria's names) are given for each.
const (
	Int64       Type = iota + 1 // int64, bigint, long, uint64
	Float64                     // float64, double
	String                      // string, text, varchar
	Bool                        // bool, boolean
	Timestamp                   // timestamp, time
	JSON                        // json, map
	Int32                       // int32, integer, uint32 (tables store it as Int64)
	Date                        // date: a calendar day, no zone (DateValue)
	Bytes                       // bytes, binary: raw bytes ([]byte)
	UUID                        // uuid: 16 bytes (UUIDValue)
	TimeOfDay                   // time_of_day, timeofday: microseconds since midnight, no zone (TimeOfDayValue)
	DecimalKind                 // decimal(p,s): the kind of every Decimal(p, s) (DecimalValue); alone, no type
)

// MaxDecimalPrecision is the most digits a decimal column holds: Iceberg's
// (and Arrow's decimal128's) maximum, whose unscaled values fit 128 bits.
const MaxDecimalPrecision = 38

// MaxNarrowDecimalPrecision is the most digits whose unscaled value always
// fits an int64. A table keeps such a decimal in 64 bits, as it did before
// wider decimals; a wider one (IsWideDecimal) in 16 bytes.
const MaxNarrowDecimalPrecision = 18

// Decimal is the type decimal(precision, scale): precision digits, scale of
// them after the point. It does not check its arguments; Parse and
// CheckDecimal do.
func Decimal(precision, scale int) Type {
	return DecimalKind | Type(uint8(precision))<<8 | Type(uint8(scale))<<16
}

// ErrDecimal is wrapped by the error of a decimal's precision or scale out
// of range.
var ErrDecimal = errors.New("decimal precision or scale out of range")

// CheckDecimal reports whether decimal(precision, scale) is a type a column
// may have: 1 ≤ precision ≤ MaxDecimalPrecision, 0 ≤ scale ≤ precision.
func CheckDecimal(precision, scale int) error {
	if precision < 1 || precision > MaxDecimalPrecision || scale < 0 || scale > precision {
		return fmt.Errorf("%w: decimal(%d,%d) (want 1 ≤ precision ≤ %d and 0 ≤ scale ≤ precision)", ErrDecimal, precision, scale, MaxDecimalPrecision)
	}
	return nil
}

// Kind is t without a decimal's precision and scale: the number a block
// holds.
func (t Type) Kind() Type { return t & 0xff }

// IsDecimal reports whether t is a decimal(p,s).
func (t Type) IsDecimal() bool { return t.Kind() == DecimalKind }

// IsWideDecimal reports whether t is a decimal whose unscaled values need
// more than 64 bits: precision over MaxNarrowDecimalPrecision.
func (t Type) IsWideDecimal() bool { return t.IsDecimal() && t.Precision() > MaxNarrowDecimalPrecision }

// Precision is a decimal's precision (0 for other types).
func (t Type) Precision() int {
	if !t.IsDecimal() {
		return 0
	}
	return int(uint8(t >> 8))
}

// Scale is a decimal's scale (0 for other types).
func (t Type) Scale() int {
	if !t.IsDecimal() {
		return 0
	}
	return int(uint8(t >> 16))
}

// ErrUnknown is wrapped by Parse's error for a name that is no type.
var ErrUnknown = errors.New("unknown type")

// names maps every accepted spelling (lower case) to its type. "int" and
// "float" are not among them: whether they mean 32 or 64 bits is a guess.
// "time" stays Talaria's alias of timestamp (configs written for it mean
// an instant); a time of day is "time_of_day", which says what it holds.
var names = map[string]Type{
	"int32": Int32, "integer": Int32, "uint32": Int32,
	"int64": Int64, "bigint": Int64, "long": Int64, "uint64": Int64,
	"float64": Float64, "double": Float64,
	"string": String, "text": String, "varchar": String,
	"bool": Bool, "boolean": Bool,
	"timestamp": Timestamp, "time": Timestamp,
	"json": JSON, "map": JSON,
	"date":  Date,
	"bytes": Bytes, "binary": Bytes,
	"uuid":        UUID,
	"time_of_day": TimeOfDay, "timeofday": TimeOfDay,
}

// Parse returns the Type named name or one of its aliases
// (case-insensitive, surrounding spaces ignored), or decimal(p,s). Its
// error wraps ErrUnknown (or ErrDecimal) and quotes name; the caller adds
// which column it was.
func Parse(name string) (Type, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if t, ok := names[n]; ok {
		return t, nil
	}
	if rest, ok := strings.CutPrefix(n, "decimal"); ok {
		return parseDecimal(name, rest)
	}
	return 0, fmt.Errorf("%w %q (want int32, int64, float64, string, bool, timestamp, json, date, bytes, uuid, time_of_day, decimal(p,s) or an alias: integer, uint32, bigint, long, uint64, double, text, varchar, boolean, time, map, binary, timeofday)", ErrUnknown, name)
}

// parseDecimal reads rest, what follows "decimal": "(p,s)" or "(p)" (scale
// 0, as SQL's DECIMAL(p)).
func parseDecimal(name, rest string) (Type, error) {
	rest = strings.TrimSpace(rest)
	inner, ok := strings.CutPrefix(rest, "(")
	if inner, ok2 := strings.CutSuffix(inner, ")"); ok && ok2 {
		ps, ss, hasScale := strings.Cut(inner, ",")
		p, err := strconv.Atoi(strings.TrimSpace(ps))
		s := 0
		if err == nil && hasScale {
			s, err = strconv.Atoi(strings.TrimSpace(ss))
		}
		if err == nil {
			if err := CheckDecimal(p, s); err != nil {
				return 0, fmt.Errorf("type %q: %w", name, err)
			}
			return Decimal(p, s), nil
		}
	}
	return 0, fmt.Errorf("%w %q (a decimal is decimal(precision, scale), e.g. decimal(10,2))", ErrUnknown, name)
}

// Valid reports whether t is one of the types.
func (t Type) Valid() bool {
	if t.IsDecimal() {
		return t>>24 == 0 && CheckDecimal(t.Precision(), t.Scale()) == nil
	}
	return t >= Int64 && t <= TimeOfDay
}

// String returns the canonical name of t.
func (t Type) String() string {
	switch t {
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Float64:
		return "float64"
	case String:
		return "string"
	case Bool:
		return "bool"
	case Timestamp:
		return "timestamp"
	case JSON:
		return "json"
	case Date:
		return "date"
	case Bytes:
		return "bytes"
	case UUID:
		return "uuid"
	case TimeOfDay:
		return "time_of_day"
	}
	if t.IsDecimal() {
		return fmt.Sprintf("decimal(%d,%d)", t.Precision(), t.Scale())
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// MarshalText writes the canonical name (persisted table schemas, the
// describe endpoints).
func (t Type) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses a name as Parse does.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
