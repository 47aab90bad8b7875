package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/table"
)

// A snapshot ingested as a keyed table's state (mode RDBState):
//
//  1. begin, once the snapshot's header was read: the snapshot's
//     generation (the request's, else the snapshot's ctime) is checked
//     against the newest the table was given, and recorded (a position of
//     the store) before any row is stored, so that an older snapshot is
//     refused even after an ingest that did not finish;
//  2. each batch upserts its keys with the source position (partition
//     rdbStatePartition, offset the generation): a key already written at
//     this generation is a replay and is not written again, so a retry of
//     an interrupted ingest, or a second ingest of the same snapshot,
//     writes only what is missing;
//  3. finish, once the snapshot was read whole and its checksum matched:
//     the keys not written at this generation are deleted
//     (table.DeleteKeysNotAt), and the snapshot's generation and checksum
//     are recorded as the table's state.
//
// Between 2 and 3 the table holds a mix of the previous state and the
// snapshot's keys; an ingest that stops there (an error, a kill) leaves it
// so until the same snapshot, or a newer one, is ingested whole.

// rdbStateBatchHook, when set (tests only), runs before each batch of a
// state ingest is stored, with the count of batches stored before it; an
// error stops the ingest there (an interruption between two batches).
var rdbStateBatchHook func(stored int) error

// rdbStateRecord is what the store keeps of a table's snapshots (the
// position rdbStatePosition): the newest generation begun, and the
// generation and checksum of the last snapshot applied whole.
type rdbStateRecord struct {
	Begun    int64  `json:"begun"`
	Done     int64  `json:"done,omitempty"`
	Checksum uint64 `json:"checksum,omitempty"`
}

// rdbStatePosition is the name of a table's rdbStateRecord among the
// store's positions.
func rdbStatePosition(tableName string) string { return "rdb-state/" + tableName }

// rdbState is one state ingest of a snapshot into a keyed table.
type rdbState struct {
	store *table.Store
	table *table.Table
	// generation is the request's until begin, then the snapshot's.
	generation int64
	source     string // the rows' table.SourceBatchColumn
	record     rdbStateRecord
}

// begin checks the snapshot's generation against the table's record and
// records it as begun (ingest.RDBOptions.Header).
func (st *rdbState) begin(ctime int64, ok bool) error {
	if st.generation == 0 {
		if !ok || ctime <= 0 {
			return fmt.Errorf("%w: mode %s: the snapshot has no ctime to order it by: give it a generation", ingest.ErrBadInput, RDBState)
		}
		st.generation = ctime
	}
	rec, err := readRDBState(st.store, st.table.Name())
	if err != nil {
		return err
	}
	if st.generation < rec.Begun {
		return fmt.Errorf("table %s: generation %d: %w (generation %d)", st.table.Name(), st.generation, ErrOlderSnapshot, rec.Begun)
	}
	st.record = rec
	st.source = rdbStatePartition + "@" + strconv.FormatInt(st.generation, 10)
	if st.generation == rec.Begun {
		return nil
	}
	rec.Begun = st.generation
	return writeRDBState(st.store, st.table.Name(), rec)
}

// position gives each row the snapshot's source position.
func (st *rdbState) position(rows []ingest.Row) {
	for _, r := range rows {
		r[table.SourceBatchColumn] = st.source
		r[table.SourceOffsetColumn] = st.generation
	}
}

// finish deletes the keys the snapshot does not hold and records it as the
// table's state; checksum is the snapshot's stored CRC64 (0: none).
func (st *rdbState) finish(ctx context.Context, checksum uint64, batch int) (deleted int64, err error) {
	if st.source == "" {
		// begin never ran: without a generation every key would look absent.
		return 0, fmt.Errorf("table %s: mode %s: the snapshot's header was not read", st.table.Name(), RDBState)
	}
	rec := st.record
	if rec.Done == st.generation && rec.Checksum != 0 && checksum != 0 && rec.Checksum != checksum {
		return 0, fmt.Errorf("table %s: generation %d (checksum %016x): %w (checksum %016x); ingest this snapshot with a larger generation",
			st.table.Name(), st.generation, checksum, ErrGenerationReused, rec.Checksum)
	}
	deleted, err = st.table.DeleteKeysNotAt(ctx, rdbStatePartition, st.generation, batch)
	if err != nil {
		return deleted, fmt.Errorf("delete the keys absent from the snapshot: %w", err)
	}
	rec.Begun = max(rec.Begun, st.generation)
	rec.Done, rec.Checksum = st.generation, checksum
	if err := writeRDBState(st.store, st.table.Name(), rec); err != nil {
		return deleted, err
	}
	return deleted, nil
}

func readRDBState(store *table.Store, tableName string) (rdbStateRecord, error) {
	var rec rdbStateRecord
	name := rdbStatePosition(tableName)
	err := store.Positions(name, func(n string, v []byte) error {
		if n != name {
			return nil // another table's whose name starts with this one's
		}
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("table %s: snapshot state record %q: %w", tableName, v, err)
		}
		return nil
	})
	return rec, err
}

func writeRDBState(store *table.Store, tableName string, rec rdbStateRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := store.PutPosition(rdbStatePosition(tableName), b); err != nil {
		return fmt.Errorf("table %s: record the snapshot state: %w", tableName, err)
	}
	return nil
}

// rdbStateLocks holds a lock per table (*table.Table → chan struct{}):
// the state ingests of one table run one at a time, since each one's
// deletes assume no other snapshot writes the table meanwhile.
var rdbStateLocks sync.Map

// lockRDBState takes t's state lock, waiting at most as long as ctx.
func lockRDBState(ctx context.Context, t *table.Table) (unlock func(), err error) {
	l, _ := rdbStateLocks.LoadOrStore(t, make(chan struct{}, 1))
	ch := l.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("table %s: wait for another snapshot's state ingest: %w", t.Name(), ctx.Err())
	}
}
