package table

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
)

// What the cold tier (package coldtier) needs of a table: a compaction run
// fixes the set of blocks it moves out by a time cut and a sequence bound,
// reads exactly those blocks, and later deletes exactly those blocks, so
// that a block written while the run was in flight (a late row) is neither
// deleted unread nor read twice.

// BlockRange returns the earliest event time bucket and the highest
// sequence number of the blocks whose time bucket ends at or before before
// (the blocks DeleteBlocks(before, seq) would take); blocks is 0 when there
// are none. It reads keys only.
//
// It first waits for every append that had reserved sequence numbers to
// commit or fail, and then counts only blocks with sequences handed out
// before it was called: without that, an append that reserved sequence 100
// and committed after one that reserved 101 could be below the returned
// high yet missing from the run's read, and DeleteBlocks would delete it
// unread. Appends are not blocked meanwhile; the wait is as long as the
// appends that were already in flight.
func (t *Table) BlockRange(ctx context.Context, before time.Time) (first time.Time, high uint64, blocks int, err error) {
	settled, err := t.store.waitSeqs(ctx)
	if err != nil {
		return first, 0, 0, err
	}
	minTime := int64(math.MaxInt64)
	err = t.eachBlockBefore(ctx, before, func(key []byte, seq uint64) error {
		if seq >= settled {
			return nil // written since the call: the next run's
		}
		_, _, mt, _, _ := parseBlockKey(key)
		minTime = min(minTime, mt)
		high = max(high, seq)
		blocks++
		return nil
	})
	if blocks > 0 {
		first = time.Unix(0, floorTime(minTime, t.span)).UTC()
	}
	return first, high, blocks, err
}

// ShrinkCache shrinks the store's block cache to about keep bytes until
// restore is called, evicting what it holds beyond that. A compaction run
// reads (twice: BlockRange and the rows) and then deletes every block
// before its watermark; through the full cache those blocks, about to be
// deleted, would take up to the whole cache's size in memory for the
// run's length, on top of the run's own buffers. Shrunk, they evict each
// other. Queries meanwhile get the smaller cache. Calls nest (several
// tables compacting at once): the cache gets its size back when the last
// restore is called. The cache's memory is Pebble's own (outside the Go
// heap), released to the C allocator as blocks are evicted.
func (t *Table) ShrinkCache(keep int64) (restore func()) {
	s := t.store
	release, err := s.use()
	if err != nil { // closed: the cache went with the database
		return func() {}
	}
	defer release()
	s.shrinkMu.Lock()
	defer s.shrinkMu.Unlock()
	if s.shrinks == 0 {
		s.shrinkRelease = s.cache.Reserve(int(max(s.cache.MaxSize()-keep, 0)))
	}
	s.shrinks++
	var once sync.Once
	return func() {
		once.Do(func() {
			release, err := s.use()
			if err != nil {
				return
			}
			defer release()
			s.shrinkMu.Lock()
			defer s.shrinkMu.Unlock()
			if s.shrinks--; s.shrinks == 0 {
				s.shrinkRelease()
				s.shrinkRelease = nil
			}
		})
	}
}

// QueryValuesBelow is QueryValues over the blocks whose sequence is below
// seqLimit (seqLimit 0 means every block, like QueryValues); a compaction
// that read the blocks with sequence <= S passes S+1.
func (t *Table) QueryValuesBelow(ctx context.Context, q Query, seqLimit uint64, emit func(cols []Column, vals []any) error) error {
	var cols []Column
	return t.queryBelow(ctx, q, seqLimit, func(p *plan, vals []any) error {
		if cols == nil {
			cols = make([]Column, len(p.out))
			for i, c := range p.out {
				cols[i] = Column{Name: c.name, Type: c.typ}
			}
		}
		return emit(cols, vals)
	})
}

// deleteBatchBlocks bounds the point deletions of one DeleteBlocks batch.
const deleteBatchBlocks = 1 << 16

