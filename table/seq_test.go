package table

import (
	"encoding/binary"
	"slices"
	"sync"
	"testing"
)

// TestSequencesUniqueAndReservedOnDisk: concurrent batches get disjoint
// sequence numbers from the atomic counter, each covered by the synced
// reservation before nextSeqs returns it, and a restart hands out none of
// them again.
func TestSequencesUniqueAndReservedOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	const workers, calls, n = 8, 40, 1000 // 320k numbers: several reservations of seqReserve
	type span struct{ first, end uint64 }
	spans := make([][]span, workers)
	var wg sync.WaitGroup
	var failed sync.Once
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h seqHold
			defer s.releaseSeqs(&h)
			for range calls {
				first, err := s.nextSeqs(n, &h)
				if err != nil {
					failed.Do(func() { t.Error(err) })
					return
				}
				// Reserved on disk before it is used.
				if r := reservedOnDisk(t, s); r < first+n {
					failed.Do(func() { t.Errorf("sequences %d..%d handed out with %d reserved on disk", first, first+n-1, r) })
				}
				spans[w] = append(spans[w], span{first, first + n})
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(spans...)
	slices.SortFunc(all, func(a, b span) int { return int(int64(a.first - b.first)) })
	var high uint64
	for i, sp := range all {
		if i > 0 && sp.first < all[i-1].end {
			t.Fatalf("sequences %d..%d handed out twice", sp.first, all[i-1].end-1)
		}
		high = max(high, sp.end)
	}
	if len(all) != workers*calls {
		t.Fatalf("%d spans, want %d", len(all), workers*calls)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	if first, err := s.nextSeqs(1, nil); err != nil || first < high {
		t.Fatalf("after a restart nextSeqs gave %d (%v); numbers below %d were handed out before", first, err, high)
	}
}

func reservedOnDisk(t *testing.T, s *Store) uint64 {
	v, closer, err := s.db.Get(seqKey)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer closer.Close()
	return binary.BigEndian.Uint64(v)
}

// TestSequencesReservedAhead: the reservation on disk is extended once
// half of it is used, so that batches do not wait for its synced write.
func TestSequencesReservedAhead(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	for range 3 * seqReserve / 1000 {
		first, err := s.nextSeqs(1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := reservedOnDisk(t, s); r-(first+1000) < seqReserve/2 {
			t.Fatalf("after handing out up to %d the reservation is %d: less than half a reservation ahead", first+1000, r)
		}
	}
}
