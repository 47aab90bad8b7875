package table

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/coltype"
)

// Type is a column type: package coltype's Type, the one type system of
// schema and computed columns (coltype.Parse reads a name). A table stores
// every integer in 64 bits: an Int32 column is stored as Int64 (StoredType).
type Type = coltype.Type

// Column types. The Go representation of a value read back by Query is given
// for each.
const (
	Int64     = coltype.Int64     // int64
	Float64   = coltype.Float64   // float64
	String    = coltype.String    // string
	Bool      = coltype.Bool      // bool
	Timestamp = coltype.Timestamp // time.Time (UTC, nanosecond precision)
	JSON      = coltype.JSON      // json.RawMessage (any JSON text: objects, arrays)
	Date      = coltype.Date      // coltype.DateValue (days since 1970-01-01)
	Bytes     = coltype.Bytes     // []byte
	UUID      = coltype.UUID      // coltype.UUIDValue
	TimeOfDay = coltype.TimeOfDay // coltype.TimeOfDayValue (microseconds since midnight)
)

// A decimal(p,s) column (coltype.Decimal) reads back as coltype.DecimalValue.

// holdsText reports whether a column of type t keeps its values in value.s
// (and a block as their lengths then their bytes): String, JSON, Bytes (the
// raw bytes), UUID (its 16 bytes) and a wide decimal (wideDecimal's 16
// bytes). Int64, Timestamp, Date, TimeOfDay and decimals of up to 18 digits
// keep theirs in value.i (a decimal its unscaled value), Float64 its bits,
// Bool 0 or 1.
func holdsText(t Type) bool {
	switch t {
	case String, JSON, Bytes, UUID:
		return true
	}
	return t.IsWideDecimal()
}

// wideDecimal is the 16 bytes a table keeps for a value of a decimal of
// over 18 digits: the unscaled value's big-endian two's complement with
// its sign bit flipped, so that the bytes' order is the numbers' (a where
// clause compares them as it compares a uuid's, byte by byte).
func wideDecimal(d coltype.DecimalValue) string {
	b := d.AppendBigEndian(make([]byte, 0, 16), 16)
	b[0] ^= 0x80
	return string(b)
}

// wideDecimalValue is the value of wideDecimal's bytes s at scale.
func wideDecimalValue(s string, scale int) coltype.DecimalValue {
	var b [16]byte
	copy(b[:], s)
	b[0] ^= 0x80
	d, _ := coltype.DecimalOfBigEndian(b[:], scale)
	return d
}

// decimalOf is the decimal a decimal column of type t keeps as v.
func decimalOf(t Type, v value) coltype.DecimalValue {
	if t.IsWideDecimal() {
		return wideDecimalValue(v.s, t.Scale())
	}
	return coltype.DecimalValue{Unscaled: v.i, Scale: t.Scale()}
}

// StoredType returns the type a column declared as t is stored as: Int32
// becomes Int64, every other type is itself.
func StoredType(t Type) Type {
	if t == coltype.Int32 {
		return Int64
	}
	return t
}

// validType reports whether a table stores columns of type t: every type
// but Int32 (see StoredType). The numbers are written into blocks on disk.
func validType(t Type) bool { return t.Valid() && t != coltype.Int32 }

// Column is one column of a table schema.
type Column struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
}

