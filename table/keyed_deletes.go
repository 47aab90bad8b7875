package table

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble"
)

// The delete log of a keyed table: what a continuous cold tier needs to
// know of the deletes since its last commit. An upsert leaves a row in a
// block, which the cold tier's run reads; a delete leaves none (it only
// marks the key's previous row dead and records a tombstone in the key
// index), so without a record of it the run could not delete the key's row
// from the Iceberg table. Each applied delete is recorded under the
// sequence number of its append:
//
//	delete log  0x06 | table id u32 | seq u64 | key bytes   → record
//	record     := [0x00 | uvarint zigzag offset | uvarint length | partition] key values
//	key values := per key column: type u8 | Int64, Float64, Bool, Timestamp:
//	              u64 | String, JSON: uvarint length | bytes
//
// The position, when the key's entry has one after the delete, is the
// source position the delete leaves in the key index (its own, or for a
// delete without one the position it keeps). The run needs it to order the
// delete against a row of the key another node committed: a delete older
// than that row must not delete it. No column type is 0, so a record
// without the leading 0x00 is one without a position (as every record
// written before positions were) and reads as such.
//
// The records are put into the append's one synced batch with its blocks,
// index entries and marks, so a record exists exactly when its delete
// does. The sequence comes from the store's counter while the table's key
// lock is held, which the append keeps until its commit: a keyed table's
// sequences, blocks and delete records alike, follow the order its changes
// commit in. A run that commits the blocks below a sequence limit thus
// takes exactly the deletes below it too, and the records below the
// table's committed-sequence mark are cleared once the mark has passed
// them (ClearDeletesBelow).
//
// The log is kept only while a cold tier asks for it (KeepDeleteLog): a
// keyed table without one would otherwise keep every delete forever.
const prefixDeleteLog = 0x06

// deletePositioned leads a delete record that carries a position (no
// column type is 0).
const deletePositioned = 0x00

// A Position is the source position of a key's change: the source
// partition (SourceBatchColumn's text before its last '@') and the
// message's offset. The zero Position is none: a change without one (HTTP
// ingest, a table without source columns).
type Position struct {
	Partition string
	Offset    int64
}

// deleteLogKey is the key of the record of a delete of key (the key
// index's key bytes) at seq.
func deleteLogKey(dst []byte, table uint32, seq uint64, key []byte) []byte {
	dst = append(dst, prefixDeleteLog)
	dst = binary.BigEndian.AppendUint32(dst, table)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	return append(dst, key...)
}

// deleteLogBounds are the first key of the table's delete log at seq and
// the first after the table's log.
func deleteLogBounds(table uint32, seq uint64) (lo, hi []byte) {
	lo = deleteLogKey(nil, table, seq, nil)
	hi = binary.BigEndian.AppendUint32([]byte{prefixDeleteLog}, table+1)
	if table == math.MaxUint32 {
		hi = []byte{prefixDeleteLog + 1}
	}
	return lo, hi
}

// KeepDeleteLog makes the appends of a keyed table record their deletes
// from now on (see prefixDeleteLog). A continuous cold tier calls it when
// it opens the table, before anything is ingested; it does nothing on an
// append-only table.
func (t *Table) KeepDeleteLog() {
	if t.key != nil {
		t.deleteLog.Store(true)
	}
}

