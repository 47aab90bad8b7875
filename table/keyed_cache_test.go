package table

import (
	"fmt"
	"math/rand/v2"
	"testing"
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
