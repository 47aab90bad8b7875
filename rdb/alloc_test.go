package rdb

import (
	"bytes"
	"testing"
)

// TestZeroCopyAllocations: decoding every value of a file allocates a
// constant handful of times (the parser, its window, scratch buffers that
// reach their working size), not per key or per element.
func TestZeroCopyAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a multi-megabyte file")
	}
	small, large := syntheticRDB(500), syntheticRDB(5000)
	for _, tc := range []struct {
		name string
		mk   func([]byte) *Parser
	}{
		{"reader", func(d []byte) *Parser { return NewParser(bytes.NewReader(d), nil) }},
		{"bytes", func(d []byte) *Parser { return NewBytesParser(d, nil) }},
	} {
		allocs := func(data []byte) float64 {
			return testing.AllocsPerRun(3, func() {
				if _, err := visitAll(tc.mk(data)); err != nil {
					t.Fatal(err)
				}
			})
		}
		a1, a2 := allocs(small), allocs(large)
		t.Logf("%s: %.0f allocs for %d bytes, %.0f allocs for %d bytes", tc.name, a1, len(small), a2, len(large))
		if a2 > 40 || a2 > a1+5 {
			t.Errorf("%s: allocations grow with the file: %.0f for %d keys, %.0f for 10x", tc.name, a1, 500, a2)
		}
	}
}

// TestResetReusesBuffers: after Reset, parsing another file gives the same
// result as a fresh Parser and allocates nothing per key.
func TestResetReusesBuffers(t *testing.T) {
	corpus := handmadeCorpus()
	a, b := corpus["redis74-all"], corpus["redis5-basic"]
	want, err := dumpParser(NewParser(bytes.NewReader(b), nil))
	if err != nil {
		t.Fatal(err)
	}
	p := NewParser(bytes.NewReader(a), nil)
	if _, err := dumpParser(p); err != nil {
		t.Fatal(err)
	}
	p.Reset(bytes.NewReader(b))
	got, err := dumpParser(p)
	if err != nil || got != want {
		t.Fatalf("after Reset: err %v\n%s\nwant\n%s", err, got, want)
	}
	if len(p.Header().Aux) != 1 || p.Header().Version != 9 {
		t.Fatalf("header after Reset: %+v", p.Header())
	}
	large := syntheticRDB(2000)
	r := bytes.NewReader(large)
	allocs := testing.AllocsPerRun(5, func() {
		r.Reset(large)
		p.Reset(r)
		if _, err := visitAll(p); err != nil {
			t.Fatal(err)
		}
	})
	// The only allocations left are the AUX strings kept in Header (two per
	// field; the synthetic file has two fields).
	if allocs > 2*2+2 {
		t.Fatalf("%.0f allocations per Reset+parse", allocs)
	}
}