// logDeletes puts into pb the records of the deletes of rows dels of a
// part (keys and states: each row's key bytes and its key's state after
// the part), under one sequence number taken from the store's counter.
// Only the keys the part leaves deleted are recorded: a key deleted and
// written again in the part has its row in a block, whose sequence was
// taken before this one, and a record after it would put the delete after
// the row (a run cut between the two sequences would delete the new row).
// REQUIRES: the key lock held (the sequence then orders the records with
// the table's other changes).
func (k *keyedBatch) logDeletes(pb *pebble.Batch, cols []colData, keyCols []int, keys []string, states []*keyState, dels []int, h *seqHold) (bytes int, err error) {
	t := k.t
	if !t.deleteLog.Load() {
		return 0, nil
	}
	dels = slices.DeleteFunc(dels, func(r int) bool { return states[r].live })
	if len(dels) == 0 {
		return 0, nil
	}
	seq, err := t.store.nextSeqs(1, h)
	if err != nil {
		return 0, err
	}
	var lk, lv []byte
	for _, r := range dels {
		lk = deleteLogKey(lk[:0], t.id, seq, []byte(keys[r]))
		lv = lv[:0]
		if v := states[r].ver; v.ok {
			lv = append(lv, deletePositioned)
			lv = binary.AppendUvarint(lv, zigzag(v.offset))
			lv = binary.AppendUvarint(lv, uint64(len(v.partition)))
			lv = append(lv, v.partition...)
		}
		for _, c := range keyCols {
			col := &cols[c]
			lv = append(lv, byte(col.typ))
			switch col.typ {
			case String, JSON:
				lv = binary.AppendUvarint(lv, uint64(len(col.vals[r].s)))
				lv = append(lv, col.vals[r].s...)
			default:
				lv = binary.BigEndian.AppendUint64(lv, uint64(col.vals[r].i))
			}
		}
		if err := pb.Set(lk, lv, nil); err != nil {
			return 0, err
		}
		bytes += len(lk) + len(lv)
	}
	return bytes, nil
}

// decodeDeleteValues decodes a delete record: its key values as a query
// returns them (int64, float64, string (JSON too), bool, time.Time) and its
// position (the zero Position for a record without one).
func decodeDeleteValues(key, v []byte, n int) ([]any, Position, error) {
	out := make([]any, 0, n)
	var at Position
	fail := func(reason string) ([]any, Position, error) {
		return nil, Position{}, &CorruptionError{Key: slices.Clone(key), Reason: "delete record: " + reason}
	}
	if len(v) > 0 && v[0] == deletePositioned {
		off, m := binary.Uvarint(v[1:])
		if m <= 0 {
			return fail("offset")
		}
		v = v[1+m:]
		l, m := binary.Uvarint(v)
		if m <= 0 || uint64(len(v)-m) < l {
			return fail("partition length")
		}
		at = Position{Partition: string(v[m : m+int(l)]), Offset: unzigzag(off)}
		v = v[m+int(l):]
	}
	for len(v) > 0 {
		typ := Type(v[0])
		v = v[1:]
		switch typ {
		case String, JSON:
			l, m := binary.Uvarint(v)
			if m <= 0 || uint64(len(v)-m) < l {
				return fail("string length")
			}
			out = append(out, string(v[m:m+int(l)]))
			v = v[m+int(l):]
			continue
		}
		if len(v) < 8 {
			return fail("short value")
		}
		i := int64(binary.BigEndian.Uint64(v))
		v = v[8:]
		switch typ {
		case Int64:
			out = append(out, i)
		case Float64:
			out = append(out, math.Float64frombits(uint64(i)))
		case Bool:
			out = append(out, i != 0)
		case Timestamp:
			out = append(out, time.Unix(0, i).UTC())
		default:
			return fail(fmt.Sprintf("type %d", typ))
		}
	}
	if len(out) != n {
		return fail(fmt.Sprintf("%d values for %d key columns", len(out), n))
	}
	return out, at, nil
}

// DeletedKeys calls fn with the key values (in PrimaryKey's order, typed as
// a query returns them) and the position of each delete recorded at a
// sequence in [from, limit) (limit 0: no bound), in sequence order. A
// continuous cold tier's run reads the deletes of the sequences it commits.
func (t *Table) DeletedKeys(ctx context.Context, from, limit uint64, fn func(key []any, at Position) error) error {
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	return t.deletedKeys(ctx, t.store.db, from, limit, fn)
}

