package table

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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

// Bounds of the rewrite's work: the live rows of one merged block, the
// blocks read for one merge (decoded at once), and the rows written and
// blocks read by one batch (one key-lock hold, one fsync).
const (
	maxMergedRows   = 1 << 13
	maxMergeBlocks  = 128
	maxBatchRows    = 1 << 16
	maxBatchMembers = 512
)

// RewriteSparseBlocks rewrites the table's sparse blocks (at least three
// quarters of their rows dead) with their live rows only, and deletes the
// blocks whose rows are all dead; it returns how many blocks it rewrote or
// deleted. It does nothing for a table without a primary key.
//
// A sparse block whose sequence is at or above mergeBelow is stored again
// under its own key. Those below it are merged with the other sparse
// blocks below it of their partition and time bucket into blocks of up to
// a few thousand rows, under the highest sequence of the blocks merged:
// fewer blocks for a query to decode. The caller passes the sequence
// below which no reader tells blocks apart by sequence: a cold tier's
// committed mark (its cursor never reads below it again), math.MaxUint64
// for a table without a cold tier, 0 to merge nothing. Merging blocks on
// both sides of a cursor would show rows already moved out as new ones.
//
// The blocks are rewritten in batches of a few hundred, each one synced
// batch under the table's key lock, so appends wait for one batch at a
// time, not for the pass.
func (t *Table) RewriteSparseBlocks(ctx context.Context, mergeBelow uint64) (blocks int, err error) {
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
	units := t.rewriteUnits(keys, mergeBelow)
	for len(units) > 0 {
		n, done, err := t.rewriteBatch(ctx, units)
		blocks += n
		if err != nil {
			for _, u := range units {
				t.sparse.giveBack(u, false)
			}
			return blocks, err
		}
		units = units[done:]
	}
	return blocks, nil
}

// rewriteBuiltHook, when set (tests only), runs in a rewrite after it
// built its batch, before the commit: a test queries and appends there.
var rewriteBuiltHook func()

// rewriteUnits groups sparse blocks (dead keys, in order) into units, each
// rewritten into one block: one block at or above mergeBelow, or the
// blocks below it of one partition and time bucket (up to maxMergeBlocks).
func (t *Table) rewriteUnits(keys []string, mergeBelow uint64) [][]string {
	var units [][]string
	var group []string
	var gHash uint64
	var gBucket int64
	for _, dk := range keys {
		_, hash, minTime, seq, ok := parseBlockKey(append([]byte{prefixBlock}, dk[1:]...))
		if !ok || seq >= mergeBelow {
			units = append(units, []string{dk})
			continue
		}
		bucket := floorTime(minTime, t.span)
		if len(group) > 0 && (hash != gHash || bucket != gBucket || len(group) >= maxMergeBlocks) {
			units = append(units, group)
			group = nil
		}
		group = append(group, dk)
		gHash, gBucket = hash, bucket
	}
	if len(group) > 0 {
		units = append(units, group)
	}
	return units
}

// member is a block read for a rewrite: its key, its mark's key, where it
// is (its rows' index entries point there), and its live rows.
type member struct {
	dk, bk []byte
	loc    rowLoc
	dec    blockDecoder
	live   []int
}

// rewriteBatch rewrites units from the first on in one synced batch, as
// many as its bounds allow: it returns the blocks rewritten or deleted
// and the units done.
func (t *Table) rewriteBatch(ctx context.Context, units [][]string) (blocks, done int, err error) {
	kb := newKeyedBatch(t)
	if err := kb.lock(ctx); err != nil {
		return 0, 0, err
	}
	defer kb.unlock()
	snap := t.store.db.NewSnapshot()
	defer snap.Close()
	b := t.store.db.NewBatch()
	defer b.Close()
	moved := map[string]*keyState{}
	var dropped []string
	rows, read := 0, 0
	for done < len(units) && read < maxBatchMembers && rows < maxBatchRows {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		members, err := t.readMembers(snap, units[done])
		if err != nil {
			return 0, 0, wrapRewrite(t, err)
		}
		done++
		read += len(units[done-1])
		for _, out := range mergeRuns(members) {
			n, err := t.writeMerged(snap, b, out, moved)
			if err != nil {
				return 0, 0, wrapRewrite(t, err)
			}
			rows += n
			for _, m := range out {
				dropped = append(dropped, string(m.dk))
			}
			blocks += len(out)
		}
	}
	if blocks == 0 {
		return 0, done, nil
	}
	if rewriteBuiltHook != nil {
		rewriteBuiltHook()
	}
	n := rewriteCommits.Add(1)
	fault("rewrite-before-commit", n)
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, 0, wrapRewrite(t, err)
	}
	// After the commit and under the key lock, as an append's: the caches
	// never hold what the store does not.
	for _, dk := range dropped {
		t.marks.drop(dk)
	}
	t.entries.put(moved)
	fault("rewrite-after-commit", n)
	return blocks, done, nil
}

