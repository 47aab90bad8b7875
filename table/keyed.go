package table

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
)

// A keyed table (Config.PrimaryKey) keeps one row per key: the latest.
// Rows are still stored in append-only blocks; what makes a row the
// latest is the key index and the dead-row marks (docs/upserts.md):
//
//   - the key index maps each key to where its current row lives (block key
//     and row number in the block) and to the source position (partition,
//     offset) that wrote it, or records that the key was deleted at a
//     source position (a tombstone, so that a replay of an older message
//     does not bring it back);
//   - a dead-row mark is a bitmap per block of its rows that a later row of
//     the same key (or a delete) superseded. A scan reads the block's mark
//     beside the block and skips the marked rows, so a query never holds a
//     map of the keys it has seen.
//
// Both are written in the same synced pebble.Batch as the blocks of the
// append, so after a crash the rows, the index and the marks agree. The
// appends of one keyed table resolve their keys one at a time (keyLock):
// an append reads the index entries of its keys, and those must not
// change until its batch is committed.

// ErrKeyed is wrapped by the operations a table with a primary key refuses
// (docs/upserts.md, "Refused for now").
var ErrKeyed = errors.New("not supported on a table with a primary key")

// rowLoc is where a stored row lives: its block's key parts and its row
// number in the block.
type rowLoc struct {
	hash    uint64
	minTime int64
	seq     uint64
	row     int
	rows    int // the block's rows: a dead-row mark knows when all are dead
}

// version is the source position of a row (SourceBatchColumn's partition,
// SourceOffsetColumn's offset); ok is false for a row without one.
type version struct {
	partition string
	offset    int64
	ok        bool
}

// replayOf reports whether a row at v changes nothing for a key whose
// last change was at cur: the same source partition, at or before it.
// Rows of another partition or without a position apply in arrival order.
func (v version) replayOf(cur version) bool {
	return v.ok && cur.ok && v.partition == cur.partition && v.offset <= cur.offset
}

// keyState is one key's index entry: live says the key has a row (at
// loc; pending while the row is in a part of the batch not written yet),
// and ver is the source position of the key's last change.
type keyState struct {
	live    bool
	inPart  bool // changed by the part being resolved (write's list of them)
	pending int  // the row's index in the part being resolved, -1 once written
	loc     rowLoc
	ver     version
}

// Index entry layout (value of 0x03 | table id u32 | key bytes):
//
//	entry := flags u8 (1 live, 2 versioned)
//	         | [live: hash u64 | min time u64 (sign flipped) | seq u64 | uvarint row | uvarint block rows]
//	         | [versioned: uvarint offset | partition bytes (to the end)]
//
// The key bytes are, per primary key column in order, uvarint length and
// the value's text (the text a column widened to string would hold, so
// that widening a key column's type keeps every key).
const (
	prefixKeyIndex = 0x03
	prefixDeadRows = 0x04

	entryLive      = 1
	entryVersioned = 2
)

func keyIndexKey(dst []byte, table uint32, key []byte) []byte {
	dst = append(dst, prefixKeyIndex)
	dst = binary.BigEndian.AppendUint32(dst, table)
	return append(dst, key...)
}

// keyIndexBounds are the first key of the table's index and the first after it.
func keyIndexBounds(table uint32) (lo, hi []byte) {
	lo = binary.BigEndian.AppendUint32([]byte{prefixKeyIndex}, table)
	hi = binary.BigEndian.AppendUint32([]byte{prefixKeyIndex}, table+1)
	if table == math.MaxUint32 {
		hi = []byte{prefixKeyIndex + 1}
	}
	return lo, hi
}

// deadKey is the key of a block's dead-row mark: the block's key with the
// prefix 0x04, so that the marks of a partition's time range are deleted
// with the same bounds as its blocks.
func deadKey(dst []byte, blockKey []byte) []byte {
	dst = append(dst, prefixDeadRows)
	return append(dst, blockKey[1:]...)
}

// deadBounds are tableBounds for the table's dead-row marks.
func deadBounds(table uint32) (lo, hi []byte) {
	lo, hi = tableBounds(table)
	lo, hi = slices.Clone(lo), slices.Clone(hi)
	lo[0] = prefixDeadRows
	if hi[0] == prefixBlock {
		hi[0] = prefixDeadRows
	} else { // the last table id: the end of the prefix
		hi = []byte{prefixDeadRows + 1}
	}
	return lo, hi
}