// inferType returns the type a value of an inferred schema gets.
func inferType(v any) (Type, bool) {
	switch x := v.(type) {
	case int, int8, int16, int32, int64, uint8, uint16, uint32:
		return Int64, true
	case uint:
		return Int64, uint64(x) <= math.MaxInt64
	case uint64:
		return Int64, x <= math.MaxInt64
	case float32, float64:
		return Float64, true
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return Int64, true
		}
		if _, err := x.Float64(); err == nil {
			return Float64, true
		}
		return String, true
	case string:
		return String, true
	case []byte:
		return String, true
	case bool:
		return Bool, true
	case time.Time:
		return Timestamp, true
	case json.RawMessage, map[string]any, []any:
		return JSON, true
	case coltype.DateValue:
		return Date, true
	case coltype.TimeOfDayValue:
		return TimeOfDay, true
	case coltype.UUIDValue:
		return UUID, true
	case coltype.BytesValue:
		return Bytes, true
	case coltype.DecimalValue:
		// The most digits an int64 holds: a later value with more whole
		// digits still fits, and no precision change is needed until one
		// needs 128 bits (its column then widens to 38 digits), or its
		// schema says more than 18 (38 at once: a table whose types are
		// fixed by the first value would refuse a wider one later).
		if x.High != 0 || x.Precision > coltype.MaxNarrowDecimalPrecision || len(strconv.FormatUint(absInt(x.Unscaled), 10)) > coltype.MaxNarrowDecimalPrecision {
			return coltype.Decimal(coltype.MaxDecimalPrecision, x.Scale), true
		}
		return coltype.Decimal(coltype.MaxNarrowDecimalPrecision, x.Scale), true
	}
	return 0, false
}

// widen returns the type holding values of both a and b: int64 and float64
// give float64; decimals of one scale the larger precision; a date in a
// timestamp column is its midnight (what a registry date was before date
// columns); any other mix gives string.
func widen(a, b Type) Type {
	switch {
	case a == b:
		return a
	case (a == Int64 && b == Float64) || (a == Float64 && b == Int64):
		return Float64
	case a == Timestamp && b == Date:
		return Timestamp
	case a.IsDecimal() && b.IsDecimal() && a.Scale() == b.Scale():
		return coltype.Decimal(max(a.Precision(), b.Precision()), a.Scale())
	}
	return String
}

// widerDecimal is the type an inferred decimal column of type col, whose
// type is fixed (SetFixedTypes), widens to for v: decimal(38,s), its scale
// kept, when v needs more digits than col's precision at that scale and
// fits 38 of them exactly, or when v is a decimal whose schema declares
// more digits at the same scale (declaresWiderDecimal). Iceberg promotes
// decimal(P,S) to decimal(P',S) in place, so the cold tier follows. Going
// to 38 at once, not to the digits needed, makes it one promotion for the
// column's life. ok is false for any other column or value: a value whose
// fraction digits the scale would lose stays a mismatch, since neither the
// store nor Iceberg ever changes a decimal's scale.
func widerDecimal(col Type, v any) (wider Type, ok bool) {
	if !col.IsDecimal() || col.Precision() >= coltype.MaxDecimalPrecision {
		return col, false
	}
	wide := coltype.Decimal(coltype.MaxDecimalPrecision, col.Scale())
	if declaresWiderDecimal(col, v) {
		return wide, true
	}
	if _, err := coerce(v, col); err == nil {
		return col, false
	}
	if _, err := coerce(v, wide); err != nil {
		return col, false
	}
	return wide, true
}

// declaresWiderDecimal reports whether v is a decimal whose schema (a
// registry's Avro decimal(30,2)) declares more digits than the decimal
// column of type col has, at col's scale: the column widens on the first
// such value, however few digits it has, as a registry's new schema
// version says it should (inferType gives a first value of such a schema
// 38 digits for the same reason).
func declaresWiderDecimal(col Type, v any) bool {
	d, ok := v.(coltype.DecimalValue)
	return ok && d.Scale == col.Scale() && d.Precision > col.Precision()
}

// value is one typed value: the representation used by blocks and
// predicates. Only the field of the column's type is meaningful. A float64
// is kept as its bits in i (24 bytes a value, not 32: an Append of 1000
// 10-column rows holds 10 000 of them).
type value struct {
	i int64  // Int64, Timestamp (unix nanoseconds), Bool (0/1), Float64 (IEEE 754 bits)
	s string // String, JSON
}

func floatValue(f float64) value { return value{i: int64(math.Float64bits(f))} }

func (v value) float() float64 { return math.Float64frombits(uint64(v.i)) }

// errFit explains why a value does not fit a type.
type errFit struct{ msg string }

func (e errFit) Error() string { return e.msg }

