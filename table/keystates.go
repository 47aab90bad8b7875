package table

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"
)

// KeyState is one key's entry in a keyed table's key index: its key
// columns' values as text (in PrimaryKey's order, the text a key is
// compared by), whether it has a row (false: deleted), and the source
// position of its last change when it has one.
type KeyState struct {
	Key        []string
	Live       bool
	Partition  string // SourceBatchColumn's text before its last '@'
	Offset     int64
	Positioned bool
}

// KeyStates calls fn with the entries of the table's key index, in key
// order: the deleted keys only, or every key when withLive. A cluster
// query's nodes answer them beside their rows, so that the coordinator can
// order one key's changes held by two stores (a delete on one node hides
// an older row on another). The index is read from one point-in-time view;
// an error from fn stops the walk and is returned.
func (t *Table) KeyStates(ctx context.Context, withLive bool, fn func(KeyState) error) error {
	if len(t.key) == 0 {
		return fmt.Errorf("table %s: key states: %w", t.name, errors.New("the table has no primary key"))
	}
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	lo, hi := keyIndexBounds(t.id)
	it, err := t.store.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("table %s: key states: %w", t.name, err)
	}
	defer it.Close()
	texts := make([]string, len(t.key))
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		// Most entries are live: the flags byte skips them undecoded.
		if v := it.Value(); !withLive && len(v) > 0 && v[0]&entryLive != 0 {
			continue
		}
		s, err := decodeEntry(it.Key(), it.Value())
		if err != nil {
			return fmt.Errorf("table %s: key states: %w", t.name, err)
		}
		if !withLive && s.live {
			continue
		}
		if err := splitKeyTexts(texts, it.Key()[len(lo):]); err != nil {
			return fmt.Errorf("table %s: key states: %w", t.name, &CorruptionError{Key: append([]byte(nil), it.Key()...), Reason: err.Error()})
		}
		st := KeyState{Key: append([]string(nil), texts...), Live: s.live, Positioned: s.ver.ok}
		if s.ver.ok {
			st.Partition, st.Offset = s.ver.partition, s.ver.offset
		}
		if err := fn(st); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("table %s: key states: %w", t.name, err)
	}
	return nil
}

// splitKeyTexts reads key bytes (keyBytes: per column, uvarint length and
// text) into texts, one per key column.
func splitKeyTexts(texts []string, b []byte) error {
	for i := range texts {
		n, l := binary.Uvarint(b)
		if l <= 0 || n > uint64(len(b)-l) {
			return fmt.Errorf("key index key: column %d of %d", i+1, len(texts))
		}
		texts[i] = string(b[l : l+int(n)])
		b = b[l+int(n):]
	}
	if len(b) != 0 {
		return errors.New("key index key: trailing bytes")
	}
	return nil
}

// KeyIndexDiskUsage estimates the bytes the table's key index takes on
// disk, after flushing the store's memtable so that every entry is in a
// file (a benchmark's figure; it costs a flush).
func (t *Table) KeyIndexDiskUsage() (uint64, error) {
	release, err := t.store.use()
	if err != nil {
		return 0, err
	}
	defer release()
	if err := t.store.db.Flush(); err != nil {
		return 0, fmt.Errorf("table %s: key index size: %w", t.name, err)
	}
	lo, hi := keyIndexBounds(t.id)
	return t.store.db.EstimateDiskUsage(lo, hi)
}