// deadPartitionKey is partitionKey for the marks.
func deadPartitionKey(table uint32, hash uint64, minTime int64) []byte {
	k := partitionKey(table, hash, minTime)
	k[0] = prefixDeadRows
	return k
}

func encodeEntry(dst []byte, s *keyState) []byte {
	flags := byte(0)
	if s.live {
		flags |= entryLive
	}
	if s.ver.ok {
		flags |= entryVersioned
	}
	dst = append(dst, flags)
	if s.live {
		dst = binary.BigEndian.AppendUint64(dst, s.loc.hash)
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.loc.minTime)^(1<<63))
		dst = binary.BigEndian.AppendUint64(dst, s.loc.seq)
		dst = binary.AppendUvarint(dst, uint64(s.loc.row))
		dst = binary.AppendUvarint(dst, uint64(s.loc.rows))
	}
	if s.ver.ok {
		dst = binary.AppendUvarint(dst, zigzag(s.ver.offset))
		dst = append(dst, s.ver.partition...)
	}
	return dst
}

func decodeEntry(key, v []byte) (keyState, error) {
	s := keyState{pending: -1}
	fail := func(reason string) error {
		return &CorruptionError{Key: slices.Clone(key), Reason: "key index entry: " + reason}
	}
	if len(v) < 1 || v[0]&^(entryLive|entryVersioned) != 0 {
		return s, fail("flags")
	}
	flags, b := v[0], v[1:]
	if flags&entryLive != 0 {
		if len(b) < 24 {
			return s, fail("short location")
		}
		s.live = true
		s.loc.hash = binary.BigEndian.Uint64(b)
		s.loc.minTime = int64(binary.BigEndian.Uint64(b[8:]) ^ (1 << 63))
		s.loc.seq = binary.BigEndian.Uint64(b[16:])
		row, n := binary.Uvarint(b[24:])
		if n <= 0 || row > math.MaxInt32 {
			return s, fail("row")
		}
		b = b[24+n:]
		rows, n := binary.Uvarint(b)
		if n <= 0 || rows > math.MaxInt32 || row >= rows {
			return s, fail("block rows")
		}
		s.loc.row, s.loc.rows = int(row), int(rows)
		b = b[n:]
	}
	if flags&entryVersioned != 0 {
		off, n := binary.Uvarint(b)
		if n <= 0 {
			return s, fail("offset")
		}
		s.ver = version{partition: string(b[n:]), offset: unzigzag(off), ok: true}
		b = b[:0]
	}
	if len(b) != 0 {
		return s, fail("trailing bytes")
	}
	return s, nil
}

// keyBytes appends the key of row r of cols (keyCols: the indexes in cols
// of the primary key columns, -1 for one the schema lacks) to dst; ok is
// false when a key column is null.
func keyBytes(dst []byte, cols []colData, keyCols []int, r int) (_ []byte, missing int, ok bool) {
	for i, c := range keyCols {
		if c < 0 || cols[c].null[r] {
			return dst, i, false
		}
		start := len(dst)
		dst = append(dst, 0) // length placeholder, most texts are short
		dst = appendText(dst, cols[c].typ, cols[c].vals[r])
		n := len(dst) - start - 1
		if n < 0x80 {
			dst[start] = byte(n)
			continue
		}
		// Longer: room for the whole uvarint.
		var lb [binary.MaxVarintLen64]byte
		l := binary.PutUvarint(lb[:], uint64(n))
		dst = append(dst, lb[:l-1]...)
		copy(dst[start+l:], dst[start+1:start+1+n])
		copy(dst[start:], lb[:l])
	}
	return dst, 0, true
}

// keyedBatch is what one batch (an Appender, or one table's part of a
// Batch) has resolved so far: the keys it changed and the dead-row marks
// it wrote, which the next part of the same batch reads instead of the
// store's (the batch is not committed yet).
type keyedBatch struct {
	t      *Table
	locked bool
	keys   map[string]*keyState
	marks  map[string][]byte // dead key → bitmap
	sparse []string          // dead keys of marks this batch took past the rewrite threshold
	// buffers reused across parts
	keyBuf []byte
}

func newKeyedBatch(t *Table) *keyedBatch {
	return &keyedBatch{t: t, keys: map[string]*keyState{}, marks: map[string][]byte{}}
}

