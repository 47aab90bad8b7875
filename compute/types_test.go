package compute

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

func TestCoerce(t *testing.T) {
	ok := func(v any, typ Type, want any) {
		t.Helper()
		got, err := Coerce(v, typ)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Coerce(%#v, %v) = %#v, %v; want %#v", v, typ, got, err, want)
		}
	}
	bad := func(v any, typ Type) {
		t.Helper()
		if got, err := Coerce(v, typ); !errors.Is(err, ErrType) {
			t.Errorf("Coerce(%#v, %v) = %#v, %v; want ErrType", v, typ, got, err)
		}
	}
	ok(int64(7), Int32, int32(7))
	ok(7.0, Int32, int32(7))
	ok(json.Number("7"), Int64, int64(7))
	ok(int64(math.MaxInt64), Int64, int64(math.MaxInt64))
	ok(json.Number("9007199254740993"), Int64, int64(9007199254740993))
	ok(int64(3), Float64, 3.0)
	ok(2.5, Float64, 2.5)
	ok(int64(1700000000), Timestamp, time.Unix(1700000000, 0).UTC())
	ok(1700000000.5, Timestamp, time.Unix(1700000000, 5e8).UTC())
	ok("x", String, "x")
	ok(true, Bool, true)
	ok(`{"a":1}`, JSON, json.RawMessage(`{"a":1}`))
	ok(map[string]any{"a": int64(1)}, JSON, json.RawMessage(`{"a":1}`))
	ok(nil, Int64, nil)
	bad(int64(math.MaxInt32+1), Int32)
	bad(2.5, Int64)
	bad(1e300, Int64)
	bad("7", Int64)
	bad(int64(1), String)
	bad(int64(1), Bool)
	bad("true", Bool)
	bad("{not json", JSON)
	bad(struct{}{}, JSON)
	bad(true, Timestamp)
	bad(math.NaN(), Timestamp)
}
