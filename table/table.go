package table

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble"
)

// Row is one row: column name to value. Append accepts Go integers,
// floats, json.Number, strings, bools, time.Time, json.RawMessage, maps and
// slices (as JSON) and nil (null). Query produces int64, float64, string,
// bool, time.Time, json.RawMessage and nil.
type Row = map[string]any

// Table is one time-series table of a Store. It is safe for concurrent use.
type Table struct {
	store *Store

	// Immutable after creation (copies of meta's fixed fields, readable
	// without mu).
	id                   uint32
	name, hashBy, sortBy string
	span                 int64 // block span in ns
	// key is the primary key (nil: append-only); keyLock, a one-slot
	// semaphore, is held by the append that resolves keys against the
	// key index, from its first resolution to its commit (keyed.go).
	key     []string
	keyLock chan struct{}
	entries *entryCache   // recent index entries (keyed.go); nil: append-only
	marks   *markCache    // recent dead-row marks (keyed.go); nil: append-only
	sparse  *sparseBlocks // blocks to rewrite (keyed_rewrite.go); nil: append-only
	// deleteLog says a keyed table's appends record their deletes for a
	// cold tier (keyed_deletes.go).
	deleteLog atomic.Bool
	// ttl is meta.TTL, for a keyed append that may run while a Batch
	// holds mu.
	ttl atomic.Int64

	// mu guards meta, colIndex and schemaDirty. The in-memory schema only
	// grows; a batch that widens it sets schemaDirty, and the first commit
	// after that writes the metadata in its own pebble batch, under mu, so
	// that the persisted schema only grows in commit order and covers
	// every committed block.
	mu          sync.Mutex
	meta        tableMeta
	colIndex    map[string]int // name → index in meta.Schema
	schemaDirty bool           // meta.Schema is wider than the persisted one
	// maxColumns bounds an inferred schema (SetMaxColumns); read under mu.
	maxColumns int
	// fixedTypes keeps an inferred column's first type (SetFixedTypes);
	// written under mu, published in view.
	fixedTypes bool
	// view is meta.Schema and meta.Static as of the last setSchema, read
	// without mu by appends (every part of every batch read them under mu
	// before: one lock per part shared by every writer of the table).
	view atomic.Pointer[schemaView]

	appends, rowsAppended, blocksWritten, bytesWritten atomic.Int64
	queries, rowsScanned, rowsEmitted, blocksRead      atomic.Int64
}

// Name returns the table's name.
func (t *Table) Name() string { return t.name } // immutable

// HashBy returns the partition key column ("" if none).
func (t *Table) HashBy() string { return t.hashBy } // immutable

// SortBy returns the event-time column.
func (t *Table) SortBy() string { return t.sortBy } // immutable

// BlockSpan returns the time bucket of one block.
func (t *Table) BlockSpan() time.Duration { return time.Duration(t.span) } // immutable

// TTL returns the table's time to live (0: forever).
func (t *Table) TTL() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.meta.TTL
}

// Schema returns a copy of the current schema, in column order (the sortBy
// column first for inferred schemas, then columns in order of first
// appearance; sorted by name within one Append).
func (t *Table) Schema() []Column {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.meta.Schema)
}

// DefaultMaxColumns is the column limit of an inferred schema unless
// SetMaxColumns changes it. The cold tier writes the whole Iceberg schema
// (about 50 bytes a column plus its name) into the metadata of every
// manifest, which Avro bounds to 1 MiB: with short names compaction failed
// from about 16k columns on, and took minutes and gigabytes before that
// (docs/storage.md, "Column limit"). 1000 leaves room for long names.
const DefaultMaxColumns = 1000

// SetMaxColumns bounds the number of columns an inferred schema may widen
// to (0: DefaultMaxColumns; negative: no bound). A row that would pass it
// is refused with a *ColumnLimitError and adds no column. Columns the
// schema already has stay. It does not apply to a static schema.
func (t *Table) SetMaxColumns(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.maxColumns = n
}

// columnLimit is the bound in force. REQUIRES: mu held.
func (t *Table) columnLimit() int {
	switch {
	case t.maxColumns == 0:
		return DefaultMaxColumns
	case t.maxColumns < 0:
		return int(^uint(0) >> 1)
	}
	return t.maxColumns
}

