package table

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble"
)

// SetPosition stages value as the position named name, committed with the
// appender's rows in the same synced Pebble batch (Batch.SetPosition for a
// one-table append): after a crash both are stored or neither. An appender
// with no rows and a position still commits the position.
func (b *Appender) SetPosition(name string, value []byte) error {
	if b.failed || b.done || b.pb == nil {
		return fmt.Errorf("table %s: position %q staged on a failed or finished batch", b.t.name, name)
	}
	if err := b.pb.Set(positionKey(name), value, nil); err != nil {
		b.failed = true
		return fmt.Errorf("table %s: stage position %q: %w", b.t.name, name, err)
	}
	b.positions++
	return nil
}

// Positions calls fn with every stored position whose name starts with
// prefix, in name order. value is only valid during the call; an error
// from fn stops the walk and is returned.
func (s *Store) Positions(prefix string, fn func(name string, value []byte) error) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	lower := positionKey(prefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return fmt.Errorf("table: list positions %q: %w", prefix, err)
	}
	for it.First(); it.Valid(); it.Next() {
		name := string(it.Key()[len(positionPrefix):])
		if err := fn(name, it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("table: list positions %q: %w", prefix, err)
	}
	return nil
}

// DeletePositions deletes the named positions in one synced batch (admitted
// by the free-space guard even on a full disk: deleting frees space).
func (s *Store) DeletePositions(names []string) error {
	if len(names) == 0 {
		return nil
	}
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	b := s.db.NewBatch()
	defer b.Close()
	for _, name := range names {
		if err := b.Delete(positionKey(name), nil); err != nil {
			return fmt.Errorf("table: delete position %q: %w", name, err)
		}
	}
	if err := s.commitSync(b, true); err != nil { // deleting frees space: admitted on a full disk
		return fmt.Errorf("table: delete %d positions: %w", len(names), err)
	}
	return nil
}

// prefixEnd is the first key after every key starting with prefix (nil:
// none, for a prefix of 0xff bytes only).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// PutPosition stores value as the position named name on its own, synced:
// for a record that belongs to no batch of rows (what a table's key
// routing found), which must survive a crash once this returns.
func (s *Store) PutPosition(name string, value []byte) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(positionKey(name), value, nil); err != nil {
		return fmt.Errorf("table: stage position %q: %w", name, err)
	}
	if err := s.commitSync(b, false); err != nil {
		return fmt.Errorf("table: store position %q: %w", name, err)
	}
	return nil
}
