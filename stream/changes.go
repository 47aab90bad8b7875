package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/table"
)

// Changes makes a Kafka source a change stream (docs/changes.md): its
// messages say what happens to a key of a table with a primary key, and
// its rows carry table.OperationColumn. In every format a message with a
// null value (a tombstone) deletes its message key.
type Changes struct {
	// Format is how a message says its operation: ChangesDebezium,
	// ChangesField or ChangesTombstones.
	Format string
	// Field is the column that names a row's operation (ChangesField); it
	// is not stored.
	Field string
	// Delete are the Field values that delete the row's key (default
	// DefaultDeleteValues).
	Delete []string
	// KeyColumn is the column a scalar message key fills (a tombstone's,
	// or a Debezium delete's without a before image); a JSON object key
	// names its columns itself.
	KeyColumn string
}

// The change formats.
const (
	// ChangesDebezium: Debezium's envelope (before, after, op, source,
	// ts_ms), JSON with or without its schema/payload wrapper, or Avro
	// through the Schema Registry.
	ChangesDebezium = "debezium"
	// ChangesField: plain rows with a column naming the operation.
	ChangesField = "field"
	// ChangesTombstones: plain rows are upserts; only null values delete.
	ChangesTombstones = "tombstones"
)

// ChangeFormats are the values of Changes.Format.
var ChangeFormats = []string{ChangesDebezium, ChangesField, ChangesTombstones}

// DefaultDeleteValues are the Field values that delete when Changes.Delete
// is empty: Debezium's op and the word.
var DefaultDeleteValues = []string{"d", "delete"}

// The hidden columns of a Debezium event's source position
// (ingest.ChangePosition): a store that orders one key's changes across
// partitions or topics reads them; the cold tier does not write them.
const (
	ChangeTimeColumn = table.HiddenPrefix + "change_ms"
	ChangeLSNColumn  = table.HiddenPrefix + "change_lsn"
)

// EnsureDefaults fills c's zero fields with their defaults and returns c.
func (c *Changes) EnsureDefaults() *Changes {
	if c != nil && c.Format == ChangesField && len(c.Delete) == 0 {
		c.Delete = DefaultDeleteValues
	}
	return c
}

func (c *Changes) check() error {
	if c == nil {
		return nil
	}
	if !slices.Contains(ChangeFormats, c.Format) {
		return fmt.Errorf("stream: changes format %q: want one of %v", c.Format, ChangeFormats)
	}
	if c.Format == ChangesField && c.Field == "" {
		return errors.New("stream: changes format field: no field named")
	}
	return nil
}

// messageChange is what a change stream's message does, read once
// (Writer.readChanges) and kept across the retries of its batch.
type messageChange struct {
	read      bool
	change    ingest.Change
	tombstone bool // a null value: the row is the message key's
	// original is the body as received when Body was replaced by the
	// row's JSON object (Debezium JSON, a tombstone's key): dead letters
	// keep what the source sent.
	original []byte
	// row is the decoded row of a Schema Registry message (the map path
	// takes it instead of decoding the body).
	row ingest.Row
}

// readChanges reads the change event of each message of a change stream
// not read yet: a Debezium JSON envelope or a tombstone's key becomes the
// body (the row's JSON object, decoded as any NDJSON row), a registry
// envelope the decoded row. A message that is not a valid change event
// gets its reason as its body error: it is a dead letter. It fails only
// when the registry cannot be reached (the batch is retried).
func (w *Writer) readChanges(ctx context.Context, msgs []Message) error {
	for i := range msgs {
		m := &msgs[i]
		if m.change.read {
			continue
		}
		w.unpack(m)
		b, err := body(m)
		if err != nil {
			m.change.read = true
			continue
		}
		err = w.readChange(ctx, m, b)
		if errors.Is(err, schemaformat.ErrUnavailable) {
			return fmt.Errorf("stream: decoding the message at %s: %w", w.origin(m), err)
		}
		m.change.read = true
		if err != nil {
			m.bodyErr = fmt.Errorf("change event: %w", err)
		}
	}
	return nil
}