// SetFixedTypes makes the type an inferred column takes at its first value
// final: a later value is stored in it when it converts without loss (1.0
// into an int64 column as 1, 1 into a float64 column as 1.0, a number into
// a string column as its text) and otherwise its row is refused with a
// *TypeMismatchError, which lists the rows so that a caller can route them
// to a dead-letter table and append the rest. Without it an inferred column
// widens (int64 to float64 to string), which the hot store can follow but
// an Iceberg table cannot (Iceberg promotes int to long and float to
// double, never long to double or to string). One change stays: a
// decimal column's precision grows to 38 for a value that needs more
// digits at its scale (widerDecimal), which Iceberg promotes in place. A
// column widened before is kept as it is.
func (t *Table) SetFixedTypes(fixed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fixedTypes = fixed
	t.publishSchema()
}

// schemaView is a schema as appends read it: replaced, never changed.
type schemaView struct {
	schema []Column
	static bool
	// fixed: the types of the schema's columns never change (a static
	// schema, or SetFixedTypes): coerce decides whether a value fits.
	fixed bool
}

// coerceChecks are what a coercion checks beyond each value's conversion:
// the values that make it report that the rows do not fit although they
// convert, so that the schema is widened for them first.
type coerceChecks uint8

const (
	// checkWidening: a value whose type would widen its column (an
	// inferred schema whose types still widen).
	checkWidening coerceChecks = 1 << iota
	// checkDecimals: a decimal whose schema declares more digits than its
	// decimal column (declaresWiderDecimal), in an inferred schema whose
	// types are fixed: widenFor widens the column for it. A static
	// schema's declared decimal(p,s) keeps its p.
	checkDecimals
)

// checks are the checks of an append with this view.
func (v *schemaView) checks() coerceChecks {
	switch {
	case v.static:
		return 0
	case v.fixed:
		return checkDecimals
	}
	return checkWidening
}

// setSchema installs schema. REQUIRES: mu held (or t not yet shared).
func (t *Table) setSchema(schema []Column) {
	t.setSchemaUnpublished(schema)
	t.publishSchema()
}

// setSchemaUnpublished installs schema for the holder of mu only: appends
// that read the schema without mu keep seeing the old one until
// publishSchema. A Batch holds mu from the widening to its commit: a
// concurrent append must not take a column of a schema that may still be
// rolled back. REQUIRES: mu held.
func (t *Table) setSchemaUnpublished(schema []Column) {
	t.meta.Schema = schema
	t.colIndex = make(map[string]int, len(schema))
	for i, c := range schema {
		t.colIndex[c.Name] = i
	}
}

// publishSchema makes meta's schema the one appends read. REQUIRES: mu
// held (or t not yet shared).
func (t *Table) publishSchema() {
	t.view.Store(&schemaView{schema: t.meta.Schema, static: t.meta.Static, fixed: t.meta.Static || t.fixedTypes})
}

// current returns the schema in force and the checks of its values
// (schemaView.checks), without taking mu. A widening (under mu) publishes
// a new slice, so the one returned never changes.
func (t *Table) current() (schema []Column, check coerceChecks) {
	v := t.view.Load()
	return v.schema, v.checks()
}

// typesFixed reports whether values that do not fit their column are
// refused row by row (*TypeMismatchError) rather than widening it or
// failing the append as a whole.
func (t *Table) typesFixed() bool { return t.view.Load().fixed }

// reconfigure applies cfg to an open table and persists what changed.
// REQUIRES: store.mu held, store.closeMu held shared.
func (t *Table) reconfigure(cfg Config, create bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.meta
	if cfg.HashBy != m.HashBy || cfg.SortBy != m.SortBy || int64(cfg.BlockSpan) != m.SpanNanos {
		return fmt.Errorf("table %s: hashBy %q, sortBy %q and block span %v are fixed at creation (stored: %q, %q, %v)",
			m.Name, cfg.HashBy, cfg.SortBy, cfg.BlockSpan, m.HashBy, m.SortBy, time.Duration(m.SpanNanos))
	}
	if !slices.Equal(cfg.PrimaryKey, m.PrimaryKey) {
		// The index and the dead-row marks hold for one key only.
		return fmt.Errorf("table %s: the primary key %q is fixed at creation (stored: %q)", m.Name, cfg.PrimaryKey, m.PrimaryKey)
	}
	m.TTL = cfg.TTL
	m.Static = len(cfg.Columns) > 0
	schema := m.Schema
	if m.Static {
		for _, c := range cfg.Columns {
			if i, ok := t.colIndex[c.Name]; ok && widen(m.Schema[i].Type, c.Type) != c.Type {
				return fmt.Errorf("table %s: column %q is stored as %v and cannot become %v", m.Name, c.Name, m.Schema[i].Type, c.Type)
			}
			if c.Name == m.SortBy && c.Type != Timestamp {
				return fmt.Errorf("table %s: sortBy column %q must be a timestamp, not %v", m.Name, c.Name, c.Type)
			}
		}
		schema = slices.Clone(cfg.Columns)
		schema = keepHidden(schema, m.Schema) // a static schema keeps the source columns (cold.go)
	}
	old, _ := json.Marshal(t.meta)
	m.Schema = schema
	buf, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("table %s: encode metadata: %w", m.Name, err)
	}
	if create || string(buf) != string(old) {
		if err := t.store.setSync(metaKey(m.Name), buf, false); err != nil {
			return fmt.Errorf("table %s: write metadata: %w", m.Name, err)
		}
		t.schemaDirty = false
	}
	t.meta = m
	t.ttl.Store(int64(m.TTL))
	t.setSchema(schema)
	return nil
}

