package table

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by operations on a closed Store.
	ErrClosed = errors.New("table: store closed")
	// ErrLocked is wrapped by Open when another process holds the store.
	ErrLocked = errors.New("store locked")
	// ErrUnknownColumn is wrapped by query errors naming a column the table
	// does not have.
	ErrUnknownColumn = errors.New("unknown column")
	// ErrBadQuery is wrapped by errors in a Query that no table state can
	// make right: a predicate value that does not convert to its column's
	// type, an operator the type lacks, a negative limit (the caller's
	// error, an HTTP 400).
	ErrBadQuery = errors.New("bad query")
	// ErrTooManyColumns is wrapped (with a *SchemaError naming the first
	// row) when rows would take an inferred schema past the table's column
	// limit (SetMaxColumns); see ColumnLimitError.
	ErrTooManyColumns = errors.New("too many columns")
	// ErrTypeMismatch is wrapped (with a *SchemaError naming the first row)
	// when values do not fit the fixed types of their columns without
	// loss; see TypeMismatchError.
	ErrTypeMismatch = errors.New("value does not fit its column's type")
)

// TypeMismatchError reports the rows of an append whose values do not fit
// their columns' types without loss, in a table whose types do not change
// (a static schema, or SetFixedTypes): 1.5 or "abc" for an int64 column, a
// number for a bool column. Nothing of the append was stored; every other
// row fits, so a caller that routes Rows elsewhere (a dead-letter table)
// can append the rest. It unwraps to ErrTypeMismatch and to a *SchemaError
// about Rows[0].
type TypeMismatchError struct {
	Table string
	// Rows are the indices (in the rows given) of the rows that do not
	// fit, in order; Columns the first column of each that does not, and
	// Reasons why (naming the value and both types).
	Rows    []int
	Columns []string
	Reasons []string
	first   SchemaError
}

func (e *TypeMismatchError) Error() string { return e.first.Error() }

// ErrorWithoutRow is the message without the row index (ingest.RowError).
func (e *TypeMismatchError) ErrorWithoutRow() string { return e.first.ErrorWithoutRow() }

// LeftOut returns Rows (ingest's pipeline routes them to the dead-letter
// table and appends the rest).
func (e *TypeMismatchError) LeftOut() []int { return e.Rows }

// RowReason is why row Rows[i] was left out, for a dead letter.
func (e *TypeMismatchError) RowReason(i int) string {
	return fmt.Sprintf("table %s: %s", e.Table, e.Reasons[i])
}

// RowColumn is the column that row Rows[i] did not fit, for a dead letter.
func (e *TypeMismatchError) RowColumn(i int) string { return e.Columns[i] }

func (e *TypeMismatchError) Unwrap() []error { return []error{&e.first, ErrTypeMismatch} }

// ColumnLimitError reports the rows of an append that would take an inferred
// schema past the table's column limit. Nothing of the append was stored
// and the schema did not change; every other row fits, so a caller that
// routes Rows elsewhere (a dead-letter table) can append the rest. It
// unwraps to ErrTooManyColumns and to a *SchemaError about Rows[0].
type ColumnLimitError struct {
	Table string
	Limit int
	// Rows are the indices (in the rows given) of the rows left out, in
	// order; Columns how many columns the schema would have had with each.
	Rows, Columns []int
	first         SchemaError
}

func (e *ColumnLimitError) Error() string { return e.first.Error() }

// LeftOut returns Rows (ingest's pipeline routes them to the dead-letter
// table and appends the rest).
func (e *ColumnLimitError) LeftOut() []int { return e.Rows }

// ErrorWithoutRow is the message without the row index (ingest.RowError).
func (e *ColumnLimitError) ErrorWithoutRow() string { return e.first.ErrorWithoutRow() }

// RowReason is why row Rows[i] was left out, for a dead letter.
func (e *ColumnLimitError) RowReason(i int) string {
	return fmt.Sprintf("table %s: the row would make the inferred schema %d columns, over the table's limit of %d (max_columns); its new columns were not added", e.Table, e.Columns[i], e.Limit)
}

func (e *ColumnLimitError) Unwrap() []error { return []error{&e.first, ErrTooManyColumns} }

// SchemaError reports a value that does not fit the table's schema (or an
// event time that does not parse). Append rejects the whole batch with it.
type SchemaError struct {
	Table  string
	Row    int // index of the row in the Append call
	Column string
	Type   Type // the column's type
	Reason string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("table %s: row %d: %s", e.Table, e.Row, e.detail())
}

// ErrorWithoutRow is the message without the row index, for a caller that
// names the row itself (by its input line: ingest.RowError).
func (e *SchemaError) ErrorWithoutRow() string {
	return fmt.Sprintf("table %s: %s", e.Table, e.detail())
}

func (e *SchemaError) detail() string {
	if !validType(e.Type) { // a column the schema lacks has no type
		return fmt.Sprintf("column %q: %s", e.Column, e.Reason)
	}
	return fmt.Sprintf("column %q (%v): %s", e.Column, e.Type, e.Reason)
}

// CorruptionError reports stored bytes that do not decode. Use errors.As.
type CorruptionError struct {
	Key    []byte // the Pebble key of the block or metadata entry
	Offset int    // byte offset in the (decompressed) value
	Reason string
	Err    error // underlying error, if any
}

func (e *CorruptionError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("table: corrupt value at key %x offset %d: %s: %v", e.Key, e.Offset, e.Reason, e.Err)
	}
	return fmt.Sprintf("table: corrupt value at key %x offset %d: %s", e.Key, e.Offset, e.Reason)
}

func (e *CorruptionError) Unwrap() error { return e.Err }
