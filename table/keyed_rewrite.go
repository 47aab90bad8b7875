package table

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
)

// A keyed table's blocks keep the rows that later changes superseded (the
// dead-row marks hide them): a query decodes a block whole, so a block of
// a few live rows among many dead ones costs it as much as a full one. The
// table rewrites such blocks (RewriteSparseBlocks): the live rows are
// encoded again into a block stored under the same key, and that block, the
// deletion of the old block's mark and the index entries of the rows (their
// row numbers changed) are one synced batch.
//
// The rewritten block keeps its key, so its sequence number: a cold tier
// that moves blocks out by sequence (a compaction mark, a cursor above it)
// sees the rewritten block where it saw the old one. Below the mark its
// rows were moved out already and are not read again; at or above it the
// rows not moved out yet are still there, under the sequence the cursor
// will read. A run in flight reads a point-in-time view: the old block with
// its mark, whose live rows are the rewritten block's or more (rows only
// die), so deleting the block after the run loses nothing it did not read.

// A block is sparse when at least sparseDead of every sparseOf of its rows
// are dead.
const (
	sparseDead = 3
	sparseOf   = 4
)

// maxSparseNoted bounds the blocks noted for a rewrite between two passes;
// past it the next pass reads every mark instead.
const maxSparseNoted = 1 << 14

// sparse reports whether a dead-row mark's block is sparse.
func sparse(mark []byte) bool {
	if len(mark) < markHeader {
		return false
	}
	rows := int(binary.BigEndian.Uint32(mark))
	return rows > 0 && deadRows(mark)*sparseOf >= rows*sparseDead
}

// deadRows counts the rows a mark marks.
func deadRows(mark []byte) int {
	b := mark[markHeader:]
	n := 0
	for len(b) >= 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return n
}

// sparseBlocks are the blocks (their dead keys) that appends made sparse
// since the last rewrite pass. The set starts empty at each open with scan
// set: the marks written before the open are found by reading them all.
type sparseBlocks struct {
	mu    sync.Mutex
	noted map[string]struct{}
	scan  bool // read every mark: after an open, or when the set was full
}

// note adds dead keys to the set (after the commit that made them sparse).
func (s *sparseBlocks) note(keys []string) {
	if s == nil || len(keys) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scan {
		return // the next pass reads every mark anyway
	}
	if s.noted == nil {
		s.noted = map[string]struct{}{}
	}
	for _, k := range keys {
		if _, ok := s.noted[k]; ok {
			continue
		}
		if len(s.noted) >= maxSparseNoted {
			s.noted, s.scan = nil, true
			return
		}
		s.noted[strings.Clone(k)] = struct{}{} // an append's keys are substrings of one string
	}
}

// take empties the set and returns its keys in order (scan: read every
// mark instead).
func (s *sparseBlocks) take() (keys []string, scan bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.noted {
		keys = append(keys, k)
	}
	scan = s.scan
	s.noted, s.scan = nil, false
	slices.Sort(keys)
	return keys, scan
}

// giveBack notes again the keys a pass did not get to (it failed).
func (s *sparseBlocks) giveBack(keys []string, scan bool) {
	if scan {
		s.mu.Lock()
		s.noted, s.scan = nil, true
		s.mu.Unlock()
		return
	}
	s.note(keys)
}

// rewriteCommits counts the rewrites' commits in this process, for FaultEnv
// ("rewrite-before-commit:N", "rewrite-after-commit:N").
var rewriteCommits atomic.Int64

// RewriteSparseBlocks rewrites the table's sparse blocks (at least three
// quarters of their rows dead) with their live rows only, and deletes the
// blocks whose rows are all dead; it returns how many blocks it rewrote or
// deleted. Each block is one synced batch under the table's key lock, so
// appends wait for one block at a time, not for the pass. It does nothing
// for a table without a primary key.
func (t *Table) RewriteSparseBlocks(ctx context.Context) (blocks int, err error) {
	if t.key == nil {
		return 0, nil
	}
	release, err := t.store.use()
	if err != nil {
		return 0, err
	}
	defer release()
	keys, scan := t.sparse.take()
	if scan {
		if keys, err = t.sparseMarks(ctx); err != nil {
			t.sparse.giveBack(nil, true)
			return 0, err
		}
	}
	for i, dk := range keys {
		done, err := t.rewriteBlock(ctx, dk)
		if err != nil {
			t.sparse.giveBack(keys[i:], false)
			return blocks, err
		}
		if done {
			blocks++
		}
	}
	return blocks, nil
}

// sparseMarks reads every mark of the table and returns the dead keys of
// the sparse blocks, in order.
func (t *Table) sparseMarks(ctx context.Context) ([]string, error) {
	lo, hi := deadBounds(t.id)
	it, err := t.store.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("table %s: read dead-row marks: %w", t.name, err)
	}
	defer it.Close()
	var keys []string
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if sparse(it.Value()) {
			keys = append(keys, string(it.Key()))
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("table %s: read dead-row marks: %w", t.name, err)
	}
	return keys, nil
}

