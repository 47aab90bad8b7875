package rdb

import (
	"bytes"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

// TestZeroCopyAllocations: decoding every value of a file allocates a
// constant handful of times (the parser, its window, scratch buffers that
// reach their working size), not per key or per element.
func TestZeroCopyAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a multi-megabyte file")
	}
	if raceEnabled {
		t.Skip("counts allocations, which -race changes: scripts/test runs the allocation tests again without -race")
	}
	small, large := syntheticRDB(2000), syntheticRDB(20000) // both beyond the first window
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
			t.Errorf("%s: allocations grow with the file: %.0f for %d keys, %.0f for 10x", tc.name, a1, 2000, a2)
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
	if raceEnabled {
		// Allocation counts are not meaningful under -race: scripts/test
		// runs this test again without it.
		t.Log("allocations not counted under -race")
		return
	}
	// Allocations per file are a constant (the AUX strings kept in Header,
	// the checksum helper goroutine and its channels), not per key.
	count := func(data []byte) float64 {
		r := bytes.NewReader(data)
		return testing.AllocsPerRun(5, func() {
			r.Reset(data)
			p.Reset(r)
			if _, err := visitAll(p); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := count(syntheticRDB(2000)), count(syntheticRDB(20000))
	if large > 30 || large > small+2 {
		t.Fatalf("%.0f allocations per Reset+parse of a 10x larger file (%.0f for the smaller)", large, small)
	}
}

// TestAbandonedParserStopsHelper: a Parser dropped half way without Close
// has its checksum helper stopped by the cleanup once it is collected.
func TestAbandonedParserStopsHelper(t *testing.T) {
	data := syntheticRDB(3000)
	func() {
		p := NewParser(bytes.NewReader(data), &Options{BufferSize: 4096})
		for range 2000 {
			if !p.Next() {
				t.Fatal(p.Err())
			}
		}
		if p.r.worker == nil {
			t.Fatal("the checksum helper did not start")
		}
	}()
	for range 3 {
		runtime.GC()
	}
	goleak.VerifyNone(t)
}