func fitErr(format string, a ...any) error { return errFit{fmt.Sprintf(format, a...)} }

// trustedJSONKey is the context key of TrustJSON.
type trustedJSONKey struct{}

// TrustJSON returns a context under which Append and Appender.Add store the
// json.RawMessage values of the named json columns as they are, without
// checking that they are valid JSON. It is for a producer whose JSON is
// valid by construction: the RDB ingest's value column, written by
// rdbtool's own JSON writer, where encoding/json.Valid re-checking it was a
// quarter of the ingest's CPU (docs/rdb.md). Every other value is checked
// as usual: values of other columns, strings and []byte, and every append
// made without this context. JSON that is not valid, stored this way, is
// returned as it is by queries: use it only for JSON your own code wrote.
// The bytes of those values are also read in place, not copied (a 200 MB
// value is not held twice): they must not change until the append returns
// (until Commit, for an Appender).
func TrustJSON(ctx context.Context, columns ...string) context.Context {
	return context.WithValue(ctx, trustedJSONKey{}, slices.Clone(columns))
}

// trustedJSON is the columns TrustJSON named in ctx.
func trustedJSON(ctx context.Context) []string {
	cols, _ := ctx.Value(trustedJSONKey{}).([]string)
	return cols
}

// coerce converts v to type t. strict is false for inferred schemas (where
// widening already made the type hold the value) and for query values; it
// is true for static schemas, which also accept strings that parse as the
// type (CSV input).
func coerce(v any, t Type) (value, error) {
	switch t {
	case Int64:
		return coerceInt(v)
	case Float64:
		return coerceFloat(v)
	case String:
		return coerceString(v)
	case Bool:
		switch x := v.(type) {
		case bool:
			if x {
				return value{i: 1}, nil
			}
			return value{}, nil
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			if err != nil {
				return value{}, fitErr("%q is not a bool", x)
			}
			return coerce(b, Bool)
		}
		return value{}, fitErr("%T %v is not a bool", v, v)
	case Timestamp:
		ns, err := ParseTime(v)
		return value{i: ns}, err
	case JSON:
		switch x := v.(type) {
		case json.RawMessage:
			if !json.Valid(x) {
				return value{}, fitErr("invalid JSON %.40q", x)
			}
			return value{s: string(x)}, nil
		case string:
			if !json.Valid([]byte(x)) {
				return value{}, fitErr("string %.40q is not JSON", x)
			}
			return value{s: x}, nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return value{}, fitErr("%T is not encodable as JSON: %v", v, err)
		}
		return value{s: string(b)}, nil
	case Date:
		return coerceDate(v)
	case TimeOfDay:
		return coerceTimeOfDay(v)
	case UUID:
		return coerceUUID(v)
	case Bytes:
		return coerceBytes(v)
	}
	if t.IsDecimal() {
		return coerceDecimal(v, t)
	}
	return value{}, fitErr("unknown type %v", t)
}

// coerceDate takes a DateValue, an ISO 8601 date string, or a time at
// midnight UTC (a whole day: any other time would lose its hours).
func coerceDate(v any) (value, error) {
	switch x := v.(type) {
	case coltype.DateValue:
		return value{i: int64(x)}, nil
	case string:
		d, err := coltype.ParseDate(x)
		if err != nil {
			return value{}, fitErr("%v", err)
		}
		return value{i: int64(d)}, nil
	case time.Time:
		d := coltype.DateOf(x)
		if !d.Time().Equal(x) {
			return value{}, fitErr("time %v is not a whole day", x)
		}
		return value{i: int64(d)}, nil
	}
	return value{}, fitErr("%T %v is not a date", v, v)
}

// coerceTimeOfDay takes a TimeOfDayValue or HH:MM:SS[.ffffff] text.
func coerceTimeOfDay(v any) (value, error) {
	switch x := v.(type) {
	case coltype.TimeOfDayValue:
		if x < 0 || x >= coltype.MicrosPerDay {
			return value{}, fitErr("time of day %d µs is outside a day", int64(x))
		}
		return value{i: int64(x)}, nil
	case string:
		t, err := coltype.ParseTimeOfDay(x)
		if err != nil {
			return value{}, fitErr("%v", err)
		}
		return value{i: int64(t)}, nil
	}
	return value{}, fitErr("%T %v is not a time of day", v, v)
}

