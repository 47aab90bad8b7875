package table

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble"
)

// A snapshot of a whole keyspace (a Redis RDB file) can be a keyed table's
// state: its rows upsert their keys with the source position (partition =
// the snapshot source, offset = the snapshot's generation), and then every
// key the snapshot did not hold, the keys whose index entry is live but not
// at that position or later, is deleted. DeleteKeysNotAt is that second
// step. The deletes are ordinary delete rows appended to the table, as an
// HTTP DELETE appends them, so whatever follows the table's deletes (dead
// marks, tombstones, the cold tier's join) follows these too.

// DeleteKeysNotAt deletes every key of the table whose row is live and was
// not written at the source position (partition, offset) or after it in
// the same partition: the keys a snapshot of generation offset did not
// hold. The index is read in key order and the deletes appended batch keys
// at a time (each append atomic and durable on its own), so memory holds
// one batch of keys whatever the table's size; a run that stops half way
// (an error, a cancelled ctx, a crash) is finished by running it again: a
// key already deleted is not live, and a key written again at the position
// meanwhile is kept. Each delete row carries the position, so the
// tombstone it leaves records it. It returns the number of keys deleted.
func (t *Table) DeleteKeysNotAt(ctx context.Context, partition string, offset int64, batch int) (deleted int64, err error) {
	if len(t.key) == 0 {
		return 0, fmt.Errorf("table %s: delete keys not at %s@%d: %w", t.name, partition, offset, errors.New("the table has no primary key"))
	}
	if batch <= 0 {
		batch = 1000
	}
	at := version{partition: partition, offset: offset, ok: true}
	source := partition + "@" + strconv.FormatInt(offset, 10)
	var from []byte // the next key to read: after the last batch's
	for {
		keys, next, err := t.keysNotAt(ctx, at, from, batch)
		if err != nil {
			return deleted, err
		}
		if len(keys) == 0 {
			return deleted, nil
		}
		rows := make([]Row, len(keys))
		for i, k := range keys {
			k[OperationColumn] = OperationDelete
			k[SourceBatchColumn] = source
			k[SourceOffsetColumn] = offset
			rows[i] = k
		}
		if staleKeysHook != nil {
			staleKeysHook(t, deleted)
		}
		if err := t.Append(ctx, rows); err != nil {
			return deleted, fmt.Errorf("table %s: delete %d keys not at %s: %w", t.name, len(rows), source, err)
		}
		deleted += int64(len(rows))
		if next == nil {
			return deleted, nil
		}
		from = next
	}
}

// staleKeysHook, when set (tests only), runs before each append of
// DeleteKeysNotAt with the keys deleted so far.
var staleKeysHook func(t *Table, deleted int64)

// keysNotAt reads from the key index, from the key from (nil: the first),
// up to n live keys not at or after at, as rows of their key columns; next
// is the index key to read from for the rest (nil: the index was read to
// its end).
func (t *Table) keysNotAt(ctx context.Context, at version, from []byte, n int) (keys []Row, next []byte, err error) {
	release, err := t.store.use()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	schema, _ := t.current()
	types := make([]Type, len(t.key))
	for i, name := range t.key {
		types[i] = String
		if j := slices.IndexFunc(schema, func(c Column) bool { return c.Name == name }); j >= 0 {
			types[i] = schema[j].Type
		}
	}
	lo, hi := keyIndexBounds(t.id)
	if from != nil {
		lo = from
	}
	// A new iterator per batch: the appends in between change the entries
	// already read, never the ones after them, and a long-lived iterator
	// would pin every memtable the deletes fill.
	it, err := t.store.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, fmt.Errorf("table %s: read key index: %w", t.name, err)
	}
	defer it.Close()
	prefix := len(keyIndexKey(nil, t.id, nil)) // the key bytes follow it
	for ok := it.First(); ok; ok = it.Next() {
		if len(keys) == n {
			next = slices.Clone(it.Key())
			break
		}
		s, err := decodeEntry(it.Key(), it.Value())
		if err != nil {
			return nil, nil, fmt.Errorf("table %s: %w", t.name, err)
		}
		if !s.live || (s.ver.ok && s.ver.partition == at.partition && s.ver.offset >= at.offset) {
			continue
		}
		row, err := keyRow(it.Key()[prefix:], t.key, types)
		if err != nil {
			return nil, nil, fmt.Errorf("table %s: %w", t.name, &CorruptionError{Key: slices.Clone(it.Key()), Reason: "key index key: " + err.Error()})
		}
		keys = append(keys, row)
	}
	if err := it.Error(); err != nil {
		return nil, nil, fmt.Errorf("table %s: read key index: %w", t.name, err)
	}
	return keys, next, nil
}

// keyRow decodes the key bytes of an index key (keyBytes' form: per key
// column, uvarint length and the value's text) into a row of the key
// columns, each value of its column's type, so that appending the row
// neither widens a column nor misses the key (keys compare by text, and
// each type's text parses back to the same text).
func keyRow(b []byte, names []string, types []Type) (Row, error) {
	row := make(Row, len(names)+3) // and the delete's three hidden columns
	for i, name := range names {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("column %q: bad length", name)
		}
		text := string(b[n : n+int(l)])
		b = b[n+int(l):]
		v, err := textValue(text, types[i])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", name, err)
		}
		row[name] = v
	}
	if len(b) != 0 {
		return nil, errors.New("trailing bytes")
	}
	return row, nil
}

// textValue is the value whose text (appendText) is text in a column of
// type typ. A type without a parser here takes the text, which coerce
// reads for every type whose text is not a Go value of its own.
func textValue(text string, typ Type) (any, error) {
	switch typ {
	case Int64:
		return strconv.ParseInt(text, 10, 64)
	case Float64:
		return strconv.ParseFloat(text, 64)
	case Bool:
		return strconv.ParseBool(text)
	case Timestamp:
		return time.Parse(time.RFC3339Nano, text)
	}
	return text, nil
}