func (t *Table) deletedKeys(ctx context.Context, r pebble.Reader, from, limit uint64, fn func(key []any, at Position) error) error {
	if t.key == nil {
		return nil
	}
	lo, hi := deleteLogBounds(t.id, from)
	if limit != 0 {
		hi = deleteLogKey(nil, t.id, limit, nil)
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("table %s: read delete log: %w", t.name, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		vals, at, err := decodeDeleteValues(it.Key(), it.Value(), len(t.key))
		if err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
		if err := fn(vals, at); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("table %s: read delete log: %w", t.name, err)
	}
	return nil
}

// ClearDeletesBelow deletes (synced) the delete records of sequences below
// mark: the cold tier committed them. It is idempotent.
func (t *Table) ClearDeletesBelow(ctx context.Context, mark uint64) error {
	if t.key == nil || mark == 0 {
		return nil
	}
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return err
	}
	lo, _ := deleteLogBounds(t.id, 0)
	b := t.store.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(lo, deleteLogKey(nil, t.id, mark, nil), nil); err != nil {
		return err
	}
	if err := t.store.commitSync(b, true); err != nil {
		return fmt.Errorf("table %s: clear delete log: %w", t.name, err)
	}
	return nil
}

// A View is a point-in-time view of a table's store (a Pebble snapshot):
// its queries and ChangedKeys see the same commits, whatever is appended
// meanwhile. A two-tier query of a keyed table reads the keys the store
// changed and its rows through one view, so that the Iceberg rows it
// leaves out are exactly those of the keys whose rows (or deletes) it
// returns from the store. Close releases it.
type View struct {
	t       *Table
	snap    *pebble.Snapshot
	release func()
}

// NewView opens a view of the table's store as of now.
func (t *Table) NewView() (*View, error) {
	release, err := t.store.use()
	if err != nil {
		return nil, err
	}
	return &View{t: t, snap: t.store.db.NewSnapshot(), release: release}, nil
}

// Close releases the view; it may be called more than once.
func (v *View) Close() error {
	if v.snap == nil {
		return nil
	}
	err := v.snap.Close()
	v.snap = nil
	v.release()
	return err
}

// QueryValuesSeqs is Table.QueryValuesSeqs as of the view.
func (v *View) QueryValuesSeqs(ctx context.Context, q Query, seqFrom, seqLimit uint64, emit func(cols []Column, vals []any) error) error {
	var cols []Column
	return v.t.scanView(ctx, q, seqFrom, seqLimit, v.snap, false, &scanner{emit: func(p *plan, vals []any) error {
		if cols == nil {
			cols = make([]Column, len(p.out))
			for i, c := range p.out {
				cols[i] = Column{Name: c.name, Type: c.typ}
			}
		}
		return emit(cols, vals)
	}})
}

// A KeyChange is a key a keyed table's store changed: its key values (in
// PrimaryKey's order, typed as a query returns them), the change's source
// position (a row's own source columns; a delete's record), and whether it
// was a delete.
type KeyChange struct {
	Key     []any
	At      Position
	Deleted bool
}