// lock takes the table's key lock (released by unlock); it waits at most
// as long as ctx.
func (k *keyedBatch) lock(ctx context.Context) error {
	if k.locked {
		return nil
	}
	select {
	case k.t.keyLock <- struct{}{}:
		k.locked = true
		return nil
	case <-ctx.Done():
		return fmt.Errorf("table %s: wait for the key index: %w", k.t.name, ctx.Err())
	}
}

func (k *keyedBatch) unlock() {
	if k != nil && k.locked {
		k.locked = false
		<-k.t.keyLock
	}
}

// load returns the state of each key of keys (one per row), reading into
// k.keys the stored entries of the keys this batch has not read yet (a key
// without one gets an empty state). The cache is read under one lock for
// the whole part, and the rest of the keys in order through one iterator:
// sorted seeks cost a fraction of a point read each (a point read per key
// was a fifth of a keyed append; with Bloom filters it was slower still:
// Pebble's filter is one block per table, which the index's own blocks
// push out of the block cache, so reads loaded whole filters again). The states of one call are allocated
// together: one allocation per part, not per key.
// REQUIRES: the key lock held.
func (k *keyedBatch) load(keys []string) ([]*keyState, error) {
	states := make([]*keyState, len(keys))
	var want []int // rows whose key is neither in the batch nor cached
	for r, key := range keys {
		if s, ok := k.keys[key]; ok {
			states[r] = s
			continue
		}
		want = append(want, r)
	}
	if len(want) == 0 {
		return states, nil
	}
	fresh := make([]keyState, 0, len(want))
	// newState returns the batch's state of row r's key, a new one (from
	// the cache, or empty) when the batch has none yet.
	newState := func(key string) (*keyState, bool) {
		if s, ok := k.keys[key]; ok {
			return s, false
		}
		fresh = append(fresh, keyState{pending: -1})
		s := &fresh[len(fresh)-1]
		k.keys[key] = s
		return s, true
	}
	var missed []int
	k.t.entries.getAll(keys, want, func(r int, st keyState, ok bool) {
		s, isNew := newState(keys[r])
		states[r] = s
		if !isNew {
			return
		}
		if ok {
			*s = st
			return
		}
		missed = append(missed, r)
	})
	if len(missed) == 0 {
		return states, nil
	}
	slices.SortFunc(missed, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	t := k.t
	lo, hi := keyIndexBounds(t.id)
	it, err := t.store.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("table %s: read key index: %w", t.name, err)
	}
	defer it.Close()
	var ik []byte
	for i, r := range missed {
		if i > 0 && keys[missed[i-1]] == keys[r] {
			continue // the same key twice in the part: one state
		}
		ik = keyIndexKey(ik[:0], t.id, []byte(keys[r]))
		if it.SeekGE(ik) && string(it.Key()) == string(ik) {
			st, err := decodeEntry(ik, it.Value())
			if err != nil {
				return nil, fmt.Errorf("table %s: %w", t.name, err)
			}
			*states[r] = st
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("table %s: read key index: %w", t.name, err)
	}
	return states, nil
}

// loadMarks reads into k.marks the stored dead-row marks of the blocks
// (dead keys) this batch has not read yet, in order through one iterator.
func (k *keyedBatch) loadMarks(marks []string) error {
	var want []string
	for _, m := range marks {
		if _, ok := k.marks[m]; ok {
			continue
		}
		if mark, ok := k.t.marks.get(m); ok {
			k.marks[m] = mark
			continue
		}
		want = append(want, m)
	}
	if len(want) == 0 {
		return nil
	}
	slices.Sort(want)
	want = slices.Compact(want)
	t := k.t
	lo, hi := deadBounds(t.id)
	it, err := t.store.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("table %s: read dead-row marks: %w", t.name, err)
	}
	defer it.Close()
	for _, m := range want {
		var mark []byte
		if it.SeekGE([]byte(m)) && string(it.Key()) == m {
			bits, err := markBits(nil, it.Value())
			if err != nil {
				return fmt.Errorf("table %s: %w", t.name, &CorruptionError{Key: []byte(m), Reason: err.Error()})
			}
			mark = slices.Clone(bits)
		}
		k.marks[m] = mark
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("table %s: read dead-row marks: %w", t.name, err)
	}
	return nil
}