// Append stores rows. It returns once they are durable (one pebble.Batch
// committed with pebble.Sync): either every row is stored or, on error,
// none. A value that does not fit the schema (or an event time that does
// not parse) rejects the batch with a *SchemaError naming the row and
// column. Append does not keep rows or their values.
func (t *Table) Append(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		release, err := t.store.use()
		if err != nil {
			return err
		}
		release()
		return nil
	}
	b, err := t.NewAppender()
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Add(ctx, rows); err != nil {
		return err
	}
	return b.Commit(ctx)
}

// Appender is one atomic append to one table made of parts: each Add converts its rows to
// encoded, compressed blocks at once (the rows can be dropped after it),
// and Commit stores every part durably, or none. It lets a large input be
// decoded a few thousand rows at a time while staying one batch: its
// memory is the encoded blocks, not the rows. An Appender is not safe for
// concurrent use; Close it (after Commit, or to abandon it).
//
// A part that needs a new column or a wider type widens the table's
// schema at once (queries and other appends see the wider schema; it is
// persisted by the next commit). A batch that is abandoned afterwards
// leaves the schema widened: a column without values reads as null.
type Appender struct {
	t       *Table
	release func()
	pb      *pebble.Batch
	// pending are parts coerced to columns but not yet encoded: parts are
	// gathered up to flushRows rows (while their columns stay the same) so
	// that a batch of many small parts makes blocks as large as one Append
	// of them would, not one small block per partition per part.
	pending      []colData
	pendingRows  int
	rows, blocks int
	bytes        int
	failed, done bool
	hold         seqHold
	// slabs hold the pending columns of AddColumns parts, reused after
	// they are encoded.
	slabs []*colSlab
	// positions counts the positions staged with SetPosition: a batch of
	// no rows that carries one still commits.
	positions int
	// keyed is a keyed table's resolution of its keys so far (nil for an
	// append-only table); it holds the table's key lock from the first
	// flush to Commit or Close.
	keyed *keyedBatch
}

// flushRows is how many rows of an Appender are held as columns before they
// are encoded into blocks (about 300 bytes a row of ten columns: 10 MB).
const flushRows = 32 << 10

// NewAppender starts an atomic append.
func (t *Table) NewAppender() (*Appender, error) {
	release, err := t.store.use()
	if err != nil {
		return nil, err
	}
	b := &Appender{t: t, release: release, pb: t.store.db.NewBatch()}
	if t.key != nil {
		b.keyed = newKeyedBatch(t)
	}
	return b, nil
}