// coerceUUID takes a UUIDValue, a uuid's text, or its 16 bytes.
func coerceUUID(v any) (value, error) {
	switch x := v.(type) {
	case coltype.UUIDValue:
		return value{s: string(x[:])}, nil
	case string:
		u, err := coltype.ParseUUID(x)
		if err != nil {
			return value{}, fitErr("%v", err)
		}
		return value{s: string(u[:])}, nil
	case []byte:
		if len(x) == 16 {
			return value{s: string(x)}, nil
		}
	case coltype.BytesValue:
		if len(x) == 16 {
			return value{s: string(x)}, nil
		}
	}
	return value{}, fitErr("%T %.40v is not a uuid", v, v)
}

// coerceBytes takes bytes as they are, and a string as its base64 (what
// JSON, which has no bytes, carries them as).
func coerceBytes(v any) (value, error) {
	switch x := v.(type) {
	case []byte:
		return value{s: string(x)}, nil
	case coltype.BytesValue:
		return value{s: string(x)}, nil
	case string:
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(x))
		if err != nil {
			return value{}, fitErr("string %.40q is not base64", x)
		}
		return value{s: string(b)}, nil
	}
	return value{}, fitErr("%T %.40v is not bytes", v, v)
}

// coerceDecimal takes a DecimalValue, an integer, a float (its shortest
// decimal text: 0.1 is 0.1) or decimal text, refusing what would lose a
// digit or exceed the precision.
func coerceDecimal(v any, t Type) (value, error) {
	p, s := t.Precision(), t.Scale()
	var d coltype.DecimalValue
	var err error
	switch x := v.(type) {
	case coltype.DecimalValue:
		d, err = x.Rescale(p, s)
	case string:
		d, err = coltype.ParseDecimal(x, p, s)
	case json.Number:
		d, err = coltype.ParseDecimal(string(x), p, s)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return value{}, fitErr("%v is not a decimal", x)
		}
		d, err = coltype.ParseDecimal(strconv.FormatFloat(x, 'g', -1, 64), p, s)
	case float32:
		d, err = coltype.ParseDecimal(strconv.FormatFloat(float64(x), 'g', -1, 32), p, s)
	default:
		iv, ierr := coerceInt(v)
		if ierr != nil {
			return value{}, fitErr("%T %v is not a decimal", v, v)
		}
		d, err = coltype.ParseDecimal(strconv.FormatInt(iv.i, 10), p, s)
	}
	if err != nil {
		return value{}, fitErr("%v", err)
	}
	if t.IsWideDecimal() {
		return value{s: wideDecimal(d)}, nil
	}
	return value{i: d.Unscaled}, nil
}

// absInt is |i| (MinInt64's too).
func absInt(i int64) uint64 {
	if i < 0 {
		return uint64(-(i + 1)) + 1
	}
	return uint64(i)
}

func coerceInt(v any) (value, error) {
	switch x := v.(type) {
	case int:
		return value{i: int64(x)}, nil
	case int8:
		return value{i: int64(x)}, nil
	case int16:
		return value{i: int64(x)}, nil
	case int32:
		return value{i: int64(x)}, nil
	case int64:
		return value{i: x}, nil
	case uint8:
		return value{i: int64(x)}, nil
	case uint16:
		return value{i: int64(x)}, nil
	case uint32:
		return value{i: int64(x)}, nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return value{}, fitErr("%d overflows int64", x)
		}
		return value{i: int64(x)}, nil
	case uint64:
		if x > math.MaxInt64 {
			return value{}, fitErr("%d overflows int64", x)
		}
		return value{i: int64(x)}, nil
	case float32:
		return coerceInt(float64(x))
	case float64:
		if x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 {
			return value{}, fitErr("%v is not a whole int64", x)
		}
		return value{i: int64(x)}, nil
	case json.Number:
		return coerceInt(string(x))
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return value{}, fitErr("%.40q is not an int64", x)
		}
		return value{i: i}, nil
	}
	return value{}, fitErr("%T %v is not an int64", v, v)
}