func (w *Writer) readChange(ctx context.Context, m *Message, b []byte) error {
	if len(b) == 0 {
		m.change.change.Delete, m.change.tombstone = true, true
		if w.registry != nil {
			row, err := w.keyRow(ctx, m.Key)
			if err != nil {
				return fmt.Errorf("tombstone: %w", err)
			}
			m.change.row = row
			return nil
		}
		obj, err := ingest.KeyObject(m.Key, w.changes.KeyColumn)
		if err != nil {
			return fmt.Errorf("tombstone: %w", err)
		}
		m.change.original, m.Body = m.Body, obj
		return nil
	}
	if w.changes.Format != ChangesDebezium {
		return nil
	}
	if w.registry == nil {
		row, c, err := ingest.DebeziumJSON(b, m.Key, w.changes.KeyColumn)
		if err != nil {
			return err
		}
		m.change.change = c
		m.change.original, m.Body = m.Body, row
		return nil
	}
	env, err := w.registry.Decode(ctx, b)
	if err != nil {
		return err
	}
	row, c, err := ingest.DebeziumRow(env, func() (ingest.Row, error) { return w.keyRow(ctx, m.Key) })
	if err != nil {
		return err
	}
	m.change.change, m.change.row = c, row
	return nil
}

// keyRow decodes a message key into the row of its key columns: through
// the registry when it is in the registry's wire format (Debezium's Avro
// converter writes keys so), else as JSON (ingest.KeyObject).
func (w *Writer) keyRow(ctx context.Context, key []byte) (ingest.Row, error) {
	if w.registry != nil && len(key) > 5 && key[0] == 0 {
		row, err := w.registry.Decode(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("message key: %w", err)
		}
		if len(row) == 0 {
			return nil, ingest.ErrNoKey
		}
		return row, nil
	}
	obj, err := ingest.KeyObject(key, w.changes.KeyColumn)
	if err != nil {
		return nil, err
	}
	return ingest.ObjectRow(obj)
}

// addChanges sets the operation and the source position columns of the
// rows of msgs (d's rows, as maps): a field format row's operation from its
// field, any other's from its message.
func (w *Writer) addChanges(msgs []Message, d *decoded) {
	if w.changes == nil {
		return
	}
	field := ingest.OperationField{Column: w.changes.Field, Delete: w.changes.Delete}
	for i, r := range d.rows {
		m := &msgs[d.msgOf[i]]
		deletes := m.change.change.Delete
		if w.changes.Format == ChangesField && !m.change.tombstone {
			deletes = field.Take(r)
		}
		if deletes {
			r[table.OperationColumn] = table.OperationDelete
		}
		if p := m.change.change.Position; p.HasTime {
			r[ChangeTimeColumn] = p.TimeMillis
		}
		if p := m.change.change.Position; p.HasLSN {
			r[ChangeLSNColumn] = p.LSN
		}
	}
}

// addColumnsChanges is addChanges by column (the by-column path takes
// Debezium JSON and tombstones, whose operation is the message's).
func (w *Writer) addColumnsChanges(msgs []Message, msgOf []int32, cb *colbatch.Batch) {
	if w.changes == nil || cb.Len == 0 {
		return
	}
	var op, ms, lsn []colbatch.Cell
	for r, m := range msgOf {
		c := msgs[m].change.change
		if c.Delete {
			if op == nil {
				op = cb.Cols[cb.ColumnOf(table.OperationColumn)].Cells
			}
			op[r] = colbatch.Cell{Kind: colbatch.String, S: table.OperationDelete}
		}
		if c.Position.HasTime {
			if ms == nil {
				ms = cb.Cols[cb.ColumnOf(ChangeTimeColumn)].Cells
			}
			ms[r] = colbatch.Cell{Kind: colbatch.Int, I: c.Position.TimeMillis}
		}
		if c.Position.HasLSN {
			if lsn == nil {
				lsn = cb.Cols[cb.ColumnOf(ChangeLSNColumn)].Cells
			}
			lsn[r] = colbatch.Cell{Kind: colbatch.Int, I: c.Position.LSN}
		}
	}
}

// changesByColumn reports whether a change stream's batches may take the
// by-column path: only when each row's operation is its message's (not a
// field's) and the body is JSON (a registry envelope is decoded as a map).
func (w *Writer) changesByColumn() bool {
	return w.changes == nil || (w.changes.Format != ChangesField && w.registry == nil)
}

// deadLetterBody is the body a dead letter of m keeps: what the source
// sent.
func (m *Message) deadLetterBody() []byte {
	if m.change.original != nil || m.change.tombstone {
		return m.change.original
	}
	return m.Body
}