// Add converts rows into blocks of the batch. After an error the batch can
// only be closed, except after a *ColumnLimitError or a
// *TypeMismatchError: nothing of rows was added, and the rows it does not
// list can be added again. SchemaError.Row
// is the index in this call's rows.
func (b *Appender) Add(ctx context.Context, rows []Row) error {
	if b.failed || b.done {
		return fmt.Errorf("table %s: append to a failed or finished batch", b.t.name)
	}
	if err := ctx.Err(); err != nil {
		b.failed = true
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	if err := b.add(ctx, rows, trustedJSON(ctx)); err != nil {
		// Rows over the column limit, and rows whose values do not fit
		// fixed types, are found before anything of this part is added:
		// the batch stays usable for the other rows.
		if !errors.Is(err, ErrTooManyColumns) && !errors.Is(err, ErrTypeMismatch) {
			b.failed = true
		}
		return err
	}
	return nil
}

func (b *Appender) add(ctx context.Context, rows []Row, trusted []string) error {
	t := b.t
	// Fast path: coerce with the current schema, which also verifies that
	// every value fits it without widening and that no row has a column
	// the schema lacks. Only otherwise take mu and widen (or, for a static
	// schema, find the offending column).
	schema, check := t.current()
	sl := getSlab(len(schema) * len(rows))
	cols, fits, err := t.coerceInto(rows, schema, check, trusted, sl)
	if err != nil || !fits {
		putSlab(sl)
	}
	if err != nil && t.typesFixed() {
		// The rows that do not fit are listed below, against the schema
		// with the rows' new columns too (one error names them all).
		err, fits = nil, false
	}
	if err != nil {
		return err
	}
	if !fits {
		t.mu.Lock()
		widened, changed, err := t.widenFor(rows)
		if err == nil && changed {
			t.setSchema(widened) // replaces, never mutates, the old slice
			t.schemaDirty = true
		}
		t.mu.Unlock()
		if err != nil {
			return err
		}
		sl = getSlab(len(widened) * len(rows))
		if cols, _, err = t.coerceInto(rows, widened, 0, trusted, sl); err != nil {
			putSlab(sl)
			return t.mismatches(rows, widened, trusted, err)
		}
	}
	return b.addCols(ctx, cols, len(rows), sl)
}

// addCols adds a part converted to columns (in sl) to the pending ones. sl
// is reused once the part is encoded (flush) or the batch abandoned.
func (b *Appender) addCols(ctx context.Context, cols []colData, rows int, sl *colSlab) error {
	// Blocks record their own column types: parts encoded before a later
	// part widened a column are read back converted, like older blocks.
	if b.pending != nil && !sameColumns(b.pending, cols) {
		if err := b.flush(ctx); err != nil {
			putSlab(sl)
			return err
		}
	}
	// Only now: the flush above gives back the slabs of the parts it
	// encoded, not this one.
	b.slabs = append(b.slabs, sl)
	if b.pending == nil {
		b.pending = cols // a batch of one part is encoded without a copy
	} else {
		for i, c := range cols {
			b.pending[i].vals = append(b.pending[i].vals, c.vals...)
			b.pending[i].null = append(b.pending[i].null, c.null...)
		}
	}
	b.pendingRows += rows
	b.rows += rows
	if b.pendingRows >= flushRows {
		return b.flush(ctx)
	}
	return nil
}

func sameColumns(a, b []colData) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || a[i].typ != b[i].typ {
			return false
		}
	}
	return true
}

// flush encodes the pending rows into blocks of the pebble batch.
func (b *Appender) flush(ctx context.Context) error {
	if b.pendingRows == 0 {
		b.pending = nil
		return nil
	}
	var nblocks, nbytes int
	var err error
	if b.keyed != nil {
		if err = b.keyed.lock(ctx); err == nil {
			_, nblocks, nbytes, err = b.keyed.write(b.pb, b.pending, b.pendingRows, &b.hold)
		}
	} else {
		nblocks, nbytes, err = b.t.writeBlocks(b.pb, b.pending, &b.hold)
	}
	if err != nil {
		return fmt.Errorf("table %s: append %d rows: %w", b.t.name, b.pendingRows, err)
	}
	b.pending, b.pendingRows = nil, 0
	b.releaseSlabs()
	b.blocks += nblocks
	b.bytes += nbytes
	return nil
}

// Commit stores every part durably (pebble.Sync), or nothing on error.
func (b *Appender) Commit(ctx context.Context) error {
	t := b.t
	// Whatever happens below, this batch's sequences are committed or
	// never will be.
	defer t.store.releaseSeqs(&b.hold)
	if b.failed || b.done {
		return fmt.Errorf("table %s: commit of a failed or finished batch", t.name)
	}
	if err := ctx.Err(); err != nil {
		b.failed = true
		return err
	}
	if b.rows == 0 && b.positions == 0 {
		b.done = true
		return nil
	}
	if err := b.flush(ctx); err != nil {
		b.failed = true
		return err
	}
	defer b.keyed.unlock() // after the commit: the index entries it read are stored
	n := appendCommits.Add(1)
	fault("append-before-commit", n)
	if err := t.commit(b.pb); err != nil {
		b.failed = true
		return fmt.Errorf("table %s: append %d rows: %w", t.name, b.rows, err)
	}
	b.keyed.committed()
	fault("append-after-commit", n)
	b.done = true
	t.appends.Add(1)
	t.rowsAppended.Add(int64(b.rows))
	t.blocksWritten.Add(int64(b.blocks))
	t.bytesWritten.Add(int64(b.bytes))
	return nil
}