// DeleteBlocks deletes the blocks whose time bucket ends at or before
// before and whose sequence is at most maxSeq, one point deletion per
// block, in synced batches of up to 65536 blocks. Blocks written later
// (higher sequence) stay. Running it again after a crash finishes the
// work: it is idempotent.
func (t *Table) DeleteBlocks(ctx context.Context, before time.Time, maxSeq uint64) (blocks int, err error) {
	b := t.store.db.NewBatch()
	defer func() { b.Close() }()
	commit := func() error {
		if b.Empty() {
			return nil
		}
		if err := t.store.commitSync(b, true); err != nil {
			return fmt.Errorf("table %s: delete compacted blocks: %w", t.name, err)
		}
		b.Close()
		b = t.store.db.NewBatch()
		return nil
	}
	err = t.eachBlockBefore(ctx, before, func(key []byte, seq uint64) error {
		if seq > maxSeq {
			return nil
		}
		if err := b.Delete(key, nil); err != nil {
			return err
		}
		if t.key != nil { // its dead-row mark goes with it
			if err := b.Delete(deadKey(nil, key), nil); err != nil {
				return err
			}
		}
		blocks++
		if blocks%deleteBatchBlocks == 0 {
			return commit()
		}
		return nil
	})
	if err != nil {
		return blocks, err
	}
	return blocks, commit()
}

// eachBlockBefore calls f with the key and sequence of every block whose
// bucket ends at or before before, partition by partition (a skip scan).
func (t *Table) eachBlockBefore(ctx context.Context, before time.Time, f func(key []byte, seq uint64) error) error {
	if before.Year() < 1678 {
		return nil
	}
	ns := int64(math.MaxInt64)
	if before.Year() < 2262 {
		ns = before.UnixNano()
	}
	return t.eachBlockBetween(ctx, math.MinInt64, floorTime(ns, t.span), f)
}

// eachBlockBetween calls f with the key and sequence of every block whose
// first event time is in [from, cut), partition by partition (a skip scan
// seeking to from in each).
func (t *Table) eachBlockBetween(ctx context.Context, from, cut int64, f func(key []byte, seq uint64) error) error {
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	lo, hi := tableBounds(t.id)
	it, err := t.store.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, h, minTime, seq, ok := parseBlockKey(it.Key())
		if !ok {
			return &CorruptionError{Key: slices.Clone(it.Key()), Reason: "not a block key"}
		}
		if minTime < from {
			it.SeekGE(partitionKey(t.id, h, from))
			continue
		}
		if minTime < cut {
			if err := f(slices.Clone(it.Key()), seq); err != nil {
				return err
			}
			it.Next()
			continue
		}
		if h == math.MaxUint64 {
			break
		}
		it.SeekGE(partitionKey(t.id, h+1, math.MinInt64))
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("table %s: scan blocks: %w", t.name, err)
	}
	return nil
}

// Source columns. A row a stream source stored carries where it came from,
// so that the cold tier can commit each message's rows once across nodes
// whose stores overlap (docs/cold-tier.md, "Each row once across nodes"):
//
//   - SourceBatchColumn: "<source>@<first>-<end>", the source partition
//     (e.g. "kafka/events/3/<topic id>") and the offsets [first, end) of the
//     stored batch the row came from (one Pebble batch with its position);
//   - SourceOffsetColumn: the offset (Kafka) or stream sequence (NATS) of
//     the row's message.
//
// OperationColumn is what a row does to its key in a table with a primary
// key (docs/upserts.md): OperationDelete removes the key's row; any other
// value, or none, makes the row the key's latest state. Decoders of change
// streams (Debezium envelopes, an operation field, Kafka tombstones, an
// HTTP delete body) set it; the store reads it and does not keep it.
//
// Columns whose name starts with HiddenPrefix are hidden: a query that
// names no columns does not return them, a static schema takes them
// without listing them, and the cold tier does not write them to Iceberg.
const (
	HiddenPrefix       = "_sluice_"
	SourceBatchColumn  = HiddenPrefix + "batch"
	SourceOffsetColumn = HiddenPrefix + "offset"
	OperationColumn    = HiddenPrefix + "op"

	// OperationDelete is the OperationColumn value of a row that deletes
	// its key; the row's other columns than the key's are ignored.
	OperationDelete = "delete"
)