// readMembers reads the blocks of a unit that are still sparse blocks of
// the table (an append may have rewritten a mark since it was noted; a
// block may have been removed or be past the TTL).
func (t *Table) readMembers(snap *pebble.Snapshot, unit []string) ([]*member, error) {
	ttlCut := int64(math.MinInt64)
	if ttl := time.Duration(t.ttl.Load()); ttl > 0 {
		ttlCut = floorTime(t.store.opts.Now().Add(-ttl).UnixNano(), t.span)
	}
	var members []*member
	for _, dk := range unit {
		stored, err := getClone(snap, []byte(dk))
		if err != nil {
			return nil, err
		}
		mark, err := markBits(nil, stored)
		if err != nil {
			return nil, &CorruptionError{Key: []byte(dk), Reason: err.Error()}
		}
		if mark == nil || !sparse(mark) {
			continue
		}
		m := &member{dk: []byte(dk), bk: append([]byte{prefixBlock}, dk[1:]...)}
		_, hash, minTime, seq, ok := parseBlockKey(m.bk)
		if !ok {
			return nil, &CorruptionError{Key: m.dk, Reason: "dead-row mark key is not a block's"}
		}
		if minTime < ttlCut {
			continue // past the TTL: the expiry takes it whole
		}
		m.loc = rowLoc{hash: hash, minTime: minTime, seq: seq}
		val, err := getClone(snap, m.bk)
		if err != nil {
			return nil, err
		}
		if val == nil {
			continue // removed (its mark goes with it)
		}
		if err := m.dec.decode(m.bk, val, func(string) bool { return true }); err != nil {
			return nil, err
		}
		if rows := int(binary.BigEndian.Uint32(mark)); rows != m.dec.rows {
			return nil, &CorruptionError{Key: m.dk, Reason: fmt.Sprintf("dead-row mark of %d rows for a block of %d", rows, m.dec.rows)}
		}
		m.loc.rows = m.dec.rows
		for r := range m.dec.rows {
			if !isDead(mark, r) {
				m.live = append(m.live, r)
			}
		}
		members = append(members, m)
	}
	return members, nil
}

// mergeRuns splits a unit's members into the runs each written as one
// block: consecutive members with the same columns (a widened schema
// leaves blocks of other types), up to maxMergedRows live rows.
func mergeRuns(members []*member) [][]*member {
	var runs [][]*member
	var run []*member
	rows := 0
	for _, m := range members {
		if len(run) > 0 && (rows+len(m.live) > maxMergedRows || !sameBlockColumns(&run[0].dec, &m.dec)) {
			runs = append(runs, run)
			run, rows = nil, 0
		}
		run = append(run, m)
		rows += len(m.live)
	}
	if len(run) > 0 {
		runs = append(runs, run)
	}
	return runs
}

func sameBlockColumns(a, b *blockDecoder) bool {
	if a.n != b.n {
		return false
	}
	for i := range a.n {
		if a.cols[i].name != b.cols[i].name || a.cols[i].typ != b.cols[i].typ {
			return false
		}
	}
	return true
}

// liveRow is a row of a rewritten block: its member and row there.
type liveRow struct {
	m   *member
	row int
}

