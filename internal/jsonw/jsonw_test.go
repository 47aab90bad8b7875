package jsonw

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// stdEncode is what jsonw must match: encoding/json, HTML escaping off.
func stdEncode(t testing.TB, v any) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte{'\n'}), nil
}

// TestAppendValueMatchesEncodingJSON compares with encoding/json on values
// of every kind AppendValue handles itself, and one it hands over.
func TestAppendValueMatchesEncodingJSON(t *testing.T) {
	row := map[string]any{
		"s": "tab\there \"q\" \\ \x01 \b \f \u2028 \u2029 ü 😀 <&>", "bad": "\xff", "i": int64(-3), "i2": 42, "i32": int32(7),
		"f": 3.14, "f0": 0.0, "fbig": 1e21, "fsmall": 1.5e-7, "fneg": -2.5e-10, "b": false, "n": nil,
		"f32": float32(3.14), "f32small": float32(1.5e-7), "f32big": float32(1e22),
		"num": json.Number("123456789012345678901234"), "num0": json.Number(""), "raw": json.RawMessage(`{"x":[1,2]}`),
		"rawspaced": json.RawMessage(" { \"a\" : [ 1 , \"b c\" ] } "), "rawnil": json.RawMessage(nil),
		"t": time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC), "tz": time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 5*3600)),
		"m": map[string]any{"z": 1.0, "a": []any{"x", nil}}, "mnil": map[string]any(nil), "anil": []any(nil),
		"u": uint64(math.MaxUint64), "bytes": []byte("hi"), "strs": []string{"<a>"},
	}
	got, err := AppendValue(nil, row)
	if err != nil {
		t.Fatal(err)
	}
	want, err := stdEncode(t, row)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("AppendValue:\n got %s\nwant %s", got, want)
	}
}

func TestAppendValueErrors(t *testing.T) {
	for name, v := range map[string]any{
		"+Inf": math.Inf(1), "NaN": math.NaN(), "bad number": json.Number("1.e5"), "bad raw": json.RawMessage(`{"a"`),
		"year": time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "nested": map[string]any{"k": []any{math.Inf(-1)}},
	} {
		if _, err := AppendValue(nil, v); err == nil {
			t.Errorf("%s: encoded without error", name)
		}
		if _, err := stdEncode(t, v); err == nil {
			t.Errorf("%s: encoding/json accepts it, the test is wrong", name)
		}
	}
}

func TestAppendObjectSkip(t *testing.T) {
	got, err := AppendObject([]byte("x"), map[string]any{"a": 1, "key1": 2, "b": 3}, func(k string) bool { return k == "key1" })
	if err != nil || string(got) != `x{"a":1,"b":3}` {
		t.Errorf("got %s, %v", got, err)
	}
	if got, _ := AppendObject(nil, nil, nil); string(got) != `{}` {
		t.Errorf("nil object: %s", got)
	}
}

// FuzzAppendValue: any JSON that encoding/json decodes (numbers kept as
// json.Number) is written by AppendValue exactly as encoding/json writes it;
// and a string of arbitrary bytes is quoted exactly as encoding/json quotes it.
func FuzzAppendValue(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"big":9007199254740993,"neg":-9223372036854775808,"huge":18446744073709551616}`,
		`{"f":1.5,"e":1e400,"z":-0.0,"t":1e-7}`, `{"n":null,"a":[1,null,{"b":[]}],"s":"\u00e9\n\"\\\u2028"}`,
		`[1, "x\b\f"]`, `"\u0001"`, `{"a":"\xff"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := AppendString(nil, string(data)), mustStd(t, string(data)); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q):\n got %s\nwant %s", data, got, want)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		for _, form := range []any{v, floats(v)} {
			want, stdErr := stdEncode(t, form)
			got, err := AppendValue(nil, form)
			if (err != nil) != (stdErr != nil) {
				t.Fatalf("%q: error %v, encoding/json error %v", data, err, stdErr)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("%q:\n got %s\nwant %s", data, got, want)
			}
		}
	})
}

func mustStd(t *testing.T, v any) []byte {
	b, err := stdEncode(t, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// floats turns json.Numbers into float64 (where they fit), to fuzz the
// float formatting too.
func floats(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = floats(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = floats(e)
		}
		return s
	}
	return v
}