// commit commits pb durably, with the table's metadata when the schema was
// widened since it was last persisted (under mu, see mu).
func (t *Table) commit(pb *pebble.Batch) error {
	t.mu.Lock()
	if !t.schemaDirty {
		t.mu.Unlock()
		return t.store.commitSync(pb, false)
	}
	defer t.mu.Unlock()
	buf, err := json.Marshal(t.meta)
	if err != nil {
		return err
	}
	if err := pb.Set(metaKey(t.meta.Name), buf, nil); err != nil {
		return err
	}
	if err := t.store.commitSync(pb, false); err != nil {
		return err
	}
	t.schemaDirty = false
	return nil
}

// releaseSlabs gives back the slabs of parts no longer pending.
func (b *Appender) releaseSlabs() {
	for _, sl := range b.slabs {
		putSlab(sl)
	}
	clear(b.slabs)
	b.slabs = b.slabs[:0]
}

// Close releases the batch; one not committed stores nothing.
func (b *Appender) Close() {
	if b.pb == nil {
		return
	}
	b.pb.Close()
	b.keyed.unlock()
	b.t.store.releaseSeqs(&b.hold)
	b.pb, b.pending = nil, nil
	b.releaseSlabs()
	b.release()
}

// widenFor returns the schema rows need: for a static schema the current
// one (or a SchemaError for a column it lacks); for an inferred one the
// current schema with new columns added (sorted by name) and types
// widened. REQUIRES: mu held.
func (t *Table) widenFor(rows []Row) (schema []Column, changed bool, err error) {
	schema = t.meta.Schema
	if t.meta.Static {
		for r, row := range rows {
			for k, v := range row {
				if _, ok := t.colIndex[k]; !ok {
					if Hidden(k) { // added to any schema (cold.go)
						if schema, changed, err = addHidden(t.name, schema, changed, r, k, v); err != nil {
							return nil, false, err
						}
						continue
					}
					return nil, false, &SchemaError{Table: t.name, Row: r, Column: k, Reason: "column not in the static schema"}
				}
			}
		}
		if changed {
			// The hidden columns were added in the rows' map order: sort
			// them by name, as inferred columns are, so that the schema
			// does not depend on it.
			added := schema[len(t.meta.Schema):]
			slices.SortFunc(added, func(a, b Column) int { return cmp.Compare(a.Name, b.Name) })
		}
		return schema, changed, nil
	}
	var added map[string]Type
	limit := t.columnLimit()
	var over *ColumnLimitError
	for r, row := range rows {
		if len(schema)+len(added)+len(row) > limit {
			// The row may pass the limit: count its new columns first, so
			// that a row that would pass it adds none (rows are taken in
			// order, the first ones keep their columns).
			fresh := 0
			for k, v := range row {
				if v == nil || k == t.sortBy {
					continue
				}
				if _, ok := t.colIndex[k]; ok {
					continue
				}
				if _, ok := added[k]; !ok {
					fresh++
				}
			}
			if n := len(schema) + len(added) + fresh; n > limit {
				if over == nil {
					over = &ColumnLimitError{Table: t.name, Limit: limit}
					over.first = SchemaError{Table: t.name, Row: r, Column: firstNewColumn(row, t.colIndex, added, t.sortBy),
						Reason: fmt.Sprintf("the row would make the inferred schema %d columns, over the table's limit of %d (max_columns)", n, limit)}
				}
				over.Rows = append(over.Rows, r)
				over.Columns = append(over.Columns, n)
				continue
			}
		}
		for k, v := range row {
			if v == nil || k == t.sortBy {
				continue
			}
			vt, ok := inferType(v)
			if !ok {
				return nil, false, &SchemaError{Table: t.name, Row: r, Column: k, Reason: fmt.Sprintf("unsupported value type %T", v)}
			}
			if i, ok := t.colIndex[k]; ok {
				if t.fixedTypes {
					// coerce decides whether the value fits; only a
					// decimal's precision grows.
					if w, ok := widerDecimal(schema[i].Type, v); ok {
						if !changed {
							schema = slices.Clone(schema)
							changed = true
						}
						schema[i].Type = w
					}
					continue
				}
				if w := widen(schema[i].Type, vt); w != schema[i].Type {
					if !changed {
						schema = slices.Clone(schema)
						changed = true
					}
					schema[i].Type = w
				}
				continue
			}
			if added == nil {
				added = map[string]Type{}
			}
			if at, ok := added[k]; ok {
				if !t.fixedTypes { // fixed: the first row's value gives the type
					added[k] = widen(at, vt)
				} else if w, ok := widerDecimal(at, v); ok {
					added[k] = w // but a decimal's precision grows
				}
			} else {
				added[k] = vt
			}
		}
	}
	if over != nil {
		return nil, false, over
	}
	if len(added) > 0 {
		if !changed {
			schema = slices.Clone(schema)
			changed = true
		}
		for _, k := range slices.Sorted(maps.Keys(added)) {
			schema = append(schema, Column{Name: k, Type: added[k]})
		}
	}
	return schema, changed, nil
}