// keyedLoadedHook, when set (tests only), runs in a keyed append after it
// read its keys' entries, before it writes: a test tries another append
// of the table there.
var keyedLoadedHook func(*Table)

// committed records the entries this batch read and wrote in the table's
// cache of entries, once its commit is durable. REQUIRES: the key lock
// held (no other batch changes an entry meanwhile).
func (k *keyedBatch) committed() {
	if k != nil && k.locked {
		k.t.entries.put(k.keys)
		k.t.marks.put(k.marks)
		k.t.sparse.note(k.sparse)
	}
}

// entryCache keeps the index entries of recently changed keys in memory:
// a skewed stream updates few keys often, and reading an entry from the
// store was the largest cost of a keyed append. Entries are put only after
// the commit that wrote them and under the key lock, and every change of
// an entry goes through it, so the cache never holds an entry the store
// does not.
//
// When full, it evicts by CLOCK (a second chance): an entry read or
// written again since the hand last passed it stays, so the hot keys of a
// skewed stream stay cached while the long tail's keys, mostly changed
// once, take turns in the rest. (Evicting an arbitrary entry, as a map's
// order gives, missed about a fifth more keys per batch on a Zipf
// stream: 165 against 131 of the ~530 distinct keys of a 1000-row
// batch, 1M keys, s = 1.1.)
//
// The cache copies the keys it keeps: the batch's keys are substrings of
// one string per part, which a cached key must not keep alive.
type entryCache struct {
	mu    sync.Mutex
	m     map[string]int32 // key → its slot
	slots []cachedEntry
	hand  int
	limit int // entries kept at most; 0: entryCacheKeys
}

type cachedEntry struct {
	key string
	s   keyState
	ref bool // read or written since the hand last passed
}

// entryCacheKeys bounds the entries cached per table (about 150 bytes
// each with the map's: ~10 MB).
const entryCacheKeys = 1 << 16

// getAll calls found for each row of rows with the cached entry of its key
// in keys (ok false: not cached), under one lock.
func (c *entryCache) getAll(keys []string, rows []int, found func(r int, s keyState, ok bool)) {
	if c == nil {
		for _, r := range rows {
			found(r, keyState{}, false)
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rows {
		if i, ok := c.m[keys[r]]; ok {
			c.slots[i].ref = true
			found(r, c.slots[i].s, true)
		} else {
			found(r, keyState{}, false)
		}
	}
}

func (c *entryCache) put(states map[string]*keyState) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.limit
	if limit <= 0 {
		limit = entryCacheKeys
	}
	if c.m == nil {
		c.m = make(map[string]int32, min(limit, 1<<12))
	}
	for key, s := range states {
		if i, ok := c.m[key]; ok {
			c.slots[i].s, c.slots[i].ref = *s, true
			continue
		}
		e := cachedEntry{key: strings.Clone(key), s: *s}
		if len(c.slots) < limit {
			c.m[e.key] = int32(len(c.slots))
			c.slots = append(c.slots, e)
			continue
		}
		for c.slots[c.hand].ref {
			c.slots[c.hand].ref = false
			c.hand = (c.hand + 1) % len(c.slots)
		}
		delete(c.m, c.slots[c.hand].key)
		c.slots[c.hand] = e
		c.m[e.key] = int32(c.hand)
		c.hand = (c.hand + 1) % len(c.slots)
	}
}

// markCache keeps the dead-row marks of recently marked blocks, as
// entryCache keeps entries: a key updated often has its previous row in a
// recent block, whose mark the last appends wrote. get returns a copy (the
// batch sets bits in it before its commit).
type markCache struct {
	mu    sync.Mutex
	m     map[string][]byte
	bytes int // of the cached marks, their keys and markCacheOverhead each
}

// markCacheBytes bounds the memory of the marks cached per table. A bound
// by bytes rather than by blocks lets the cache hold the many small marks
// of a skewed stream's long tail (a key last written by a load kills a
// row in a block of a few dozen rows: a mark of a dozen bytes) without
// risking the size of as many marks of large blocks.
const markCacheBytes = 8 << 20

// markCacheOverhead is about what a cached mark costs beside its bytes
// and its key's: the map's slot and the two headers.
const markCacheOverhead = 64

func (c *markCache) get(key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.m[key]
	return slices.Clone(m), ok
}

func (c *markCache) put(marks map[string][]byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string][]byte, 1<<12)
	}
	for key, m := range marks {
		if len(m) > 4<<10 {
			continue // a huge block's mark: read from the store when needed
		}
		cur, ok := c.m[key]
		if ok && len(cur) == len(m) {
			// In place: assigning would replace the cached key with the
			// batch's, a substring of a string of all its dead keys.
			copy(cur, m)
			continue
		}
		if ok {
			// Another length (the block was rewritten meanwhile): the
			// entry again, with a key of its own (assigning to the
			// batch's key would store it in the map).
			delete(c.m, key)
			c.bytes -= len(key) + len(cur) + markCacheOverhead
		}
		for c.bytes > markCacheBytes-len(key)-len(m)-markCacheOverhead && len(c.m) > 0 {
			for old, om := range c.m { // a map's order: an arbitrary mark leaves
				delete(c.m, old)
				c.bytes -= len(old) + len(om) + markCacheOverhead
				break
			}
		}
		c.m[strings.Clone(key)] = slices.Clone(m)
		c.bytes += len(key) + len(m) + markCacheOverhead
	}
}

