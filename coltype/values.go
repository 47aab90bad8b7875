package coltype

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
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

// DecimalValue is a value of a decimal(p,s) column: its unscaled value ×
// 10^-Scale. The unscaled value is High × 2^64 + Unscaled, Unscaled signed:
// High is zero whenever the unscaled value fits an int64 (always, up to 18
// digits), so DecimalValue{Unscaled: -5, Scale: 2} is -0.05 as it was
// before decimals of up to 38 digits, which need 128 bits. The values
// DecimalOfBig and the parsers return are canonical (High zero exactly when
// the value fits an int64), so == compares two values of one scale and
// precision.
type DecimalValue struct {
	Unscaled int64
	Scale    int
	High     int64
	// Precision is the precision of the schema that typed the value (a
	// registry's decimal(30,2)), 0 when none did: a column inferred from
	// the value holds 38 digits when it is over 18, so that a table whose
	// column type is fixed by its first value takes the schema's larger
	// values too. It is not part of the value: a query returns 0.
	Precision int
}

// Int128 is the unscaled value as a 128-bit two's complement integer, hi
// its upper and lo its lower 64 bits (Arrow's decimal128.Num's halves).
func (d DecimalValue) Int128() (hi int64, lo uint64) {
	if d.Unscaled < 0 {
		return d.High - 1, uint64(d.Unscaled)
	}
	return d.High, uint64(d.Unscaled)
}

// DecimalOfInt128 is the decimal whose unscaled value is the 128-bit two's
// complement integer hi:lo.
func DecimalOfInt128(hi int64, lo uint64, scale int) DecimalValue {
	if int64(lo) < 0 {
		// lo is int64(lo) + 2^64: one more 2^64 in the upper part. No
		// overflow for a decimal: 38 digits are under 2^127 - 2^63.
		hi++
	}
	return DecimalValue{Unscaled: int64(lo), Scale: scale, High: hi}
}

// AppendBigEndian appends the unscaled value's n-byte big-endian two's
// complement (Parquet's and Avro's fixed decimals); n is at most 16 and
// large enough for the value (the caller's precision says so).
func (d DecimalValue) AppendBigEndian(b []byte, n int) []byte {
	hi, lo := d.Int128()
	var full [16]byte
	binary.BigEndian.PutUint64(full[:8], uint64(hi))
	binary.BigEndian.PutUint64(full[8:], lo)
	return append(b, full[16-n:]...)
}

// DecimalOfBigEndian is the decimal whose unscaled value is b, a big-endian
// two's complement integer of at most 16 bytes (Parquet's and Avro's
// fixed and bytes decimals); ok is false for a longer b.
func DecimalOfBigEndian(b []byte, scale int) (DecimalValue, bool) {
	if len(b) > 16 {
		return DecimalValue{}, false
	}
	var full [16]byte
	if len(b) > 0 && b[0]&0x80 != 0 {
		for i := range full {
			full[i] = 0xff // sign-extend
		}
	}
	copy(full[16-len(b):], b)
	return DecimalOfInt128(int64(binary.BigEndian.Uint64(full[:8])), binary.BigEndian.Uint64(full[8:]), scale), true
}

// Big is the unscaled value.
func (d DecimalValue) Big() *big.Int {
	if d.High == 0 {
		return big.NewInt(d.Unscaled)
	}
	u := big.NewInt(d.High)
	u.Lsh(u, 64)
	return u.Add(u, big.NewInt(d.Unscaled))
}

// two64 and int128 bounds, for DecimalOfBig.
var (
	two64     = new(big.Int).Lsh(big.NewInt(1), 64)
	minInt128 = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 127))
	maxInt128 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1))
)

// DecimalOfBig is the decimal whose unscaled value is u; ok is false when
// u does not fit 128 bits.
func DecimalOfBig(u *big.Int, scale int) (DecimalValue, bool) {
	if u.IsInt64() {
		return DecimalValue{Unscaled: u.Int64(), Scale: scale}, true
	}
	if u.Cmp(minInt128) < 0 || u.Cmp(maxInt128) > 0 {
		return DecimalValue{}, false
	}
	// u = hi × 2^64 + lo with lo in [0, 2^64): Euclidean division.
	hi, lo := new(big.Int).DivMod(u, two64, new(big.Int))
	return DecimalOfInt128(hi.Int64(), lo.Uint64(), scale), true
}

// digits is the unscaled value's decimal digits, without sign.
func (d DecimalValue) digits() string {
	if d.High == 0 {
		return strconv.FormatUint(absUint(d.Unscaled), 10)
	}
	return new(big.Int).Abs(d.Big()).String()
}

// String is the exact decimal text, with Scale digits after the point
// (12.50 for 1250 at scale 2).
func (d DecimalValue) String() string {
	neg := d.High < 0 || (d.High == 0 && d.Unscaled < 0)
	digits := d.digits()
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
// precision digits in all, would change the value, and are an error (a
// value is refused, never rounded).
func ParseDecimal(s string, precision, scale int) (DecimalValue, error) {
	text := strings.TrimSpace(s)
	bad := func(why string) (DecimalValue, error) {
		return DecimalValue{}, fmt.Errorf("%w: %.50q is not a decimal(%d,%d): %s", ErrValue, s, precision, scale, why)
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
		if len(digits)+shift > precision {
			return bad(fmt.Sprintf("more than %d digits", precision))
		}
		digits += strings.Repeat("0", shift)
	}
	if len(digits) > precision || len(digits) > MaxDecimalPrecision {
		return bad(fmt.Sprintf("more than %d digits", min(precision, MaxDecimalPrecision)))
	}
	if len(digits) <= MaxNarrowDecimalPrecision {
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
	u, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return bad("not a number")
	}
	if neg {
		u.Neg(u)
	}
	d, ok := DecimalOfBig(u, scale)
	if !ok {
		return bad("out of range")
	}
	return d, nil
}

// Rescale is d at scale (precision digits at most); an error when digits
// would be lost or it does not fit.
func (d DecimalValue) Rescale(precision, scale int) (DecimalValue, error) {
	if d.Scale == scale {
		if len(d.digits()) > precision && (d.Unscaled != 0 || d.High != 0) {
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