// mismatches turns err, the coercion error of rows into schema, into a
// *TypeMismatchError listing every row with a value that does not fit its
// column, when the table's types are fixed; otherwise it returns err.
func (t *Table) mismatches(rows []Row, schema []Column, trusted []string, err error) error {
	var se *SchemaError
	if !t.typesFixed() || !errors.As(err, &se) {
		return err
	}
	me := &TypeMismatchError{Table: t.name}
	for r, row := range rows {
		for _, col := range schema {
			v := row[col.Name]
			if v == nil {
				continue
			}
			if _, raw := v.(json.RawMessage); raw && col.Type == JSON && slices.Contains(trusted, col.Name) {
				continue
			}
			typ := col.Type
			if col.Name == t.sortBy {
				typ = Timestamp
			}
			if _, cerr := coerce(v, typ); cerr != nil {
				reason := cerr.Error()
				if vt, ok := inferType(v); ok && col.Name != t.sortBy {
					reason = fmt.Sprintf("the value %s (%v) does not fit without loss (%s); a column's type is fixed by its first value or the schema",
						shortValue(v), vt, cerr)
				}
				if len(me.Rows) == 0 {
					me.first = SchemaError{Table: t.name, Row: r, Column: col.Name, Type: typ, Reason: reason}
				}
				reason = fmt.Sprintf("column %q (%v): %s", col.Name, typ, reason)
				me.Rows = append(me.Rows, r)
				me.Columns = append(me.Columns, col.Name)
				me.Reasons = append(me.Reasons, reason)
				break
			}
		}
	}
	if len(me.Rows) == 0 {
		return err
	}
	return me
}