// drop removes a block's mark (the block was rewritten without it).
func (c *markCache) drop(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.m[key]; ok {
		delete(c.m, key)
		c.bytes -= len(key) + len(m) + markCacheOverhead
	}
}

// clear empties the cache (its blocks may have been deleted).
func (c *markCache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.bytes = nil, 0
}

// write resolves a part (cols, n rows) against the key index and writes to
// pb the blocks of the rows that become their key's latest state, their
// index entries and the dead-row marks of the rows they supersede.
// Deletes, replays and rows superseded within the batch are not written.
// The operation column is read and not stored.
// REQUIRES: the key lock held.
func (k *keyedBatch) write(pb *pebble.Batch, cols []colData, n int, h *seqHold) (rows, blocks, bytes int, err error) {
	t := k.t
	keyCols := make([]int, len(t.key))
	for i := range keyCols {
		keyCols[i] = -1
	}
	opCol, batchCol, offsetCol := -1, -1, -1
	for i, c := range cols {
		switch c.name {
		case OperationColumn:
			opCol = i
		case SourceBatchColumn:
			batchCol = i
		case SourceOffsetColumn:
			offsetCol = i
		}
		if j := slices.Index(t.key, c.name); j >= 0 {
			keyCols[j] = i
		}
	}
	ttlCut := int64(math.MinInt64)
	if ttl := time.Duration(t.ttl.Load()); ttl > 0 {
		ttlCut = floorTime(t.store.opts.Now().Add(-ttl).UnixNano(), t.span)
	}
	sc := getWriteScratch()
	defer putWriteScratch(sc)
	// Resolve the rows in order: each one that applies supersedes the
	// key's row before it (stored, or earlier in this batch). The part's
	// keys are substrings of one string: one allocation per part.
	ends := grow(sc.ends, n)
	sc.ends = ends
	buf := k.keyBuf[:0]
	for r := range n {
		var missing int
		var ok bool
		buf, missing, ok = keyBytes(buf, cols, keyCols, r)
		if !ok {
			k.keyBuf = buf
			return 0, 0, 0, &SchemaError{Table: t.name, Row: r, Column: t.key[missing], Reason: "a primary key column is null or missing"}
		}
		ends[r] = len(buf)
	}
	k.keyBuf = buf
	joined := string(buf)
	keys := grow(sc.keys, n)
	sc.keys = keys
	for r, start := 0, 0; r < n; r++ {
		keys[r] = joined[start:ends[r]]
		start = ends[r]
	}
	states, err := k.load(keys)
	if err != nil {
		return 0, 0, 0, err
	}
	if keyedLoadedHook != nil {
		keyedLoadedHook(t)
	}
	touched := sc.touched[:0]
	dead := sc.dead[:0]
	dels := sc.dels[:0] // the rows that delete their key (keyed_deletes.go)
	defer func() { sc.touched, sc.dead, sc.dels = touched, dead, dels }()
	for r, key := range keys {
		v := rowVersion(cols, batchCol, offsetCol, r)
		s := states[r]
		if v.replayOf(s.ver) {
			continue // a replay: the key has this change or a later one
		}
		if s.live {
			switch {
			case s.pending >= 0:
				// A row of this part, not written: it is dropped.
			case s.loc.minTime < ttlCut:
				// The block is past the TTL (deleted or about to be, its
				// rows hidden from queries): no mark for it.
			default:
				dead = append(dead, s.loc)
			}
		}
		del := opCol >= 0 && !cols[opCol].null[r] && cols[opCol].vals[r].s == OperationDelete
		if del {
			dels = append(dels, r)
		}
		s.live = !del
		s.pending = -1
		if !del {
			s.pending = r
		}
		// A row without a position keeps the key's last one: a replay of
		// a message at or before it was applied once already.
		if v.ok {
			s.ver = v
		}
		if !s.inPart {
			s.inPart = true
			touched = append(touched, touchedKey{key, s})
		}
	}
	for _, tk := range touched {
		tk.s.inPart = false // the cache gets the states without it
	}
	// The rows to store, in their order.
	keep := sc.keep[:0]
	defer func() { sc.keep = keep }()
	for _, tk := range touched {
		if tk.s.live && tk.s.pending >= 0 {
			keep = append(keep, tk.s.pending)
		}
	}
	slices.Sort(keep)
	if len(keep) > 0 {
		kept := sc.kept[:0]
		for i, c := range cols {
			if i == opCol {
				continue
			}
			ci := len(kept)
			if ci == len(sc.vals) {
				sc.vals, sc.null = append(sc.vals, nil), append(sc.null, nil)
			}
			sc.vals[ci], sc.null[ci] = grow(sc.vals[ci], len(keep)), grow(sc.null[ci], len(keep))
			kc := colData{name: c.name, typ: c.typ, vals: sc.vals[ci], null: sc.null[ci]}
			for j, r := range keep {
				kc.vals[j], kc.null[j] = c.vals[r], c.null[r]
			}
			kept = append(kept, kc)
		}
		sc.kept = kept
		locs := grow(sc.locs, len(keep))
		sc.locs = locs
		blocks, bytes, err = t.writeBlocksAt(pb, kept, h, locs)
		if err != nil {
			return 0, 0, 0, err
		}
		// The kept rows are in the order of the part, as keep is: the
		// row a key's state is pending at is found by a binary search.
		for _, tk := range touched {
			if tk.s.live && tk.s.pending >= 0 {
				j, _ := slices.BinarySearch(keep, tk.s.pending)
				tk.s.loc, tk.s.pending = locs[j], -1
			}
		}
	}
	// The index entries of the keys this part changed, in key order: the
	// memtable's skiplist inserts a batch's keys one after the other from
	// where the last one went, so keys in order are found in a few steps
	// (in map or arrival order each one searches from the top, and the
	// commit into the memtable was the largest part of a keyed append).
	slices.SortFunc(touched, func(a, b touchedKey) int { return strings.Compare(a.key, b.key) })
	var ik, ev []byte
	for _, tk := range touched {
		key, s := tk.key, tk.s
		ik = keyIndexKey(ik[:0], t.id, []byte(key))
		if !s.live && !s.ver.ok {
			// Deleted, and no position to guard against a replay: no entry.
			if err := pb.Delete(ik, nil); err != nil {
				return 0, 0, 0, err
			}
			bytes += len(ik)
			continue
		}
		ev = encodeEntry(ev[:0], s)
		if err := pb.Set(ik, ev, nil); err != nil {
			return 0, 0, 0, err
		}
		bytes += len(ik) + len(ev)
	}
	logged, err := k.logDeletes(pb, cols, keyCols, keys, states, dels, h)
	if err != nil {
		return 0, 0, 0, err
	}
	bytes += logged
	// The dead-row marks: the block's current mark with the new rows set.
	// Their keys are substrings of one string, as the part's keys are.
	markKeys := grow(sc.markKeys, len(dead))
	sc.markKeys = markKeys
	var bk, mkBuf []byte
	for _, loc := range dead {
		bk = blockKey(bk[:0], t.id, loc.hash, loc.minTime, loc.seq)
		mkBuf = deadKey(mkBuf, bk)
	}
	markJoined := string(mkBuf)
	for i := range dead {
		markKeys[i] = markJoined[i*blockKeyLen : (i+1)*blockKeyLen] // a dead key is as long as its block's
	}
	if err := k.loadMarks(markKeys); err != nil {
		return 0, 0, 0, err
	}
	for i, loc := range dead {
		mk := markKeys[i]
		mark := k.marks[mk]
		if mark == nil {
			mark = newMark(loc.rows)
		}
		if err := setDead(mark, loc.row); err != nil {
			return 0, 0, 0, fmt.Errorf("table %s: %w", t.name, &CorruptionError{Key: []byte(mk), Reason: err.Error()})
		}
		k.marks[mk] = mark
	}
	// In key order, as the index entries: see sortedByKey.
	slices.Sort(markKeys)
	var stored []byte
	for i, mk := range markKeys {
		if i > 0 && markKeys[i-1] == mk {
			continue
		}
		mark := k.marks[mk]
		stored = storeMark(stored[:0], mark)
		if err := pb.Set([]byte(mk), stored, nil); err != nil {
			return 0, 0, 0, err
		}
		bytes += len(mk) + len(stored)
		if sparse(mark) {
			k.sparse = append(k.sparse, mk)
		}
	}
	return len(keep), blocks, bytes, nil
}