// Hidden reports whether the column name is one of sluice's own (see
// HiddenPrefix).
func Hidden(name string) bool { return strings.HasPrefix(name, HiddenPrefix) }

// keepHidden is schema (a static schema from the config) with the hidden
// columns of stored added at its end: the rows already stored keep them.
func keepHidden(schema, stored []Column) []Column {
	for _, c := range stored {
		if Hidden(c.Name) && !slices.ContainsFunc(schema, func(s Column) bool { return s.Name == c.Name }) {
			schema = append(schema, c)
		}
	}
	return schema
}

// addHidden adds the hidden column name (with v's type) to a static schema
// (cloned once: changed says whether it is a copy already).
func addHidden(table string, schema []Column, changed bool, row int, name string, v any) ([]Column, bool, error) {
	if v == nil || slices.ContainsFunc(schema, func(s Column) bool { return s.Name == name }) {
		return schema, changed, nil
	}
	vt, ok := inferType(v)
	if !ok {
		return nil, false, &SchemaError{Table: table, Row: row, Column: name, Reason: fmt.Sprintf("unsupported value type %T", v)}
	}
	if !changed {
		schema = slices.Clone(schema)
	}
	return append(schema, Column{Name: name, Type: vt}), true, nil
}

// committedPrefix keys a table's committed-sequence mark: 0x01 'c' name.
const committedPrefix = "\x01c"

// CommittedSeq returns the table's committed-sequence mark: every block
// with a lower sequence is in the cold tier (0: none recorded). A cold tier
// that commits by sequence (continuous) keeps blocks after their commit
// and uses the mark to leave them out of the hot side of a query.
func (t *Table) CommittedSeq() (uint64, error) {
	release, err := t.store.use()
	if err != nil {
		return 0, err
	}
	defer release()
	v, closer, err := t.store.db.Get([]byte(committedPrefix + t.name))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("table %s: read committed sequence: %w", t.name, err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, &CorruptionError{Key: []byte(committedPrefix + t.name), Reason: "committed sequence is not 8 bytes"}
	}
	return binary.BigEndian.Uint64(v), nil
}

// SetCommittedSeq records (synced) the committed-sequence mark.
func (t *Table) SetCommittedSeq(ctx context.Context, mark uint64) error {
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.store.setSync([]byte(committedPrefix+t.name), binary.BigEndian.AppendUint64(nil, mark), true); err != nil {
		return fmt.Errorf("table %s: record committed sequence: %w", t.name, err)
	}
	return nil
}

// recentWrites remembers, per table, where the blocks written by this
// process went (the first sequence and the earliest event time of each
// append), so that SeqRange finds the blocks of a continuous cold tier's
// next run by seeking to their time in each partition instead of reading
// the key of every block the hot store keeps (its retention).
type recentWrites struct {
	mu sync.Mutex
	// known: every block with a sequence of at least known was noted
	// (valid once a full scan set it).
	known  uint64
	valid  bool
	writes []noted
}

type noted struct {
	seq     uint64
	minTime int64
}

var recentOf sync.Map // *Table → *recentWrites

func (t *Table) recent() *recentWrites {
	r, _ := recentOf.LoadOrStore(t, &recentWrites{})
	return r.(*recentWrites)
}

// noteWrite records an append's first block sequence and earliest event
// time (before its commit: SeqRange waits for the commit).
func (t *Table) noteWrite(first uint64, cols []colData) {
	minTime := int64(math.MaxInt64)
	for _, c := range cols {
		if c.name == t.sortBy {
			for _, v := range c.vals {
				minTime = min(minTime, v.i)
			}
		}
	}
	r := t.recent()
	r.mu.Lock()
	r.writes = append(r.writes, noted{first, minTime})
	r.mu.Unlock()
}

