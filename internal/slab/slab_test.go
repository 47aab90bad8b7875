package slab

import (
	"encoding/json"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// TestAt: every element comes back with its type and value, for each type
// the stores box.
func TestAt(t *testing.T) {
	check := func(name string, want []any, s Slab) {
		t.Helper()
		for k, w := range want {
			if got := s.At(k); !reflect.DeepEqual(got, w) || reflect.TypeOf(got) != reflect.TypeOf(w) {
				t.Errorf("%s[%d] = %#v (%T), want %#v (%T)", name, k, got, got, w, w)
			}
		}
	}
	ints := []int64{0, 256, -1 << 62}
	floats := []float64{0.5, -3, 1e300}
	strs := []string{"", "a", "ünïcode"}
	times := []time.Time{time.Unix(0, 0).UTC(), time.Date(2026, 11, 24, 1, 2, 3, 4, time.UTC)}
	raws := []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`[]`)}
	check("int64", []any{int64(0), int64(256), int64(-1 << 62)}, Of(ints))
	check("float64", []any{0.5, -3.0, 1e300}, Of(floats))
	check("string", []any{"", "a", "ünïcode"}, Of(strs))
	check("time", []any{times[0], times[1]}, Of(times))
	check("raw", []any{raws[0], raws[1]}, Of(raws))
}

// TestAtDoesNotAllocate: the point of the package; Of does not allocate
// either (its type word comes without boxing a value).
func TestAtDoesNotAllocate(t *testing.T) {
	s := Of([]int64{1 << 40, 2 << 40})
	var sink any
	if n := testing.AllocsPerRun(100, func() { sink = s.At(1) }); n != 0 {
		t.Errorf("At allocates %.0f times, want 0", n)
	}
	times := []time.Time{time.Now()}
	raws := []json.RawMessage{json.RawMessage("1")}
	if n := testing.AllocsPerRun(100, func() { sink = Of(times).At(0); sink = Of(raws).At(0) }); n != 0 {
		t.Errorf("Of allocates %.0f times, want 0", n)
	}
	_ = sink
}

// TestValuesSurviveGC: an interface keeps its slab alive after the Slab is
// gone.
func TestValuesSurviveGC(t *testing.T) {
	var kept []any
	for i := range 100 {
		vals := make([]string, 16)
		for k := range vals {
			vals[k] = string(rune('a'+k)) + string(rune('a'+i%26))
		}
		kept = append(kept, Of(vals).At(i%16))
	}
	for range 3 {
		runtimeGC()
	}
	for i, v := range kept {
		if want := string(rune('a'+i%16)) + string(rune('a'+i%26)); v != want {
			t.Fatalf("value %d = %v after GC, want %s", i, v, want)
		}
	}
}

func runtimeGC() { runtime.GC() }