// rowVersion is row r's source position, from the source columns.
func rowVersion(cols []colData, batchCol, offsetCol, r int) version {
	if batchCol < 0 || offsetCol < 0 || cols[batchCol].null[r] || cols[offsetCol].null[r] {
		return version{}
	}
	b := cols[batchCol].vals[r].s
	at := strings.LastIndexByte(b, '@')
	if at < 0 {
		return version{}
	}
	off := cols[offsetCol]
	o := off.vals[r].i
	if off.typ == Float64 {
		o = int64(off.vals[r].float())
	}
	return version{partition: b[:at], offset: o, ok: true}
}

// Dead-row mark layout in memory (stored as this bitmap or as a list of
// the dead rows, whichever is shorter: keyed_marks.go):
//
//	mark := block rows u32 | bitmap ceil(rows/8) bytes (bit r set: row r is dead)
//
// The row count lets a scan skip a block whose rows are all dead without
// reading it.
const markHeader = 4

func newMark(rows int) []byte {
	m := make([]byte, markHeader+(rows+7)/8)
	binary.BigEndian.PutUint32(m, uint32(rows))
	return m
}

// setDead marks row r dead in mark.
func setDead(mark []byte, r int) error {
	if len(mark) < markHeader || r >= int(binary.BigEndian.Uint32(mark)) || markHeader+r/8 >= len(mark) {
		return fmt.Errorf("dead-row mark of %d bytes has no row %d", len(mark), r)
	}
	mark[markHeader+r/8] |= 1 << (r % 8)
	return nil
}

