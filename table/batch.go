package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/cockroachdb/pebble"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// Batch stages appends to one or more tables together with source
// positions (a Kafka partition's next offset, a JetStream consumer's last
// sequence) and commits them as ONE pebble.Batch with pebble.Sync: after a
// crash either the rows and the position that produced them are both
// stored, or neither is. This is what makes a stream source exactly once
// into a table (docs/streams.md).
//
// A Batch is used by one goroutine: NewBatch, Append and SetPosition any
// number of times, Commit, and Close always (Close after Commit is a no-op
// apart from releasing; Close without Commit discards everything staged).
// A table may be appended to at most once per Batch: an Append that widens
// an inferred schema holds the table's lock until Commit or Close, as
// Table.Append does, so that schemas only grow in commit order.
type Batch struct {
	s       *Store
	b       *pebble.Batch
	release func()
	tables  []*Table
	// finish runs after Commit (ok=true) or on Close without a commit
	// (ok=false): counters, schema restore, unlocking.
	finish []func(ok bool)
	done   bool
	hold   seqHold
}

// ErrTableTwice is returned by Batch.Append for a table already appended to
// in the same Batch.
var ErrTableTwice = errors.New("table appended to twice in one batch")

// positionPrefix keys source positions: 0x01 'p' name (outside the table
// metadata range 0x01 'm', which Tables and load list).
const positionPrefix = "\x01p"

func positionKey(name string) []byte { return append([]byte(positionPrefix), name...) }

// NewBatch starts a Batch. The store cannot close until the Batch is
// closed.
func (s *Store) NewBatch() (*Batch, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	return &Batch{s: s, b: s.db.NewBatch(), release: release}, nil
}

// Append stages rows for t (see Table.Append for what rows may hold and for
// the *SchemaError naming a row that does not fit). On error nothing of
// this call is staged; the Batch stays usable.
func (b *Batch) Append(t *Table, rows []Row) (err error) {
	if b.done {
		return errors.New("table: batch already committed or closed")
	}
	if t.store != b.s {
		return fmt.Errorf("table %s: belongs to another store", t.name)
	}
	if slices.Contains(b.tables, t) {
		return fmt.Errorf("table %s: %w", t.name, ErrTableTwice)
	}
	if len(rows) == 0 {
		return nil
	}
	var kb *keyedBatch
	if t.key != nil {
		// Taken before the schema's lock (a widening holds it until the
		// commit), in the order an Appender takes them. Batch.Append has
		// no context: the wait is for another batch of the table to
		// commit or close.
		kb = newKeyedBatch(t)
		if err := kb.lock(context.Background()); err != nil {
			return err
		}
		defer func() {
			if err != nil {
				kb.unlock()
			}
		}()
	}
	schema, check := t.current()
	cols, fits, err := t.coerce(rows, schema, check, nil)
	if err != nil && t.typesFixed() {
		err, fits = nil, false // as Appender.add: listed against the widened schema
	}
	if err != nil {
		return err
	}
	changed := false
	var oldSchema []Column
	if !fits {
		t.mu.Lock()
		oldSchema = t.meta.Schema
		if schema, changed, err = t.widenFor(rows); err != nil {
			t.mu.Unlock()
			return err
		}
		if changed {
			// Kept locked, and unpublished, until Commit or Close.
			t.setSchemaUnpublished(schema)
		} else {
			t.mu.Unlock()
		}
		if cols, _, err = t.coerce(rows, schema, 0, nil); err != nil {
			if changed {
				t.setSchema(oldSchema)
				t.mu.Unlock()
			}
			return t.mismatches(rows, schema, nil, err)
		}
	}
	return b.stage(t, cols, len(rows), changed, oldSchema, kb)
}

// AppendColumns is Append for rows held by column, as Appender.AddColumns
// is Add's: the same conversions and errors, without a map per row. A part
// that needs the schema widened (or has a column a static schema lacks)
// goes through Append as cb.Rows(). cb need not outlive the call.
func (b *Batch) AppendColumns(t *Table, cb *colbatch.Batch) error {
	if b.done {
		return errors.New("table: batch already committed or closed")
	}
	if t.store != b.s {
		return fmt.Errorf("table %s: belongs to another store", t.name)
	}
	if slices.Contains(b.tables, t) {
		return fmt.Errorf("table %s: %w", t.name, ErrTableTwice)
	}
	if cb.Len == 0 {
		return nil
	}
	if t.key != nil {
		return b.Append(t, cb.Rows()) // keyed: the rare path, resolved row by row anyway
	}
	schema, check := t.current()
	sl := getSlab(len(schema) * cb.Len)
	defer putSlab(sl) // stage encodes the values before it returns
	cols, fits, err := t.coerceColumns(cb, schema, check, nil, sl)
	if err != nil && t.typesFixed() {
		// Append lists every row that does not fit (TypeMismatchError).
		return b.Append(t, cb.Rows())
	}
	if err != nil {
		return err
	}
	if !fits {
		return b.Append(t, cb.Rows())
	}
	return b.stage(t, cols, cb.Len, false, nil, nil)
}