// shortValue is v as a dead letter's reason quotes it: JSON-like, at most
// 40 bytes.
func shortValue(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = fmt.Sprintf("%q", x)
	case json.RawMessage:
		s = string(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			s = fmt.Sprint(x)
		} else {
			s = string(b)
		}
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

// firstNewColumn names a column of row that neither the schema nor added
// has (the smallest, for a stable message).
func firstNewColumn(row Row, have map[string]int, added map[string]Type, sortBy string) string {
	first := ""
	for k, v := range row {
		if v == nil || k == sortBy {
			continue
		}
		if _, ok := have[k]; ok {
			continue
		}
		if _, ok := added[k]; ok {
			continue
		}
		if first == "" || k < first {
			first = k
		}
	}
	return first
}

// coerce converts rows to columns of schema. The sortBy column of a row
// without one gets the ingestion time. fits is false when a row has a
// column schema lacks or a value that one of check's checks finds (a
// type that would widen its column, a decimal declaring more digits: cols
// are then nil). The json.RawMessage values of the json columns named in
// trusted are taken as they are (TrustJSON).
func (t *Table) coerce(rows []Row, schema []Column, check coerceChecks, trusted []string) (cols []colData, fits bool, err error) {
	n := len(schema) * len(rows)
	return t.coerceInto(rows, schema, check, trusted, &colSlab{vals: make([]value, n), nulls: make([]bool, n)})
}

// coerceInto is coerce into the values and nulls of sl (len(schema) ×
// len(rows) of each, zero).
func (t *Table) coerceInto(rows []Row, schema []Column, check coerceChecks, trusted []string, sl *colSlab) (cols []colData, fits bool, err error) {
	now := t.store.opts.Now().UnixNano()
	cols = make([]colData, len(schema))
	// One slab for all columns: two allocations per batch (none when
	// sl comes from the pool), not two per column.
	vals, nulls := sl.vals, sl.nulls
	found := make([]int32, len(rows)) // keys of each row that are columns
	for c, col := range schema {
		cd := colData{name: col.Name, typ: col.Type,
			vals: vals[c*len(rows) : (c+1)*len(rows) : (c+1)*len(rows)], null: nulls[c*len(rows) : (c+1)*len(rows) : (c+1)*len(rows)]}
		isTime := col.Name == t.sortBy
		trust := col.Type == JSON && slices.Contains(trusted, col.Name)
		widens := check&checkDecimals != 0 && !isTime && col.Type.IsDecimal()
		for r, row := range rows {
			v, ok := row[col.Name]
			if ok {
				found[r]++
			}
			if !ok || v == nil {
				if isTime {
					cd.vals[r].i = now
				} else {
					cd.null[r] = true
				}
				continue
			}
			if check&checkWidening != 0 && !isTime {
				if vt, ok := inferType(v); !ok || widen(col.Type, vt) != col.Type {
					return nil, false, nil
				}
			}
			if widens && declaresWiderDecimal(col.Type, v) {
				return nil, false, nil // widenFor widens the column
			}
			if raw, ok := v.(json.RawMessage); ok && trust {
				// In place (TrustJSON): the block is encoded before the append returns.
				cd.vals[r] = value{s: unsafe.String(unsafe.SliceData(raw), len(raw))}
				continue
			}
			val, err := coerce(v, col.Type)
			if err != nil {
				return nil, false, &SchemaError{Table: t.name, Row: r, Column: col.Name, Type: col.Type, Reason: err.Error()}
			}
			cd.vals[r] = val
		}
		cols[c] = cd
	}
	for r, row := range rows {
		if int(found[r]) != len(row) {
			// A column the schema lacks: an error for a static schema, a
			// new column or a null to drop for an inferred one (widenFor
			// decides). The cols are right for the columns they have.
			return cols, false, nil
		}
	}
	return cols, true, nil
}

// writeBlocks groups the batch by (partition, time bucket) and sets one
// block per group in b.
// h is the hold of the batch b belongs to (see seqHold).
func (t *Table) writeBlocks(b *pebble.Batch, cols []colData, h *seqHold) (blocks, bytes int, err error) {
	return t.writeBlocksAt(b, cols, h, nil)
}

// writeBlocksAt is writeBlocks that also records in locs (when not nil,
// one per row of cols) where each row is stored: a keyed table's index.
func (t *Table) writeBlocksAt(b *pebble.Batch, cols []colData, h *seqHold, locs []rowLoc) (blocks, bytes int, err error) {
	var first uint64
	blocks, bytes, err = t.writeBlocksNumbered(b, cols, func(n int) (uint64, error) {
		s, err := t.store.nextSeqs(n, h)
		first = s
		return s, err
	}, locs)
	if err == nil && blocks > 0 {
		t.noteWrite(first, cols) // cold.go: where a continuous cold tier's next run looks
	}
	return blocks, bytes, err
}

// writeBlocksNumbered is writeBlocks with the block sequence numbers taken
// from seqs, which returns the first of n (a Stage numbers its blocks
// itself until it publishes them), and the rows' places recorded in locs
// when it is not nil.
func (t *Table) writeBlocksNumbered(b *pebble.Batch, cols []colData, seqs func(n int) (uint64, error), locs []rowLoc) (blocks, bytes int, err error) {
	timeCol, hashCol := -1, -1
	for i, c := range cols {
		switch c.name {
		case t.sortBy:
			timeCol = i
		case t.hashBy:
			hashCol = i
		}
	}
	span := t.span
	sc := getBlockScratch()
	defer putBlockScratch(sc)
	n := len(cols[timeCol].vals)
	// The groups in order of first row, and their rows. A batch has few
	// groups (its partitions times its time buckets): they are found by
	// the last one hit, then a scan, and a map only past smallGroups (a map
	// lookup per row was a quarter of this function).
	const smallGroups = 16
	keys, rowsOf := sc.keys[:0], sc.rowsOf[:0]
	var index map[groupKey]int
	last := -1
	for r := range n {
		g := groupKey{bucket: floorTime(cols[timeCol].vals[r].i, span)}
		if hashCol >= 0 {
			c := &cols[hashCol]
			g.hash = partitionHash(c.typ, c.vals[r], c.null[r])
		}
		at := -1
		switch {
		case last >= 0 && keys[last] == g:
			at = last
		case index != nil:
			if i, ok := index[g]; ok {
				at = i
			}
		default:
			for i := range keys {
				if keys[i] == g {
					at = i
					break
				}
			}
		}
		if at < 0 {
			at = len(keys)
			keys = append(keys, g)
			if len(rowsOf) < cap(rowsOf) {
				rowsOf = rowsOf[:len(rowsOf)+1]
				rowsOf[at] = rowsOf[at][:0] // a slice of an earlier batch's, reused
			} else {
				rowsOf = append(rowsOf, nil)
			}
			if index != nil {
				index[g] = at
			} else if len(keys) > smallGroups {
				index = make(map[groupKey]int, 2*len(keys))
				for i, k := range keys {
					index[k] = i
				}
			}
		}
		rowsOf[at] = append(rowsOf[at], r)
		last = at
	}
	// Keys in order: Pebble's memtable inserter reuses the previous
	// insertion's splice, so a sorted batch costs less skiplist search
	// (with one-row blocks the search was the top of the profile).
	sc.keys, sc.rowsOf = keys, rowsOf
	order := sc.order[:0]
	for i := range keys {
		order = append(order, i)
	}
	sc.order = order
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(keys[a].hash, keys[b].hash); c != 0 {
			return c
		}
		return cmp.Compare(keys[a].bucket, keys[b].bucket)
	})
	seq, err := seqs(len(order))
	if err != nil {
		return 0, 0, err
	}
	times := cols[timeCol].vals
	payload, val, key, vals := sc.payload, sc.val, sc.key, sc.vals
	defer func() { sc.payload, sc.val, sc.key, sc.vals = payload, val, key, vals }()
	for i, gi := range order {
		g, idx := keys[gi], rowsOf[gi]
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(times[a].i, times[b].i) })
		key = blockKey(key[:0], t.id, g.hash, times[idx[0]].i, seq+uint64(i))
		if locs != nil {
			for j, r := range idx {
				locs[r] = rowLoc{hash: g.hash, minTime: times[idx[0]].i, seq: seq + uint64(i), row: j, rows: len(idx)}
			}
		}
		if textBytes(cols, idx) >= hugeBlockBytes {
			n, err := setHugeBlock(b, key, cols, idx) // hugeblock.go: no payload, no copy
			if err != nil {
				return 0, 0, err
			}
			bytes += len(key) + n
			continue
		}
		payload, vals = encodeBlockWith(payload[:0], vals, cols, idx)
		val = compressBlock(val[:0], payload)
		if err := b.Set(key, val, nil); err != nil {
			return 0, 0, err
		}
		bytes += len(key) + len(val)
	}
	return len(order), bytes, nil
}

