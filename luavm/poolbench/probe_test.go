package poolbench

import "testing"

func BenchmarkProbe(b *testing.B) {
	for _, s := range []string{"core2+block", "core2+max2+block", "core2+max6+block", "core2+max30+block", "core2+max126+block", "variable"} {
		fn, _ := Bench(s, ModeHot, 4000)
		b.Run(s, fn)
	}
}