// stage writes the blocks of n rows converted to cols into b; changed
// says that this append widened t's schema from oldSchema (t.mu is then
// held, until the batch ends); kb, for a keyed table, holds its key lock
// (released when the batch ends).
func (b *Batch) stage(t *Table, cols []colData, n int, changed bool, oldSchema []Column, kb *keyedBatch) error {
	// Stage into a scratch batch first so that a failure leaves b as it was.
	scratch := b.s.db.NewBatch()
	defer scratch.Close()
	var nblocks, nbytes int
	var err error
	if kb != nil {
		_, nblocks, nbytes, err = kb.write(scratch, cols, n, &b.hold)
	} else {
		nblocks, nbytes, err = t.writeBlocks(scratch, cols, &b.hold)
	}
	if err == nil && changed {
		var buf []byte
		if buf, err = json.Marshal(t.meta); err == nil {
			err = scratch.Set(metaKey(t.name), buf, nil)
		}
	}
	if err == nil {
		err = b.b.Apply(scratch, nil)
	}
	if err != nil {
		if changed {
			t.setSchema(oldSchema)
			t.mu.Unlock()
		}
		return fmt.Errorf("table %s: stage %d rows: %w", t.name, n, err)
	}
	b.tables = append(b.tables, t)
	b.finish = append(b.finish, func(ok bool) {
		if ok {
			kb.committed()
		}
		kb.unlock() // after the commit: the entries it read are stored
		if changed {
			if ok {
				t.publishSchema()
			} else {
				t.setSchema(oldSchema)
			}
			t.mu.Unlock()
		}
		if ok {
			t.appends.Add(1)
			t.rowsAppended.Add(int64(n))
			t.blocksWritten.Add(int64(nblocks))
			t.bytesWritten.Add(int64(nbytes))
		}
	})
	return nil
}

// SetPosition stages value as the position named name (e.g.
// "events/kafka/topic/3"); it is committed with the rows.
func (b *Batch) SetPosition(name string, value []byte) error {
	if b.done {
		return errors.New("table: batch already committed or closed")
	}
	return b.b.Set(positionKey(name), value, nil)
}

// Commit writes everything staged as one synced Pebble batch. It returns
// once it is durable; on error nothing is stored.
func (b *Batch) Commit(ctx context.Context) error {
	if b.done {
		return errors.New("table: batch already committed or closed")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := commits.Add(1)
	fault("before-commit", n)
	err := b.s.commitSync(b.b, false)
	if err == nil {
		fault("after-commit", n)
	}
	b.end(err == nil)
	if err != nil {
		return fmt.Errorf("table: commit batch: %w", err)
	}
	return nil
}

// Close discards what was not committed and releases the Batch.
func (b *Batch) Close() {
	b.end(false)
}

func (b *Batch) end(ok bool) {
	if b.done {
		return
	}
	b.done = true
	for _, f := range b.finish {
		f(ok)
	}
	b.b.Close()
	b.s.releaseSeqs(&b.hold)
	b.release()
}

// Position returns the stored position named name, or nil if there is none.
func (s *Store) Position(name string) ([]byte, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	v, closer, err := s.db.Get(positionKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("table: read position %q: %w", name, err)
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// FaultEnv names a point at which the process kills itself (SIGKILL, as
// kill -9 would), for crash tests of the stream sources: "before-commit:N"
// (the N-th Batch.Commit of the process, counted from 1, staged and not
// committed) or "after-commit:N" (committed and synced, the caller not
// told yet); "append-before-commit:N" and "append-after-commit:N" are the
// same points in the N-th Appender.Commit (an HTTP batch), and
// "publish-before-ingest:N" and "publish-after-ingest:N" in the N-th
// Stage.Publish that has something to publish (a streamed S3 object), and
// "rewrite-before-commit:N" and "rewrite-after-commit:N" in the N-th batch of
// a keyed table's rewrite of sparse blocks (keyed_rewrite.go). It prints
// "table: fault <point>" on stderr first. Random kill times cannot tell a
// batch holding rows and position from two batches committed one after the
// other; a kill after every single commit can.
const FaultEnv = "SLUICE_BATCH_FAULT"

var (
	commits       atomic.Int64
	appendCommits atomic.Int64
	faultPoint    = os.Getenv(FaultEnv)
)

func fault(step string, n int64) {
	if faultPoint == "" || faultPoint != step+":"+strconv.FormatInt(n, 10) {
		return
	}
	fmt.Fprintf(os.Stderr, "table: fault %s\n", faultPoint)
	// os.Process.Kill is SIGKILL where there are signals: nothing after
	// this line runs, as if the machine had lost power here.
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		_ = self.Kill()
	}
	select {} // the kill is on its way
}
