package poolbench

import (
	"fmt"
	"testing"
)

// BenchmarkPool runs the grid at 4000 goroutines (set -cpu=2 for the report's
// setting): go test -bench=Pool -cpu=2 -benchmem ./bench/poolbench/
func BenchmarkPool(b *testing.B) {
	for _, g := range []int{4000} {
		for _, s := range append(append([]string{}, Strategies...), Baselines...) {
			for _, mode := range []Mode{ModeHot, ModeReport} {
				if mode == ModeReport && len(s) > 7 && s[:7] == "simple-" {
					continue
				}
				fn, err := Bench(s, mode, g)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(fmt.Sprintf("%s/%s/g=%d", s, mode, g), fn)
			}
		}
	}
}

// BenchmarkLow is the pooled call with one goroutine per P: the call's own
// cost, without waiting.
func BenchmarkLow(b *testing.B) {
	for _, s := range []string{"default", "simple-syncpool", "simple-chan2"} {
		fn, err := Bench(s, ModeHot, 1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s, fn)
	}
}