// isDead reports whether row r is marked in a dead-row mark (nil: none).
func isDead(mark []byte, r int) bool {
	return len(mark) > markHeader+r/8 && mark[markHeader+r/8]&(1<<(r%8)) != 0
}

// allDead reports whether every row of the mark's block is dead.
func allDead(mark []byte) bool {
	if len(mark) < markHeader {
		return false
	}
	dead := 0
	for _, b := range mark[markHeader:] {
		dead += bits.OnesCount8(b)
	}
	return dead == int(binary.BigEndian.Uint32(mark))
}

// PrimaryKey returns the table's primary key columns (nil: append-only).
func (t *Table) PrimaryKey() []string { return slices.Clone(t.key) } // immutable

// Lookup returns the current row of the key whose primary key columns hold
// key (in PrimaryKey's order), or ok false when the key has no row: never
// written, deleted, or its row expired (TTL) or removed. The row holds
// every column of the schema that is not hidden.
func (t *Table) Lookup(ctx context.Context, key []any) (row Row, ok bool, err error) {
	if len(t.key) == 0 {
		return nil, false, fmt.Errorf("table %s: lookup: %w", t.name, errors.New("the table has no primary key"))
	}
	if len(key) != len(t.key) {
		return nil, false, fmt.Errorf("table %s: lookup: %d key values for %d key columns", t.name, len(key), len(t.key))
	}
	release, err := t.store.use()
	if err != nil {
		return nil, false, err
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	schema, _ := t.current()
	cols := make([]colData, len(key))
	keyCols := make([]int, len(key))
	for i, name := range t.key {
		typ := String
		if j := slices.IndexFunc(schema, func(c Column) bool { return c.Name == name }); j >= 0 {
			typ = schema[j].Type
		}
		cols[i] = colData{name: name, typ: typ, vals: make([]value, 1), null: []bool{key[i] == nil}}
		if key[i] != nil {
			v, err := coerce(key[i], typ)
			if err != nil {
				return nil, false, fmt.Errorf("table %s: lookup: %w: key column %q: %w", t.name, ErrBadQuery, name, err)
			}
			cols[i].vals[0] = v
		}
		keyCols[i] = i
	}
	kb, _, ok := keyBytes(nil, cols, keyCols, 0)
	if !ok {
		return nil, false, nil // a key with a null column is never stored
	}
	snap := t.store.db.NewSnapshot()
	defer snap.Close()
	ik := keyIndexKey(nil, t.id, kb)
	v, closer, err := snap.Get(ik)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("table %s: lookup: %w", t.name, err)
	}
	s, err := decodeEntry(ik, v)
	closer.Close()
	if err != nil || !s.live {
		return nil, false, err
	}
	bk := blockKey(nil, t.id, s.loc.hash, s.loc.minTime, s.loc.seq)
	bv, closer, err := snap.Get(bk)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil // expired or removed with its block
	}
	if err != nil {
		return nil, false, fmt.Errorf("table %s: lookup: %w", t.name, err)
	}
	defer closer.Close()
	p, err := t.plan(Query{})
	if err != nil {
		return nil, false, err
	}
	var dec blockDecoder
	if err := dec.decode(bk, bv, func(name string) bool { _, ok := p.types[name]; return ok }); err != nil {
		return nil, false, fmt.Errorf("table %s: lookup: %w", t.name, err)
	}
	if s.loc.row >= dec.rows {
		return nil, false, fmt.Errorf("table %s: lookup: %w", t.name, &CorruptionError{Key: ik, Reason: "key index points past its block's rows"})
	}
	row = Row{}
	var b boxer
	for i := range dec.n {
		c := &dec.cols[i]
		c.convert(p.types[c.name], dec.rows)
		if c.name == p.timeName && c.ints[s.loc.row] < p.from {
			return nil, false, nil // older than the TTL: hidden, as from queries
		}
		b.reset(c, dec.rows)
		row[c.name] = b.at(s.loc.row)
	}
	for _, o := range p.out {
		if _, ok := row[o.name]; !ok {
			row[o.name] = nil
		}
	}
	return row, true, nil
}