// rewriteBlock rewrites the block of the mark at dk if it is (still) a
// sparse block of the table; done reports whether it did.
func (t *Table) rewriteBlock(ctx context.Context, dk string) (done bool, err error) {
	kb := newKeyedBatch(t)
	if err := kb.lock(ctx); err != nil {
		return false, err
	}
	defer kb.unlock()
	snap := t.store.db.NewSnapshot()
	defer snap.Close()
	mark, err := getClone(snap, []byte(dk))
	if err != nil || mark == nil || !sparse(mark) {
		return false, wrapRewrite(t, err)
	}
	bk := append([]byte{prefixBlock}, dk[1:]...)
	_, hash, minTime, seq, ok := parseBlockKey(bk)
	if !ok {
		return false, wrapRewrite(t, &CorruptionError{Key: []byte(dk), Reason: "dead-row mark key is not a block's"})
	}
	if ttl := time.Duration(t.ttl.Load()); ttl > 0 && minTime < floorTime(t.store.opts.Now().Add(-ttl).UnixNano(), t.span) {
		return false, nil // past the TTL: the expiry takes it whole
	}
	val, err := getClone(snap, bk)
	if err != nil || val == nil {
		return false, wrapRewrite(t, err) // removed meanwhile (its mark goes with it)
	}
	var dec blockDecoder
	if err := dec.decode(bk, val, func(string) bool { return true }); err != nil {
		return false, wrapRewrite(t, err)
	}
	if int(binary.BigEndian.Uint32(mark)) != dec.rows {
		return false, wrapRewrite(t, &CorruptionError{Key: []byte(dk), Reason: fmt.Sprintf("dead-row mark of %d rows for a block of %d", binary.BigEndian.Uint32(mark), dec.rows)})
	}
	var live []int
	for r := range dec.rows {
		if !isDead(mark, r) {
			live = append(live, r)
		}
	}
	b := t.store.db.NewBatch()
	defer b.Close()
	moved := map[string]*keyState{}
	if len(live) == 0 {
		if err := b.Delete(bk, nil); err != nil {
			return false, wrapRewrite(t, err)
		}
	} else {
		cols := liveColumns(&dec, live)
		if moved, err = t.movedEntries(snap, cols, len(live), rowLoc{hash: hash, minTime: minTime, seq: seq}, live, b); err != nil {
			return false, wrapRewrite(t, err)
		}
		idx := make([]int, len(live))
		for i := range idx {
			idx[i] = i
		}
		if textBytes(cols, idx) >= hugeBlockBytes {
			if _, err := setHugeBlock(b, bk, cols, idx); err != nil {
				return false, wrapRewrite(t, err)
			}
		} else if err := b.Set(bk, compressBlock(nil, encodeBlock(nil, cols, idx)), nil); err != nil {
			return false, wrapRewrite(t, err)
		}
	}
	if err := b.Delete([]byte(dk), nil); err != nil {
		return false, wrapRewrite(t, err)
	}
	n := rewriteCommits.Add(1)
	fault("rewrite-before-commit", n)
	if err := b.Commit(pebble.Sync); err != nil {
		return false, wrapRewrite(t, err)
	}
	// After the commit and under the key lock, as an append's: the caches
	// never hold what the store does not.
	t.marks.drop(dk)
	t.entries.put(moved)
	fault("rewrite-after-commit", n)
	return true, nil
}

func wrapRewrite(t *Table, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("table %s: rewrite a sparse block: %w", t.name, err)
}

// getClone reads key from snap (nil: absent).
func getClone(snap *pebble.Snapshot, key []byte) ([]byte, error) {
	v, closer, err := snap.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// liveColumns are the rows live of a decoded block, as the columns an
// append encodes (in the block's order and types: the rewrite changes no
// value).
func liveColumns(dec *blockDecoder, live []int) []colData {
	cols := make([]colData, dec.n)
	for i := range dec.n {
		c := &dec.cols[i]
		cd := colData{name: c.name, typ: c.typ, vals: make([]value, len(live)), null: make([]bool, len(live))}
		for j, r := range live {
			if c.isNull(r) {
				cd.null[j] = true
				continue
			}
			switch c.typ {
			case Int64, Timestamp, Bool:
				cd.vals[j].i = c.ints[r]
			case Float64:
				cd.vals[j] = floatValue(c.floats[r])
			default:
				cd.vals[j].s = c.strs[r]
			}
		}
		cols[i] = cd
	}
	return cols
}

// movedEntries puts into b the index entries of the keys whose row is one
// of live (row numbers of the block at old) and moves to its place in the
// rewritten block (row j of cols, n rows), in key order, and returns them.
// A live row whose key's entry points elsewhere keeps its place in the
// rows and no entry changes.
func (t *Table) movedEntries(snap *pebble.Snapshot, cols []colData, n int, old rowLoc, live []int, b *pebble.Batch) (map[string]*keyState, error) {
	keyCols := make([]int, len(t.key))
	for i, name := range t.key {
		keyCols[i] = slices.IndexFunc(cols, func(c colData) bool { return c.name == name })
	}
	type movedRow struct {
		key string
		row int // in the rewritten block
	}
	rows := make([]movedRow, 0, n)
	var kb []byte
	for j := range n {
		k, _, ok := keyBytes(kb[:0], cols, keyCols, j)
		kb = k
		if ok { // a stored row always has its key; one without is in no entry
			rows = append(rows, movedRow{string(k), j})
		}
	}
	slices.SortFunc(rows, func(a, b movedRow) int { return strings.Compare(a.key, b.key) })
	lo, hi := keyIndexBounds(t.id)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	moved := make(map[string]*keyState, len(rows))
	var ik, ev []byte
	for _, mr := range rows {
		ik = keyIndexKey(ik[:0], t.id, []byte(mr.key))
		if !it.SeekGE(ik) || string(it.Key()) != string(ik) {
			continue
		}
		s, err := decodeEntry(ik, it.Value())
		if err != nil {
			return nil, err
		}
		if !s.live || s.loc.hash != old.hash || s.loc.minTime != old.minTime || s.loc.seq != old.seq || s.loc.row != live[mr.row] {
			continue
		}
		s.loc.row, s.loc.rows = mr.row, n
		ev = encodeEntry(ev[:0], &s)
		if err := b.Set(ik, ev, nil); err != nil {
			return nil, err
		}
		moved[mr.key] = &s
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	return moved, nil
}
