package table

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// TestKeyedSmallEntryCache runs appends of a few keys each over a table
// whose entry cache holds 3 entries, so that entries are evicted and
// their slots reused all the time: every state read must be the key's
// own (a slot given to another key while the old key still pointed to it
// would show a key twice, or at an older value).
func TestKeyedSmallEntryCache(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	tb.entries.limit = 3
	rng := rand.New(rand.NewPCG(5, 6))
	want := map[string]int64{}
	for v := int64(1); v <= 40; v++ {
		var rows []Row
		for range 1 + rng.IntN(4) {
			id := fmt.Sprintf("k%d", rng.IntN(12))
			if rng.IntN(6) == 0 {
				rows = append(rows, del(id))
				delete(want, id)
				continue
			}
			rows = append(rows, Row{"id": id, "dev": "all", "v": v, "ts": t0})
			want[id] = v
		}
		appendRows(t, tb, rows...)
		wantState(t, tb, want)
	}
	if n := len(tb.entries.m); n > 3 {
		t.Errorf("%d entries cached, limit 3", n)
	}
}

// TestEntryCacheSecondChance: an entry read since the hand last passed
// survives the next eviction; one never read again goes first.
func TestEntryCacheSecondChance(t *testing.T) {
	c := &entryCache{limit: 2}
	c.put(map[string]*keyState{"a": {pending: -1}})
	c.put(map[string]*keyState{"b": {pending: -1}})
	c.getAll([]string{"a"}, []int{0}, func(int, keyState, bool) {}) // a is hot
	c.put(map[string]*keyState{"c": {pending: -1}})
	if _, ok := c.m["a"]; !ok {
		t.Errorf("the entry read again was evicted: %v", c.m)
	}
	if _, ok := c.m["b"]; ok {
		t.Errorf("the entry never read again stayed: %v", c.m)
	}
	for k, i := range c.m {
		if c.slots[i].key != k {
			t.Errorf("key %q points to the slot of %q", k, c.slots[i].key)
		}
	}
}

// TestMarkCacheBytes: the mark cache stays within its bytes, keeps its
// count of them when a mark changes length, and never keeps the batch's
// key (a substring of one string of all the part's dead keys).
func TestMarkCacheBytes(t *testing.T) {
	var c markCache
	joined := strings.Repeat("k", 64)
	key := joined[:8]
	c.put(map[string][]byte{key: newMark(8)})
	c.put(map[string][]byte{key: newMark(800)})
	for k := range c.m {
		if unsafe.StringData(k) == unsafe.StringData(joined) {
			t.Errorf("cached key %q is the batch's string", k)
		}
	}
	if want := len(key) + len(newMark(800)) + markCacheOverhead; c.bytes != want {
		t.Errorf("bytes %d after a mark changed length, want %d", c.bytes, want)
	}
	for i := range 200_000 {
		c.put(map[string][]byte{fmt.Sprintf("mark-%08d", i): newMark(100)})
	}
	if c.bytes > markCacheBytes {
		t.Errorf("%d bytes cached, bound %d", c.bytes, markCacheBytes)
	}
	sum := 0
	for k, m := range c.m {
		sum += len(k) + len(m) + markCacheOverhead
	}
	if sum != c.bytes || len(c.m) < markCacheBytes/(len("mark-00000000")+len(newMark(100))+markCacheOverhead)-1 {
		t.Errorf("%d marks, %d bytes counted, %d in the map", len(c.m), c.bytes, sum)
	}
	c.drop("mark-00199999")
	c.clear()
	if c.bytes != 0 || c.m != nil {
		t.Errorf("after clear: %d bytes, %d marks", c.bytes, len(c.m))
	}
}
