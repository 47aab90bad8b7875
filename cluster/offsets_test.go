package cluster

import (
	"math/rand/v2"
	"testing"
)

func TestOffsetsAddMergesAndParses(t *testing.T) {
	o := Offsets{}
	o.Add("kafka/t/0/x", 10, 20)
	o.Add("kafka/t/0/x", 20, 30) // adjacent: one range
	o.Add("kafka/t/0/x", 50, 60)
	o.Add("kafka/t/0/x", 0, 5) // out of order
	o.Add("kafka/t/1/x", 7, 7) // empty: nothing
	o.Normalize()
	if got, want := o.String(), "kafka/t/0/x@0-5,10-30,50-60"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	back, err := ParseOffsets(o.String())
	if err != nil || back.String() != o.String() {
		t.Fatalf("ParseOffsets(%q) = %v, %v", o.String(), back, err)
	}
	for off, want := range map[int64]bool{0: true, 4: true, 5: false, 9: false, 10: true, 29: true, 30: false, 59: true, 60: false} {
		if o.Contains("kafka/t/0/x", off) != want {
			t.Errorf("Contains(%d) = %v", off, !want)
		}
	}
	if o.Contains("kafka/t/1/x", 7) {
		t.Error("an empty range holds an offset")
	}
	for _, bad := range []string{"nosource", "s@1", "s@5-1", "s@a-b"} {
		if _, err := ParseOffsets(bad); err == nil {
			t.Errorf("ParseOffsets(%q) took it", bad)
		}
	}
}

// TestAssignEachOffsetOnce: whatever the nodes hold, every held offset is
// in exactly one node's share, and only in a share of a node that holds it.
func TestAssignEachOffsetOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	srcs := []string{"a", "b"}
	for round := range 300 {
		held := make([]Offsets, 1+rng.IntN(4))
		for i := range held {
			held[i] = Offsets{}
			for range rng.IntN(6) {
				lo := rng.Int64N(200)
				held[i].Add(srcs[rng.IntN(2)], lo, lo+1+rng.Int64N(40))
			}
			held[i].Normalize()
		}
		keep := Assign(held)
		for _, src := range srcs {
			for off := range int64(260) {
				holders, sharers := 0, 0
				for i := range held {
					if held[i].Contains(src, off) {
						holders++
					}
					if keep[i].Contains(src, off) {
						sharers++
						if !held[i].Contains(src, off) {
							t.Fatalf("round %d: %s@%d given to node %d, which does not hold it", round, src, off, i)
						}
					}
				}
				if holders > 0 && sharers != 1 {
					t.Fatalf("round %d: %s@%d held by %d nodes, given to %d (held %v, keep %v)", round, src, off, holders, sharers, held, keep)
				}
			}
		}
	}
}
