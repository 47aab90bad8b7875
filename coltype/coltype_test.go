package coltype

import (
	"errors"
	"strings"
	"testing"
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
	for ty := Int64; ty <= Int32; ty++ {
		if !ty.Valid() {
			t.Errorf("%v is not valid", ty)
		}
		b, _ := ty.MarshalText()
		var back Type
		if err := back.UnmarshalText(b); err != nil || back != ty {
			t.Errorf("%v: round trip gave %v, %v", ty, back, err)
		}
	}
	for _, bad := range []Type{0, Int32 + 1} {
		if bad.Valid() {
			t.Errorf("%v is valid", bad)
		}
	}
	onDisk := map[Type]uint8{Int64: 1, Float64: 2, String: 3, Bool: 4, Timestamp: 5, JSON: 6}
	for ty, n := range onDisk {
		if uint8(ty) != n {
			t.Errorf("%v is %d; table blocks on disk store it as %d", ty, uint8(ty), n)
		}
	}
}