// groupKey is a block's partition and time bucket.
type groupKey struct {
	hash   uint64
	bucket int64
}

// blockScratch is writeBlocksNumbered's memory, reused across batches: its
// rows per block and its block buffers were a third of the bytes an
// ingest allocated per row.
type blockScratch struct {
	keys              []groupKey
	rowsOf            [][]int
	order             []int
	payload, val, key []byte
	vals              []byte // encodeBlockWith's
}

var blockScratchPool sync.Pool

// maxPooledScratch bounds the bytes (and row indexes) of a scratch kept
// for reuse: a huge block's buffers are dropped.
const maxPooledScratch = 4 << 20

func getBlockScratch() *blockScratch {
	if sc, ok := blockScratchPool.Get().(*blockScratch); ok {
		return sc
	}
	return &blockScratch{}
}

func putBlockScratch(sc *blockScratch) {
	rows := 0
	for _, r := range sc.rowsOf[:cap(sc.rowsOf)] {
		rows += cap(r)
	}
	if rows > maxPooledScratch/8 || max(cap(sc.payload), cap(sc.val), cap(sc.vals)) > maxPooledScratch {
		return
	}
	blockScratchPool.Put(sc)
}

// Stats are counters since the table was opened.
type Stats struct {
	Appends, RowsAppended, BlocksWritten, BytesWritten int64
	Queries, RowsScanned, RowsEmitted, BlocksRead      int64
}

// Stats returns the table's counters.
func (t *Table) Stats() Stats {
	return Stats{
		Appends: t.appends.Load(), RowsAppended: t.rowsAppended.Load(),
		BlocksWritten: t.blocksWritten.Load(), BytesWritten: t.bytesWritten.Load(),
		Queries: t.queries.Load(), RowsScanned: t.rowsScanned.Load(),
		RowsEmitted: t.rowsEmitted.Load(), BlocksRead: t.blocksRead.Load(),
	}
}
