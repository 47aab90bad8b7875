package table

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble"
)

// Expire applies the table's TTL at the store's clock: see DeleteBefore.
// It does nothing for a table without TTL.
func (t *Table) Expire(ctx context.Context) (partitions int, err error) {
	ttl := t.TTL()
	if ttl <= 0 {
		return 0, nil
	}
	return t.DeleteBefore(ctx, t.store.opts.Now().Add(-ttl))
}

// DeleteBefore deletes every block whose time bucket ends at or before ts
// (all its rows are older than ts) with one range deletion per partition,
// all in one synced batch; it returns the partitions visited. Rows in the
// bucket holding ts are kept until their whole bucket is older (queries of
// a table with a TTL hide expired rows anyway). Space is reclaimed when
// Pebble compacts the deleted ranges.
func (t *Table) DeleteBefore(ctx context.Context, ts time.Time) (partitions int, err error) {
	release, err := t.store.use()
	if err != nil {
		return 0, err
	}
	defer release()
	if ts.Year() < 1678 { // before int64 nanoseconds begin: nothing is older
		return 0, nil
	}
	id, span := t.id, t.span
	ns := int64(math.MaxInt64) // after int64 nanoseconds end: everything is older
	if ts.Year() < 2262 {
		ns = ts.UnixNano()
	}
	cut := floorTime(ns, span)
	if t.key != nil {
		// No keyed append may write a dead-row mark for a block deleted
		// here after the deletion (it would outlive its block).
		kb := newKeyedBatch(t)
		if err := kb.lock(ctx); err != nil {
			return 0, err
		}
		defer kb.unlock()
		// Cached marks of blocks deleted here must not be written again.
		defer t.marks.clear()
	}
	lo, hi := tableBounds(id)
	it, err := t.store.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := t.store.db.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_, h, minTime, _, ok := parseBlockKey(it.Key())
		if !ok {
			return 0, &CorruptionError{Key: slices.Clone(it.Key()), Reason: "not a block key"}
		}
		if minTime < cut {
			if err := b.DeleteRange(partitionKey(id, h, math.MinInt64), partitionKey(id, h, cut), nil); err != nil {
				return 0, err
			}
			if t.key != nil { // the blocks' dead-row marks go with them
				if err := b.DeleteRange(deadPartitionKey(id, h, math.MinInt64), deadPartitionKey(id, h, cut), nil); err != nil {
					return 0, err
				}
			}
			partitions++
		}
		if h == math.MaxUint64 {
			break
		}
		it.SeekGE(partitionKey(id, h+1, math.MinInt64))
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("table %s: delete before %v: %w", t.name, ts, err)
	}
	if err := t.store.commitSync(b, true); err != nil {
		return 0, fmt.Errorf("table %s: delete before %v: %w", t.name, ts, err)
	}
	return partitions, nil
}

// CompactedThrough returns the watermark recorded by the last
// SetCompactedThrough (zero if none).
func (t *Table) CompactedThrough() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.meta.CompactedThrough == 0 {
		return time.Time{}
	}
	return time.Unix(0, t.meta.CompactedThrough).UTC()
}

// SetCompactedThrough records (synced) that data before ts has been
// compacted out of the hot store, so the next compaction starts there.
func (t *Table) SetCompactedThrough(ctx context.Context, ts time.Time) error {
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.meta
	m.CompactedThrough = ts.UnixNano()
	buf, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := t.store.setSync(metaKey(m.Name), buf, true); err != nil {
		return fmt.Errorf("table %s: record compaction: %w", m.Name, err)
	}
	t.meta = m
	return nil
}

// DiskUsage estimates the bytes the table's blocks take on disk (for
// metrics).
func (t *Table) DiskUsage() (uint64, error) {
	release, err := t.store.use()
	if err != nil {
		return 0, err
	}
	defer release()
	lo, hi := tableBounds(t.id)
	return t.store.db.EstimateDiskUsage(lo, hi)
}