func coerceFloat(v any) (value, error) {
	switch x := v.(type) {
	case float64:
		return floatValue(x), nil
	case float32:
		return floatValue(float64(x)), nil
	case json.Number:
		return coerceFloat(string(x))
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return value{}, fitErr("%.40q is not a float64", x)
		}
		return floatValue(f), nil
	}
	iv, err := coerceInt(v)
	if err != nil {
		return value{}, fitErr("%T %v is not a float64", v, v)
	}
	return intToFloat(iv.i)
}

// intToFloat is i as a float64 when that is exactly i: past 2^53 a float64
// skips integers, and storing the nearest one would change the value.
func intToFloat(i int64) (value, error) {
	f := float64(i)
	if f >= 1<<63 || int64(f) != i {
		return value{}, fitErr("%d is not exact as a float64", i)
	}
	return floatValue(f), nil
}

// coerceString gives the text of any scalar: this is also how values of a
// column widened to string read back, and how partition values are hashed,
// so int64 5, float64 5 and string "5" are the same partition.
func coerceString(v any) (value, error) {
	switch x := v.(type) {
	case string:
		return value{s: x}, nil
	case []byte:
		return value{s: string(x)}, nil
	case json.Number:
		return value{s: string(x)}, nil
	case bool:
		return value{s: strconv.FormatBool(x)}, nil
	case float64:
		return value{s: formatFloat(x)}, nil
	case float32:
		return value{s: formatFloat(float64(x))}, nil
	case time.Time:
		return value{s: x.UTC().Format(time.RFC3339Nano)}, nil
	case json.RawMessage:
		return value{s: string(x)}, nil
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return value{}, fitErr("%T is not encodable as JSON: %v", v, err)
		}
		return value{s: string(b)}, nil
	case coltype.BytesValue:
		// A registry's bytes in a string column: base64, as such columns
		// held them before bytes columns.
		return value{s: base64.StdEncoding.EncodeToString(x)}, nil
	case fmt.Stringer:
		// A date, time of day, uuid or decimal: its text, as string
		// columns held them before these types.
		return value{s: x.String()}, nil
	}
	iv, err := coerceInt(v)
	if err != nil {
		return value{}, fitErr("%T %v is not a string", v, v)
	}
	return value{s: strconv.FormatInt(iv.i, 10)}, nil
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ParseTime converts an event-time value to unix nanoseconds (UTC):
//
//   - time.Time as is;
//   - a string in RFC 3339 (with or without fractional seconds), or a
//     string holding a number, read as a number;
//   - a number n is unix time whose unit is guessed from its magnitude:
//     |n| < 1e11 seconds, < 1e14 milliseconds, < 1e17 microseconds, else
//     nanoseconds (1e11 s is the year 5138; 1e11 ms is 1973). A fraction of
//     seconds or milliseconds is kept.
func ParseTime(v any) (int64, error) {
	switch x := v.(type) {
	case time.Time:
		return timeNanos(x)
	case coltype.DateValue:
		return timeNanos(x.Time())
	case string:
		return parseTimeString(x)
	case json.Number:
		return ParseTime(string(x))
	case float64:
		return unixGuessFloat(x)
	case float32:
		return unixGuessFloat(float64(x))
	}
	iv, err := coerceInt(v)
	if err != nil {
		return 0, fitErr("%T %v is not a time", v, v)
	}
	return unixGuess(iv.i)
}

// timeNanos is ParseTime of a time.Time.
func timeNanos(x time.Time) (int64, error) {
	if y := x.Year(); y < 1678 || y > 2261 {
		return 0, fitErr("time %v is out of the int64 nanosecond range", x)
	}
	return x.UnixNano(), nil
}

