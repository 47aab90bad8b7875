package server

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestRowEncoderMatchesEncodingJSON: what the query stream writes decodes
// to what encoding/json would have written for the same row.
func TestRowEncoderMatchesEncodingJSON(t *testing.T) {
	row := map[string]any{
		"s": "quote \" backslash \\ nl \n ctl \x01 bad \xff sep \u2028 é", "i": int64(-42), "f": 1e-7, "g": 123456.5,
		"big": 1e21, "b": true, "n": nil, "t": time.Date(2024, 5, 1, 10, 0, 0, 1500, time.UTC), "j": json.RawMessage(`{"a":[1,2]}`),
	}
	cols := []string{"s", "i", "f", "g", "big", "b", "n", "t", "j"}
	got, err := newRowEncoder(cols).append(nil, row)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(row)
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("invalid JSON %s: %v", got, err)
	}
	json.Unmarshal(want, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got, _ := newRowEncoder([]string{"x"}).append(nil, map[string]any{"x": math.NaN()}); string(got) != `{"x":null}` {
		t.Fatalf("NaN: %s", got)
	}
}

// BenchmarkRowEncoder encodes the benchmark's ten-field row.
func BenchmarkRowEncoder(b *testing.B) {
	row := map[string]any{
		"time": time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC), "user": "hot", "action": "view", "country": "SG", "device": "web",
		"amount": 12.5, "score": 1.5, "count": int64(42), "session": int64(123456), "ok": true,
	}
	enc := newRowEncoder([]string{"time", "user", "action", "country", "device", "amount", "score", "count", "session", "ok"})
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = enc.append(buf[:0], row)
	}
}
