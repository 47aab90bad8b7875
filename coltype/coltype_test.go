package coltype

import (
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

// TestParse covers every spelling a config accepts today (compute's names,
// which config validation has always used) and the ones it rejects.
func TestParse(t *testing.T) {
	f := func(name string, want Type) {
		t.Helper()
		got, err := Parse(name)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	f("int32", Int32)
	f("integer", Int32)
	f("uint32", Int32)
	f("int64", Int64)
	f("bigint", Int64)
	f("long", Int64)
	f("uint64", Int64)
	f("float64", Float64)
	f("double", Float64)
	f("string", String)
	f("text", String)
	f("VARCHAR", String)
	f(" varchar ", String)
	f("bool", Bool)
	f("boolean", Bool)
	f("timestamp", Timestamp)
	f("time", Timestamp)
	f("json", JSON)
	f("map", JSON)
	for _, bad := range []string{"", "int", "float", "struct", "jsonb"} {
		_, err := Parse(bad)
		if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("Parse(%q) = %v; want ErrUnknown naming it", bad, err)
		}
	}
}

// TestTextRoundTrip: every type's name parses back to it, and the numbers
// table blocks store on disk have not moved.
func TestTextRoundTrip(t *testing.T) {
	all := []Type{Decimal(1, 0), Decimal(10, 2), Decimal(18, 18), Decimal(19, 2), Decimal(38, 10)}
	for ty := Int64; ty <= TimeOfDay; ty++ {
		all = append(all, ty)
	}
	for _, ty := range all {
		if !ty.Valid() {
			t.Errorf("%v is not valid", ty)
		}
		b, _ := ty.MarshalText()
		var back Type
		if err := back.UnmarshalText(b); err != nil || back != ty {
			t.Errorf("%v: round trip gave %v, %v", ty, back, err)
		}
	}
	for _, bad := range []Type{0, TimeOfDay + 1, DecimalKind, Decimal(39, 2), Decimal(5, 6), Decimal(0, 0)} {
		if bad.Valid() {
			t.Errorf("%v is valid", bad)
		}
	}
	onDisk := map[Type]uint8{Int64: 1, Float64: 2, String: 3, Bool: 4, Timestamp: 5, JSON: 6,
		Int32: 7, Date: 8, Bytes: 9, UUID: 10, TimeOfDay: 11, Decimal(10, 2).Kind(): 12}
	for ty, n := range onDisk {
		if uint8(ty) != n {
			t.Errorf("%v is %d; table blocks on disk store it as %d", ty, uint8(ty), n)
		}
	}
}

// TestParseNewTypes: the names of the types beyond Talaria's, decimals with
// their precision and scale, and "time" still a timestamp.
func TestParseNewTypes(t *testing.T) {
	for name, want := range map[string]Type{
		"date": Date, "bytes": Bytes, "BINARY": Bytes, "uuid": UUID, "time_of_day": TimeOfDay,
		"time": Timestamp, "decimal(10,2)": Decimal(10, 2), " Decimal( 18 , 0 ) ": Decimal(18, 0), "decimal(5)": Decimal(5, 0),
	} {
		got, err := Parse(name)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, bad := range []string{"decimal", "decimal(39,2)", "decimal(4,5)", "decimal(0,0)", "decimal(a,b)", "decimal(10,2"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if d := Decimal(10, 2); d.Precision() != 10 || d.Scale() != 2 || !d.IsDecimal() || d.String() != "decimal(10,2)" {
		t.Errorf("decimal(10,2): precision %d scale %d name %s", d.Precision(), d.Scale(), d)
	}
}

// TestValues: each value's text parses back to it, and text that is no
// value (or would lose digits) is refused.
func TestValues(t *testing.T) {
	d, err := ParseDate("2026-11-29")
	if err != nil || d.String() != "2026-11-29" || d.Time() != time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) {
		t.Errorf("date: %v %v", d, err)
	}
	if d, _ := ParseDate("1969-12-31"); d != -1 {
		t.Errorf("1969-12-31 is day %d, want -1", d)
	}
	if DateOf(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)) != -1 {
		t.Error("DateOf rounds a time before 1970 the wrong way")
	}
	for text, us := range map[string]int64{"00:00:00": 0, "13:45:01.000123": 49501000123, "23:59:59.999999": MicrosPerDay - 1, "07:05": 25500000000} {
		got, err := ParseTimeOfDay(text)
		if err != nil || int64(got) != us {
			t.Errorf("time of day %q = %d, %v; want %d", text, got, err, us)
		}
	}
	if s := TimeOfDayValue(49501000123).String(); s != "13:45:01.000123" || TimeOfDayValue(0).String() != "00:00:00.000000" {
		t.Errorf("time of day text %q", s)
	}
	u, err := ParseUUID("123E4567-e89b-12d3-a456-426614174000")
	if err != nil || u.String() != "123e4567-e89b-12d3-a456-426614174000" || u[0] != 0x12 || u[15] != 0 {
		t.Errorf("uuid: %v %v", u, err)
	}
	for text, want := range map[string]DecimalValue{"12.5": {Unscaled: 1250, Scale: 2}, "-0.01": {Unscaled: -1, Scale: 2}, "1e2": {Unscaled: 10000, Scale: 2}, "3.140": {Unscaled: 314, Scale: 2}, "0": {Scale: 2}} {
		got, err := ParseDecimal(text, 10, 2)
		if err != nil || got != want {
			t.Errorf("decimal %q = %v, %v; want %v", text, got, err, want)
		}
	}
	if s := (DecimalValue{Unscaled: -5, Scale: 3}).String(); s != "-0.005" {
		t.Errorf("decimal text %q", s)
	}
	for _, bad := range []string{"1.234", "123456789.1", "abc", "", "1e999"} {
		if _, err := ParseDecimal(bad, 10, 2); err == nil {
			t.Errorf("ParseDecimal(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"2026-13-01", "29/11/2026"} {
		if _, err := ParseDate(bad); err == nil {
			t.Errorf("ParseDate(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"24:00:00", "12:00:00.1234567", "1:2:3", "12:60"} {
		if _, err := ParseTimeOfDay(bad); err == nil {
			t.Errorf("ParseTimeOfDay(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"123e4567e89b12d3a456426614174000x", "123e4567-e89b-12d3-a456-42661417400g"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) accepted", bad)
		}
	}
}

// TestWideDecimal: decimals of up to 38 digits parse exactly, read back as
// their text, round-trip through their 128-bit and big-endian forms, and
// more digits than the precision (or than 38) are refused, never rounded.
func TestWideDecimal(t *testing.T) {
	nines := strings.Repeat("9", 37)
	for _, text := range []string{
		nines[:27] + "." + nines[27:], // 10^37-1 at scale 10
		"-" + nines[:27] + "." + nines[27:],
		"0.0000000000",
		"-9223372036854775808.0000000000", // the int64 bounds, unscaled ×10^10
		"9223372036854775807.0000000001",
		"-0.0000000001",
		"1" + strings.Repeat("0", 27) + ".0000000000",
	} {
		d, err := ParseDecimal(text, 38, 10)
		if err != nil {
			t.Fatalf("ParseDecimal(%q): %v", text, err)
		}
		if d.String() != text {
			t.Errorf("%q reads back as %q", text, d)
		}
		if want, _ := new(big.Int).SetString(strings.Replace(text, ".", "", 1), 10); d.Big().Cmp(want) != 0 {
			t.Errorf("%q: unscaled %v", text, d.Big())
		}
		if (d.High == 0) != d.Big().IsInt64() {
			t.Errorf("%q: not canonical: %+v", text, d)
		}
		hi, lo := d.Int128()
		if back := DecimalOfInt128(hi, lo, 10); back != d {
			t.Errorf("%q: Int128 round trip %+v, want %+v", text, back, d)
		}
		if back, ok := DecimalOfBigEndian(d.AppendBigEndian(nil, 16), 10); !ok || back != d {
			t.Errorf("%q: big-endian round trip %+v, want %+v", text, back, d)
		}
		if back, ok := DecimalOfBig(d.Big(), 10); !ok || back != d {
			t.Errorf("%q: big round trip %+v, want %+v", text, back, d)
		}
	}
	if d, ok := DecimalOfBigEndian([]byte{0xff, 0x85}, 2); !ok || d.String() != "-1.23" {
		t.Errorf("two bytes: %v", d)
	}
	for _, bad := range []string{"1" + strings.Repeat("0", 28) + ".0", nines + "9.5", "0.00000000001", "1" + strings.Repeat("0", 38)} {
		if d, err := ParseDecimal(bad, 38, 10); err == nil {
			t.Errorf("ParseDecimal(%q, 38, 10) accepted: %v", bad, d)
		}
	}
	if _, err := ParseDecimal("1234567890123456789012", 20, 0); err == nil {
		t.Error("22 digits accepted as decimal(20,0)")
	}
	if !Decimal(19, 0).IsWideDecimal() || Decimal(18, 0).IsWideDecimal() || Int64.IsWideDecimal() {
		t.Error("IsWideDecimal")
	}
}
