package coltype

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrValue is wrapped by the parsers' errors: the text is not a value of
// the type.
var ErrValue = errors.New("not a value of the type")

// DateValue is a value of a Date column: days since 1970-01-01 (Iceberg's
// and Arrow's date32).
type DateValue int32

// DateOf is the day of t in UTC.
func DateOf(t time.Time) DateValue {
	return DateValue(floorDiv(t.Unix(), 86400))
}

// Time is the start of the day (UTC).
func (d DateValue) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String is the ISO 8601 date, 2026-11-29.
func (d DateValue) String() string { return d.Time().Format(time.DateOnly) }

// MarshalJSON is the date as a JSON string.
func (d DateValue) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// ParseDate reads an ISO 8601 date (2026-11-29).
func ParseDate(s string) (DateValue, error) {
	t, err := time.Parse(time.DateOnly, strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%w: %.40q is not a date (want YYYY-MM-DD)", ErrValue, s)
	}
	days := floorDiv(t.Unix(), 86400)
	if days < math.MinInt32 || days > math.MaxInt32 {
		return 0, fmt.Errorf("%w: date %q is out of range", ErrValue, s)
	}
	return DateValue(days), nil
}

// TimeOfDayValue is a value of a TimeOfDay column: microseconds since
// midnight, [0, 86 400 000 000) (Iceberg's time, Arrow's time64[us]).
type TimeOfDayValue int64

// MicrosPerDay is the number of microseconds of a day: one past the
// largest TimeOfDayValue.
const MicrosPerDay = 86_400_000_000

// String is HH:MM:SS.ffffff (13:45:00.000123): always six digits of
// fraction, so the texts sort as the times do, and the text a string
// column held for a registry's time of day before time_of_day columns.
func (t TimeOfDayValue) String() string {
	us := int64(t)
	return fmt.Sprintf("%02d:%02d:%02d.%06d", us/3_600_000_000, us/60_000_000%60, us/1_000_000%60, us%1_000_000)
}

// MarshalJSON is the time of day as a JSON string.
func (t TimeOfDayValue) MarshalJSON() ([]byte, error) { return []byte(`"` + t.String() + `"`), nil }