// writeMerged puts into b the block of the live rows of run (the first
// member's key when it is alone, else a key under the highest sequence of
// the run), the deletion of the run's blocks and marks, and the index
// entries of the rows that moved (added to moved); it returns the rows
// written.
func (t *Table) writeMerged(snap *pebble.Snapshot, b *pebble.Batch, run []*member, moved map[string]*keyState) (int, error) {
	for _, m := range run {
		if err := b.Delete(m.dk, nil); err != nil {
			return 0, err
		}
		if len(run) > 1 || len(m.live) == 0 {
			if err := b.Delete(m.bk, nil); err != nil {
				return 0, err
			}
		}
	}
	var rows []liveRow
	for _, m := range run {
		for _, r := range m.live {
			rows = append(rows, liveRow{m, r})
		}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	cols := liveColumns(run, rows)
	timeCol := slices.IndexFunc(cols, func(c colData) bool { return c.name == t.sortBy })
	if timeCol < 0 {
		return 0, &CorruptionError{Key: run[0].bk, Reason: "block lacks the time column"}
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	at := rowLoc{hash: run[0].loc.hash, minTime: run[0].loc.minTime, seq: run[0].loc.seq, rows: len(rows)}
	bk := run[0].bk
	if len(run) > 1 {
		// A block's rows are in time order, its key has the first one's.
		times := cols[timeCol].vals
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(times[a].i, times[b].i) })
		at.minTime = times[idx[0]].i
		for _, m := range run {
			at.seq = max(at.seq, m.loc.seq)
		}
		bk = blockKey(nil, t.id, at.hash, at.minTime, at.seq)
	}
	if textBytes(cols, idx) >= hugeBlockBytes {
		if _, err := setHugeBlock(b, bk, cols, idx); err != nil {
			return 0, err
		}
	} else if err := b.Set(bk, compressBlock(nil, encodeBlock(nil, cols, idx)), nil); err != nil {
		return 0, err
	}
	// Row j of the new block is rows[idx[j]].
	placed := make([]liveRow, len(rows))
	for j, i := range idx {
		placed[j] = rows[i]
	}
	if err := t.moveEntries(snap, b, cols, idx, placed, at, moved); err != nil {
		return 0, err
	}
	return len(rows), nil
}

// liveColumns are the rows of a run's blocks as the columns an append
// encodes (in the blocks' order and types: the rewrite changes no value).
func liveColumns(run []*member, rows []liveRow) []colData {
	first := &run[0].dec
	cols := make([]colData, first.n)
	for i := range first.n {
		c0 := &first.cols[i]
		cd := colData{name: c0.name, typ: c0.typ, vals: make([]value, len(rows)), null: make([]bool, len(rows))}
		for j, lr := range rows {
			c := &lr.m.dec.cols[i]
			if c.isNull(lr.row) {
				cd.null[j] = true
				continue
			}
			switch {
			case c.typ == Float64:
				cd.vals[j] = floatValue(c.floats[lr.row])
			case holdsText(c.typ):
				cd.vals[j].s = c.strs[lr.row]
			default: // the types held in ints: dates, times, decimals too
				cd.vals[j].i = c.ints[lr.row]
			}
		}
		cols[i] = cd
	}
	return cols
}

// moveEntries puts into b, in key order, the index entries of the keys
// whose row is one of placed (row j of the new block at at, which holds
// rows idx[j] of cols) and adds them to moved. A live row whose key's
// entry points elsewhere keeps its place among the rows and no entry
// changes.
func (t *Table) moveEntries(snap *pebble.Snapshot, b *pebble.Batch, cols []colData, idx []int, placed []liveRow, at rowLoc, moved map[string]*keyState) error {
	keyCols := make([]int, len(t.key))
	for i, name := range t.key {
		keyCols[i] = slices.IndexFunc(cols, func(c colData) bool { return c.name == name })
	}
	type movedRow struct {
		key string
		row int // in the new block
	}
	rows := make([]movedRow, 0, len(idx))
	var kb []byte
	for j, i := range idx {
		k, _, ok := keyBytes(kb[:0], cols, keyCols, i)
		kb = k
		if ok { // a stored row always has its key; one without is in no entry
			rows = append(rows, movedRow{string(k), j})
		}
	}
	slices.SortFunc(rows, func(a, b movedRow) int { return strings.Compare(a.key, b.key) })
	lo, hi := keyIndexBounds(t.id)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	var ik, ev []byte
	for _, mr := range rows {
		ik = keyIndexKey(ik[:0], t.id, []byte(mr.key))
		if !it.SeekGE(ik) || string(it.Key()) != string(ik) {
			continue
		}
		s, err := decodeEntry(ik, it.Value())
		if err != nil {
			return err
		}
		from := placed[mr.row]
		if !s.live || s.loc.hash != from.m.loc.hash || s.loc.minTime != from.m.loc.minTime || s.loc.seq != from.m.loc.seq || s.loc.row != from.row {
			continue
		}
		s.loc = at
		s.loc.row = mr.row
		ev = encodeEntry(ev[:0], &s)
		if err := b.Set(ik, ev, nil); err != nil {
			return err
		}
		moved[mr.key] = &s
	}
	return it.Error()
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
		mark, err := markBits(nil, it.Value()) // a full pass is rare: after an open
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.name, &CorruptionError{Key: slices.Clone(it.Key()), Reason: err.Error()})
		}
		if sparse(mark) {
			keys = append(keys, string(it.Key()))
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("table %s: read dead-row marks: %w", t.name, err)
	}
	return keys, nil
}
