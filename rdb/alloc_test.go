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