// noteUnknown says that blocks below upTo were written without noteWrite
// (a Stage numbers its blocks at publish): SeqRange scans every key until
// its from passes upTo.
func (t *Table) noteUnknown(upTo uint64) {
	r := t.recent()
	r.mu.Lock()
	r.known = max(r.known, upTo)
	r.mu.Unlock()
}

// SeqRange is BlockRange by sequence: after waiting for the appends in
// flight (as BlockRange does), it returns the first and last time bucket
// of the blocks with a sequence of at least from, and limit, one past the
// highest sequence handed out at the call (blocks written later have one at
// least that). blocks is 0 when there are none. It reads keys only: of
// every block the first time after the table is opened (or when from is
// below what this process wrote), and afterwards only those from the
// earliest event time written since from on, in each partition.
func (t *Table) SeqRange(ctx context.Context, from uint64) (first, last time.Time, limit uint64, blocks int, err error) {
	limit, err = t.store.waitSeqs(ctx)
	if err != nil {
		return first, last, 0, 0, err
	}
	r := t.recent()
	r.mu.Lock()
	fast := r.valid && from >= r.known
	low := int64(math.MaxInt64)
	kept := r.writes[:0]
	for _, w := range r.writes {
		if w.seq >= from {
			kept = append(kept, w)
			if w.seq < limit {
				low = min(low, w.minTime)
			}
		}
	}
	r.writes = kept
	r.mu.Unlock()
	if fast && low == math.MaxInt64 {
		return first, last, limit, 0, nil // nothing written since from
	}
	scanFrom := int64(math.MinInt64)
	if fast {
		scanFrom = floorTime(low, t.span)
	}
	minTime, maxTime := int64(math.MaxInt64), int64(math.MinInt64)
	err = t.eachBlockBetween(ctx, scanFrom, math.MaxInt64, func(key []byte, seq uint64) error {
		if seq < from || seq >= limit {
			return nil
		}
		_, _, mt, _, _ := parseBlockKey(key)
		minTime, maxTime = min(minTime, mt), max(maxTime, mt)
		blocks++
		return nil
	})
	if blocks > 0 {
		first = time.Unix(0, floorTime(minTime, t.span)).UTC()
		last = time.Unix(0, floorTime(maxTime, t.span)+t.span).UTC()
	}
	if err == nil && !fast {
		// Every block below limit was seen; those at or above it will be
		// noted as they are written.
		r.mu.Lock()
		r.known, r.valid = max(r.known, limit), true
		r.mu.Unlock()
	}
	return first, last, limit, blocks, err
}

// QueryValuesSeqs is QueryValues over the blocks whose sequence is at
// least seqFrom and below seqLimit (0: no upper bound).
func (t *Table) QueryValuesSeqs(ctx context.Context, q Query, seqFrom, seqLimit uint64, emit func(cols []Column, vals []any) error) error {
	var cols []Column
	return t.querySeqs(ctx, q, seqFrom, seqLimit, func(p *plan, vals []any) error {
		if cols == nil {
			cols = make([]Column, len(p.out))
			for i, c := range p.out {
				cols[i] = Column{Name: c.name, Type: c.typ}
			}
		}
		return emit(cols, vals)
	})
}

// writerKey keys the store's writer id: 0x01 'w'.
const writerKey = "\x01w"

// WriterID returns the store's writer id, made (random, synced) on first
// use: it names this store in the cold tier's claims of source offsets, so
// a store wiped and started again is another writer.
func (s *Store) WriterID() (string, error) {
	release, err := s.use()
	if err != nil {
		return "", err
	}
	defer release()
	s.writerMu.Lock() // one id even when two tables ask at once
	defer s.writerMu.Unlock()
	v, closer, err := s.db.Get([]byte(writerKey))
	if err == nil {
		defer closer.Close()
		return string(v), nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return "", fmt.Errorf("table: read writer id: %w", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	if err := s.setSync([]byte(writerKey), []byte(id), false); err != nil {
		return "", fmt.Errorf("table: record writer id: %w", err)
	}
	return id, nil
}

// Store returns the store t belongs to.
func (t *Table) Store() *Store { return t.store }