// parseTimeString is ParseTime of a string.
func parseTimeString(x string) (int64, error) {
	if ns, ok := parseUTCTime(x); ok {
		return ns, nil
	}
	s := strings.TrimSpace(x)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return timeNanos(t)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return unixGuess(i)
		}
		return unixGuessFloat(f)
	}
	return 0, fitErr("%.40q is neither RFC 3339 nor a unix time", x)
}

// parseUTCTime reads the common form of an event time,
// YYYY-MM-DDTHH:MM:SS[.fraction]Z, as time.Parse(time.RFC3339Nano) and
// timeNanos would, without their generality (time.Parse was a sixth of
// the conversion of a row to columns). ok is false for anything else
// (offsets, spaces, out-of-range fields, years outside int64 nanoseconds),
// which the caller then parses as before.
func parseUTCTime(s string) (ns int64, ok bool) {
	if len(s) < 20 || len(s) > 30 || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	num := func(i, n int) int {
		v := 0
		for k := i; k < i+n; k++ {
			c := s[k] - '0'
			if c > 9 {
				return -1
			}
			v = v*10 + int(c)
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if year < 1678 || year > 2261 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 ||
		minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return 0, false
	}
	if day > daysIn(time.Month(month), year) {
		return 0, false
	}
	nanos := 0
	if frac := s[19 : len(s)-1]; frac != "" {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return 0, false
		}
		digits := frac[1:]
		if nanos = num(20, len(digits)); nanos < 0 {
			return 0, false
		}
		nanos *= int(pow10[9-len(digits)])
	}
	secs := (daysSinceEpoch(year, month, day)*24+int64(hour))*3600 + int64(minute)*60 + int64(sec)
	return secs*1e9 + int64(nanos), true
}

// pow10[i] is 10^i.
var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// daysSinceEpoch is the number of days from 1970-01-01 to the proleptic
// Gregorian date year-month-day (valid, year > 0), by arithmetic rather
// than time.Date (a third of parseUTCTime): whole 400-year eras of 146 097
// days, the year counted from March so that February's leap day is last.
func daysSinceEpoch(year, month, day int) int64 {
	if month <= 2 {
		year--
	}
	era := year / 400
	yoe := year - era*400                          // [0, 399]
	doy := (153*((month+9)%12)+2)/5 + day - 1      // [0, 365], from March 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy         // [0, 146096]
	return int64(era)*146097 + int64(doe) - 719468 // 719468: 0000-03-01 to 1970-01-01
}

// daysIn is the number of days of month in year.
func daysIn(month time.Month, year int) int {
	if month == time.February && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return int([...]uint8{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month-1])
}

func abs64(i int64) int64 {
	if i < 0 {
		return -i
	}
	return i
}

// unixGuess converts unix time i to nanoseconds, guessing its unit from
// its magnitude (see ParseTime). A value whose nanoseconds do not fit an
// int64 (before 1677-09-21 or after 2262-04-11) is an error: multiplying
// it would wrap to a wrong date silently.
func unixGuess(i int64) (int64, error) {
	var mult int64
	switch a := abs64(i); {
	case a < 1e11:
		mult = 1e9
	case a < 1e14:
		mult = 1e6
	case a < 1e17:
		mult = 1e3
	default:
		return i, nil
	}
	if i > math.MaxInt64/mult || i < math.MinInt64/mult {
		return 0, fitErr("unix time %d is out of range (it must fall between 1677-09-21 and 2262-04-11)", i)
	}
	return i * mult, nil
}

func unixGuessFloat(f float64) (int64, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fitErr("%v is not a time", f)
	}
	var ns float64
	switch a := math.Abs(f); {
	case a < 1e11:
		ns = f * 1e9
	case a < 1e14:
		ns = f * 1e6
	case a < 1e17:
		ns = f * 1e3
	default:
		ns = f
	}
	if ns < -(1<<63) || ns >= 1<<63 {
		return 0, fitErr("unix time %v is out of range (it must fall between 1677-09-21 and 2262-04-11)", f)
	}
	return int64(math.Round(ns)), nil
}
