package talaria

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestAppendLines: each of Talaria's value types becomes its JSON value,
// keys in id order, one line per event; ids a batch lacks, NaN and invalid
// JSON refuse the batch; past the bound it stops with ErrTooLarge.
func TestAppendLines(t *testing.T) {
	b := &Batch{
		Strings: map[uint32][]byte{1: []byte("s"), 2: []byte("i32"), 3: []byte("i64"), 4: []byte("f"), 5: []byte("b"), 6: []byte("t"), 7: []byte("j"), 8: []byte("a \"quoted\"\nvalue"), 9: []byte("{\n \"k\": [1, 2]\n}"), 10: []byte("null")},
		Events: []*Event{
			{Value: map[uint32]*Value{
				7:  {Value: &Value_Json{Json: 9}},
				1:  {Value: &Value_String_{String_: 8}},
				2:  {Value: &Value_Int32{Int32: -3}},
				3:  {Value: &Value_Int64{Int64: 1 << 40}},
				4:  {Value: &Value_Float64{Float64: 0.5}},
				5:  {Value: &Value_Bool{Bool: true}},
				6:  {Value: &Value_Time{Time: 1772359200}},
				10: {},
			}},
			{},
		},
	}
	out, err := AppendLines(nil, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"s":"a \"quoted\"\nvalue","i32":-3,"i64":1099511627776,"f":0.5,"b":true,"t":"2026-03-01T10:00:00Z","j":{"k":[1,2]},"null":null}` + "\n{}\n"
	if string(out) != want {
		t.Errorf("lines:\n%s\nwant:\n%s", out, want)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("not a JSON line: %s", line)
		}
	}
	for name, ev := range map[string]*Event{
		"a name id it lacks":   {Value: map[uint32]*Value{99: {Value: &Value_Int32{Int32: 1}}}},
		"a string id it lacks": {Value: map[uint32]*Value{1: {Value: &Value_String_{String_: 99}}}},
		"a json id it lacks":   {Value: map[uint32]*Value{1: {Value: &Value_Json{Json: 99}}}},
		"invalid json":         {Value: map[uint32]*Value{1: {Value: &Value_Json{Json: 8}}}},
		"NaN":                  {Value: map[uint32]*Value{1: {Value: &Value_Float64{Float64: math.NaN()}}}},
	} {
		if _, err := AppendLines(nil, &Batch{Strings: b.Strings, Events: []*Event{ev}}, 0); !errors.Is(err, ErrBadBatch) {
			t.Errorf("%s: %v, want ErrBadBatch", name, err)
		}
	}
	if _, err := AppendLines(nil, b, 20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a bound of 20 bytes: %v, want ErrTooLarge", err)
	}
}