// ChangedKeys calls fn with every key of a keyed table that a change at a
// sequence of at least from made: first the keys of the rows of those
// blocks that are their key's current row (in any time range, past the TTL
// too), then the deletes recorded since from, in sequence order. A row of
// those blocks that a later change superseded needs no look: the key's
// latest change, later still, is one of the two. fn may get a key more
// than once: a key with a current row there has a row and maybe older
// deletes (a delete after the row would have left it dead), and a key
// without one its deletes, the last the latest. ch.Key is reused after fn
// returns.
func (v *View) ChangedKeys(ctx context.Context, from uint64, fn func(KeyChange) error) error {
	t := v.t
	if t.key == nil {
		return nil
	}
	schema, _ := t.current()
	has := func(name string) bool {
		return slices.ContainsFunc(schema, func(c Column) bool { return c.Name == name })
	}
	stored := true // no row has a key column the schema lacks
	for _, k := range t.key {
		stored = stored && has(k)
	}
	if stored {
		q := Query{Columns: t.PrimaryKey()}
		n := len(q.Columns)
		positioned := has(SourceBatchColumn) && has(SourceOffsetColumn)
		if positioned {
			q.Columns = append(q.Columns, SourceBatchColumn, SourceOffsetColumn)
		}
		err := t.scanView(ctx, q, from, 0, v.snap, true, &scanner{emit: func(_ *plan, vals []any) error {
			ch := KeyChange{Key: vals[:n]}
			if positioned {
				tag, _ := vals[n].(string)
				off, ok := vals[n+1].(int64)
				if i := strings.LastIndexByte(tag, '@'); i > 0 && ok {
					ch.At = Position{Partition: tag[:i], Offset: off}
				}
			}
			return fn(ch)
		}})
		if err != nil {
			return err
		}
	}
	return t.deletedKeys(ctx, v.snap, from, 0, func(key []any, at Position) error {
		return fn(KeyChange{Key: key, At: at, Deleted: true})
	})
}

// scanView is scan through a snapshot of the store (nil: the store as it
// is); allTime reads every row whatever its time (the TTL too).
func (t *Table) scanView(ctx context.Context, q Query, seqFrom, seqLimit uint64, snap *pebble.Snapshot, allTime bool, s *scanner) error {
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	t.queries.Add(1)
	p, err := t.plan(q)
	if err != nil || p.empty {
		return err
	}
	p.seqLimit, p.seqFrom = seqLimit, seqFrom
	p.borrow = s.encode != nil
	p.snap = snap
	if allTime {
		p.from, p.to = math.MinInt64, math.MaxInt64
	}
	s.t, s.p, s.vals = t, p, make([]any, len(p.out))
	d := s.driver()
	return d.finish(t.scanBlocks(ctx, p, d))
}

// DeleteMarksBefore deletes the dead-row marks of a keyed table that name
// blocks DeleteBlocks(before, maxSeq) deleted (time bucket ending at or
// before before, sequence at most maxSeq), in one synced batch, and
// returns how many. DeleteBlocks deletes a block's mark with it, but a
// key's index entry still points at its row in the deleted block (the key
// index is not swept), so a later change of the key marks that row dead
// again: a mark of a block that is gone, which this finds. A cold tier
// that deletes committed blocks calls it after each deletion; it is
// idempotent.
func (t *Table) DeleteMarksBefore(ctx context.Context, before time.Time, maxSeq uint64) (int, error) {
	if t.key == nil || before.Year() < 1678 {
		return 0, nil
	}
	release, err := t.store.use()
	if err != nil {
		return 0, err
	}
	defer release()
	ns := int64(math.MaxInt64)
	if before.Year() < 2262 {
		ns = before.UnixNano()
	}
	cut := floorTime(ns, t.span)
	lo, hi := deadBounds(t.id)
	it, err := t.store.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, fmt.Errorf("table %s: read dead-row marks: %w", t.name, err)
	}
	defer it.Close()
	b := t.store.db.NewBatch()
	defer b.Close()
	n := 0
	var bk []byte
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		bk = append(append(bk[:0], prefixBlock), it.Key()[1:]...)
		_, _, minTime, seq, ok := parseBlockKey(bk)
		if !ok {
			return 0, &CorruptionError{Key: slices.Clone(it.Key()), Reason: "not a dead-row mark key"}
		}
		if minTime < cut && seq <= maxSeq {
			if err := b.Delete(it.Key(), nil); err != nil {
				return 0, err
			}
			n++
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("table %s: read dead-row marks: %w", t.name, err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := t.store.commitSync(b, true); err != nil {
		return 0, fmt.Errorf("table %s: delete the marks of deleted blocks: %w", t.name, err)
	}
	return n, nil
}
