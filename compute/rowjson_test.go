package compute

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestDecodeRowFidelity: values that a float64 path would change come out
// exactly as they went in.
func TestDecodeRowFidelity(t *testing.T) {
	in := `{"big":9007199254740993,"max":9223372036854775807,"min":-9223372036854775808,"huge":18446744073709551616,"f":2.5,"tiny":1e-7,"n":null,"s":"a\"b<\u00e9>\n","t":true,"nested":{"a":[1,null,{"b":12345678901234567}]}}`
	row, err := DecodeRow([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if row["big"] != int64(9007199254740993) || row["max"] != int64(math.MaxInt64) || row["min"] != int64(math.MinInt64) {
		t.Errorf("ints: %#v %#v %#v", row["big"], row["max"], row["min"])
	}
	if row["huge"] != json.Number("18446744073709551616") {
		t.Errorf("huge = %#v", row["huge"])
	}
	if v, ok := row["n"]; !ok || v != nil {
		t.Errorf("null: %#v %v", v, ok)
	}
	if row["f"] != 2.5 {
		t.Errorf("f = %#v", row["f"])
	}
	out, err := AppendJSONRow(nil, row, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"big":9007199254740993,"f":2.5,"huge":18446744073709551616,"max":9223372036854775807,"min":-9223372036854775808,"n":null,"nested":{"a":[1,null,{"b":12345678901234567}]},"s":"a\"b<é>\n","t":true,"tiny":1e-7}`
	if string(out) != want {
		t.Errorf("round trip:\n got %s\nwant %s", out, want)
	}
}

func TestDecodeRowErrors(t *testing.T) {
	for _, in := range []string{``, `[1]`, `null`, `{"a":1} {"b":2}`, `{"a":`, `"x"`} {
		if row, err := DecodeRow([]byte(in)); err == nil {
			t.Errorf("DecodeRow(%q) = %v, want an error", in, row)
		}
	}
}

// TestAppendJSONRowMatchesEncodingJSON compares with encoding/json (HTML
// escaping off) on values of every kind.
func TestAppendJSONRowMatchesEncodingJSON(t *testing.T) {
	row := map[string]any{
		"s": "tab\there \"q\" \\ \x01 \u2028 ü 😀 <&>", "bad": "\xff", "i": int64(-3), "i2": 42, "i32": int32(7),
		"f": 3.14, "f0": 0.0, "fbig": 1e21, "fsmall": 1.5e-7, "fneg": -2.5e-10, "b": false, "n": nil,
		"num": json.Number("123456789012345678901234"), "raw": json.RawMessage(`{"x":[1,2]}`),
		"t": time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC), "m": map[string]any{"z": 1.0, "a": []any{"x", nil}},
		"u": uint64(math.MaxUint64), "bytes": []byte("hi"),
	}
	got, err := AppendJSONRow(nil, row, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(row); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(bytes.TrimSpace(want.Bytes())) {
		t.Errorf("AppendJSONRow:\n got %s\nwant %s", got, want.Bytes())
	}
	if _, err := AppendJSONRow(nil, map[string]any{"x": math.Inf(1)}, nil); err == nil {
		t.Error("+Inf encoded without error")
	}
	omitted, _ := AppendJSONRow(nil, map[string]any{"a": 1, "key1": 2, "b": 3}, map[string]struct{}{"key1": {}})
	if string(omitted) != `{"a":1,"b":3}` {
		t.Errorf("omit: %s", omitted)
	}
}

// TestDecodeRowKeepsLongNumbers: a number float64 would round keeps its
// text (a decimal column takes it exactly); one float64 holds is a float64.
func TestDecodeRowKeepsLongNumbers(t *testing.T) {
	row, err := DecodeRow([]byte(`{"wide":999999999999999999999999999.9999999999,"short":0.1,"js":0.30000000000000004,"zeros":12.500000000000000000,"long":72100.121000019201}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"wide": json.Number("999999999999999999999999999.9999999999"), "short": 0.1, "js": 0.30000000000000004,
		"zeros": 12.5, "long": json.Number("72100.121000019201")}
	if !reflect.DeepEqual(row, want) {
		t.Errorf("DecodeRow = %#v, want %#v", row, want)
	}
}

// TestFloatKeepsTextAllocs: the check the JSON decoders make on a long
// float allocates nothing (it runs on the fast path of every such number).
func TestFloatKeepsTextAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { FloatKeepsText("72100.121000019201", 72100.12100001921) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