// validateKey checks a primary key against the table's config.
func validateKey(cfg Config) error {
	seen := map[string]bool{}
	for _, k := range cfg.PrimaryKey {
		switch {
		case k == "" || seen[k]:
			return fmt.Errorf("table %s: primary key column %q: empty or duplicate", cfg.Name, k)
		case Hidden(k):
			return fmt.Errorf("table %s: primary key column %q: a hidden column (%s...) cannot be a key", cfg.Name, k, HiddenPrefix)
		case len(cfg.Columns) > 0 && !slices.ContainsFunc(cfg.Columns, func(c Column) bool { return c.Name == k }):
			return fmt.Errorf("table %s: primary key column %q is not in the static schema", cfg.Name, k)
		}
		seen[k] = true
	}
	return nil
}

// touchedKey is a key a part changed, with its state in the batch.
type touchedKey struct {
	key string
	s   *keyState
}

// writeScratch holds the slices one keyedBatch.write needs, reused across
// appends: a keyed append made about 700 kB of garbage per 1000 rows (the
// copy of the rows it keeps above all), and the collector's work was a
// tenth of the append's CPU.
type writeScratch struct {
	ends     []int
	keys     []string
	touched  []touchedKey
	dead     []rowLoc
	dels     []int
	keep     []int
	kept     []colData
	vals     [][]value // kept[i]'s values
	null     [][]bool  // kept[i]'s nulls
	locs     []rowLoc
	markKeys []string
}

var writeScratches = sync.Pool{New: func() any { return new(writeScratch) }}

func getWriteScratch() *writeScratch { return writeScratches.Get().(*writeScratch) }

// putWriteScratch gives sc back, with the strings it points to cleared so
// that a pooled scratch keeps no part's keys or values alive.
func putWriteScratch(sc *writeScratch) {
	clear(sc.keys)
	clear(sc.touched)
	clear(sc.markKeys)
	for _, v := range sc.vals {
		clear(v)
	}
	clear(sc.kept)
	writeScratches.Put(sc)
}
