package coldread

import (
	"fmt"
	"sync"
	"testing"
)

// TestPositionCacheBound puts entries past the cache's bound: the bytes
// held never exceed it, the least recently used entry goes first (one
// read since it was put stays), and an entry larger than the bound is not
// kept.
func TestPositionCacheBound(t *testing.T) {
	entry := func(i int) (positionKey, filePositions) {
		key := positionKey{path: fmt.Sprintf("s3://b/t/data/%05d-deletes.parquet", i), size: 1000, rows: 100}
		return key, filePositions{fmt.Sprintf("s3://b/t/data/%05d-0.parquet", i): make([]int64, 100)}
	}
	k0, p0 := entry(0)
	size := p0.bytes(k0)
	c := newPositionCache(10*size + size/2) // room for ten
	for i := range 40 {
		k, p := entry(i)
		c.put(k, p)
		if i >= 1 {
			// Entry 0, read after every put, is the most recently used.
			if _, ok := c.get(k0); !ok {
				t.Fatalf("after %d puts: entry 0, read after each, was evicted", i+1)
			}
		}
		if used, _, _ := c.state(); used > c.max {
			t.Fatalf("after %d puts: %d bytes held, bound %d", i+1, used, c.max)
		}
	}
	used, n, _ := c.state()
	if n != 10 || used != 10*size {
		t.Errorf("%d entries of %d bytes held, want 10 of %d", n, used, 10*size)
	}
	if k, _ := entry(1); func() bool { _, ok := c.get(k); return ok }() {
		t.Error("entry 1, the least recently used, is still held")
	}
	if k, _ := entry(39); func() bool { _, ok := c.get(k); return ok }() == false {
		t.Error("entry 39, the last put, is not held")
	}
	big := filePositions{"s3://b/t/data/big.parquet": make([]int64, 2*c.max/8)}
	c.put(positionKey{path: "big"}, big)
	if _, ok := c.get(positionKey{path: "big"}); ok {
		t.Error("an entry larger than the bound is held")
	}
	if used, n, _ := c.state(); used > c.max || n != 10 {
		t.Errorf("after the large entry: %d entries, %d bytes (bound %d)", n, used, c.max)
	}
}

// TestPositionCacheConcurrent gets and puts from several goroutines over
// more entries than fit (run with -race): every get returns the positions
// put under that key, and the bound holds.
func TestPositionCacheConcurrent(t *testing.T) {
	key := func(i int) positionKey { return positionKey{path: fmt.Sprintf("d%d", i), size: int64(i), rows: 1} }
	val := func(i int) filePositions { return filePositions{"f": {int64(i)}} }
	c := newPositionCache(20 * val(0).bytes(key(0)))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 2000 {
				i := (j*7 + g) % 50
				if p, ok := c.get(key(i)); ok {
					if p["f"][0] != int64(i) {
						t.Errorf("key %d: positions of another entry: %v", i, p["f"])
						return
					}
					continue
				}
				c.put(key(i), val(i))
			}
		}()
	}
	wg.Wait()
	if used, _, hits := c.state(); used > c.max || hits == 0 {
		t.Errorf("%d bytes held (bound %d), %d hits", used, c.max, hits)
	}
}