// ParseTimeOfDay reads HH:MM[:SS[.fraction]] (up to 6 digits of fraction:
// the type holds microseconds, more would be lost).
func ParseTimeOfDay(s string) (TimeOfDayValue, error) {
	bad := fmt.Errorf("%w: %.40q is not a time of day (want HH:MM:SS[.ffffff])", ErrValue, s)
	text := strings.TrimSpace(s)
	main, frac, hasFrac := strings.Cut(text, ".")
	parts := strings.Split(main, ":")
	if len(parts) < 2 || len(parts) > 3 || (hasFrac && len(parts) != 3) {
		return 0, bad
	}
	limits := []int64{23, 59, 59}
	var us int64
	for i, p := range parts {
		if len(p) != 2 {
			return 0, bad
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 || n > limits[i] {
			return 0, bad
		}
		us += n * []int64{3_600_000_000, 60_000_000, 1_000_000}[i]
	}
	if hasFrac {
		if frac == "" || len(frac) > 6 {
			return 0, bad
		}
		n, err := strconv.ParseUint(frac, 10, 64)
		if err != nil {
			return 0, bad
		}
		for range 6 - len(frac) {
			n *= 10
		}
		us += int64(n)
	}
	return TimeOfDayValue(us), nil
}

// UUIDValue is a value of a UUID column: its 16 bytes.
type UUIDValue [16]byte

// String is the canonical text, 8-4-4-4-12 lower-case hex digits.
func (u UUIDValue) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// MarshalJSON is the uuid as a JSON string.
func (u UUIDValue) MarshalJSON() ([]byte, error) { return []byte(`"` + u.String() + `"`), nil }

// ParseUUID reads a uuid's canonical text (either case), with or without
// braces or the urn:uuid: prefix, or its 32 hex digits alone.
func ParseUUID(s string) (UUIDValue, error) {
	var u UUIDValue
	text := strings.TrimSpace(s)
	text = strings.TrimPrefix(strings.TrimPrefix(text, "urn:uuid:"), "{")
	text = strings.TrimSuffix(text, "}")
	if len(text) == 36 {
		if text[8] != '-' || text[13] != '-' || text[18] != '-' || text[23] != '-' {
			return u, fmt.Errorf("%w: %.40q is not a uuid", ErrValue, s)
		}
		text = text[0:8] + text[9:13] + text[14:18] + text[19:23] + text[24:]
	}
	if len(text) != 32 {
		return u, fmt.Errorf("%w: %.40q is not a uuid", ErrValue, s)
	}
	if _, err := hex.Decode(u[:], []byte(text)); err != nil {
		return u, fmt.Errorf("%w: %.40q is not a uuid", ErrValue, s)
	}
	return u, nil
}

// BytesValue is raw bytes a schema'd decoder read (an Avro bytes or fixed
// field). A Bytes column stores them as they are; a string column (one
// created before bytes columns, or declared string) keeps them as their
// base64 text, as such columns always held them. Queries return a Bytes
// column's values as []byte.
type BytesValue []byte

// DecimalValue is a value of a decimal(p,s) column: Unscaled × 10^-Scale.
type DecimalValue struct {
	Unscaled int64
	Scale    int
}

// String is the exact decimal text, with Scale digits after the point
// (12.50 for 1250 at scale 2).
func (d DecimalValue) String() string {
	neg := d.Unscaled < 0
	digits := strconv.FormatUint(absUint(d.Unscaled), 10)
	if d.Scale > 0 {
		if len(digits) <= d.Scale {
			digits = strings.Repeat("0", d.Scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-d.Scale] + "." + digits[len(digits)-d.Scale:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// MarshalJSON is the decimal as a JSON number, exactly (a reader that
// parses JSON numbers as decimals loses nothing).
func (d DecimalValue) MarshalJSON() ([]byte, error) { return []byte(d.String()), nil }

// ParseDecimal reads decimal text (optional sign, digits, optional point
// and digits, optional exponent) as a value of decimal(precision, scale):
// more fraction digits than scale that are not zeros, or more than
// precision digits in all, would change the value, and are an error.
func ParseDecimal(s string, precision, scale int) (DecimalValue, error) {
	text := strings.TrimSpace(s)
	bad := func(why string) (DecimalValue, error) {
		return DecimalValue{}, fmt.Errorf("%w: %.40q is not a decimal(%d,%d): %s", ErrValue, s, precision, scale, why)
	}
	mant, exp := text, 0
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		e, err := strconv.Atoi(text[i+1:])
		if err != nil || e > 400 || e < -400 {
			return bad("bad exponent")
		}
		mant, exp = text[:i], e
	}
	neg := false
	switch {
	case strings.HasPrefix(mant, "-"):
		neg, mant = true, mant[1:]
	case strings.HasPrefix(mant, "+"):
		mant = mant[1:]
	}
	whole, frac, _ := strings.Cut(mant, ".")
	if whole == "" && frac == "" {
		return bad("no digits")
	}
	digits := whole + frac
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return bad("not a number")
		}
	}
	// digits × 10^(exp - len(frac)) = unscaled × 10^-scale.
	shift := exp - len(frac) + scale
	if shift < 0 {
		cut := min(-shift, len(digits))
		if strings.Trim(digits[len(digits)-cut:], "0") != "" {
			return bad(fmt.Sprintf("more than %d digits after the point", scale))
		}
		digits, shift = digits[:len(digits)-cut], 0
	}
	digits = strings.TrimLeft(digits, "0")
	if digits != "" {
		digits += strings.Repeat("0", shift)
	}
	if len(digits) > precision {
		return bad(fmt.Sprintf("more than %d digits", precision))
	}
	var u int64
	if digits != "" {
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return bad("out of range")
		}
		u = n
	}
	if neg {
		u = -u
	}
	return DecimalValue{Unscaled: u, Scale: scale}, nil
}

// Rescale is d at scale (precision digits at most); an error when digits
// would be lost or it does not fit.
func (d DecimalValue) Rescale(precision, scale int) (DecimalValue, error) {
	if d.Scale == scale {
		if len(strconv.FormatUint(absUint(d.Unscaled), 10)) > precision && d.Unscaled != 0 {
			return DecimalValue{}, fmt.Errorf("%w: %s has more than %d digits", ErrValue, d, precision)
		}
		return d, nil
	}
	return ParseDecimal(d.String(), precision, scale)
}

func absUint(i int64) uint64 {
	if i < 0 {
		return uint64(-(i + 1)) + 1
	}
	return uint64(i)
}

// floorDiv is a/b rounded towards minus infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
