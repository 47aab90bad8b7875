package table

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// AddColumns is Add for rows held by column (as package ingest's JSON
// decoders give them): the same conversions, the same checks and the same
// errors (SchemaError.Row is the row's index in cb), without a map lookup
// per value. A part that needs the schema widened (or, for a static schema,
// has a column it lacks) is added as cb.Rows() through Add, which decides
// and names the error. The batch need not outlive the call; the strings of
// its cells must stay unchanged until Commit.
func (b *Appender) AddColumns(ctx context.Context, cb *colbatch.Batch) error {
	if b.failed || b.done {
		return fmt.Errorf("table %s: append to a failed or finished batch", b.t.name)
	}
	if err := ctx.Err(); err != nil {
		b.failed = true
		return err
	}
	if cb.Len == 0 {
		return nil
	}
	trusted := trustedJSON(ctx)
	schema, check := b.t.current()
	sl := getSlab(len(schema) * cb.Len)
	cols, fits, err := b.t.coerceColumns(cb, schema, check, trusted, sl)
	if err != nil || !fits {
		putSlab(sl)
	}
	if err != nil && b.t.typesFixed() {
		// Add lists every row that does not fit (a *TypeMismatchError the
		// batch survives), the rows as maps: the rare path.
		return b.Add(ctx, cb.Rows())
	}
	if err != nil {
		b.failed = true
		return err
	}
	if !fits {
		return b.Add(ctx, cb.Rows())
	}
	if err := b.addCols(ctx, cols, cb.Len, sl); err != nil {
		b.failed = true
		return err
	}
	return nil
}

// coerceColumns is coerce for a colbatch.Batch: the same conversions in
// the same order (column by column of the schema, row by row), so that
// the first error is the one coerce would give for cb.Rows().
func (t *Table) coerceColumns(cb *colbatch.Batch, schema []Column, check coerceChecks, trusted []string, sl *colSlab) (cols []colData, fits bool, err error) {
	n := cb.Len
	now := t.store.opts.Now().UnixNano()
	cols = make([]colData, len(schema))
	vals, nulls := sl.vals, sl.nulls
	used := 0 // columns of cb that are in the schema
	for c, col := range schema {
		cd := colData{name: col.Name, typ: col.Type,
			vals: vals[c*n : (c+1)*n : (c+1)*n], null: nulls[c*n : (c+1)*n : (c+1)*n]}
		isTime := col.Name == t.sortBy
		trust := col.Type == JSON && slices.Contains(trusted, col.Name)
		widens := check&checkDecimals != 0 && !isTime && col.Type.IsDecimal()
		var cells []colbatch.Cell
		if i := cb.Find(col.Name); i >= 0 {
			cells = cb.Cols[i].Cells
			used++
		}
		if cells == nil {
			// No row has the column.
			for r := range n {
				if isTime {
					cd.vals[r].i = now
				} else {
					cd.null[r] = true
				}
			}
			cols[c] = cd
			continue
		}
		same, isString := sameKind(col.Type)
		for r, cell := range cells[:n] {
			if cell.Kind == same {
				// The common case, hoisted out of coerceCell: the cell is
				// the value as it is (and widens nothing). Only the field
				// of the type is written: the slab is zero, and storing a
				// nil string would cost a write barrier during a
				// collection.
				if isString {
					cd.vals[r].s = cell.S
				} else {
					cd.vals[r].i = cell.I
				}
				continue
			}
			if cell.Kind == colbatch.Absent || cell.Kind == colbatch.Null {
				if isTime {
					cd.vals[r].i = now
				} else {
					cd.null[r] = true
				}
				continue
			}
			if check&checkWidening != 0 && !isTime {
				if vt, ok := cellType(cb, cell); !ok || widen(col.Type, vt) != col.Type {
					return nil, false, nil
				}
			}
			if widens && cell.Kind == colbatch.Value {
				if v, _ := cb.Any(cell); declaresWiderDecimal(col.Type, v) {
					return nil, false, nil // Add widens the column
				}
			}
			val, err := coerceCell(cb, cell, col.Type, trust)
			if err != nil {
				return nil, false, &SchemaError{Table: t.name, Row: r, Column: col.Name, Type: col.Type, Reason: err.Error()}
			}
			cd.vals[r] = val
		}
		cols[c] = cd
	}
	if used < len(cb.Cols) {
		// A column of cb the schema lacks, present in some row: Add decides
		// (widening, or the static schema's error).
		for i := range cb.Cols {
			if slices.ContainsFunc(schema, func(c Column) bool { return c.Name == cb.Cols[i].Name }) {
				continue
			}
			for _, cell := range cb.Cols[i].Cells {
				if cell.Kind != colbatch.Absent {
					return cols, false, nil
				}
			}
		}
	}
	return cols, true, nil
}

// sameKind returns the kind of cell whose value a column of type t takes
// as it is (in value.s when isString, else value.i), or an impossible kind.
func sameKind(t Type) (k colbatch.Kind, isString bool) {
	switch t {
	case Int64:
		return colbatch.Int, false
	case Float64:
		return colbatch.Float, false
	case Bool:
		return colbatch.Bool, false
	case String:
		return colbatch.String, true
	}
	return noKind, false
}

// noKind is no cell's kind.
const noKind colbatch.Kind = 255

// colSlab is the memory of one part's typed columns (every column's values
// and nulls in one array each), reused across batches: allocating it per
// batch was half the ingest's allocated bytes, and so of its garbage
// collections.
type colSlab struct {
	vals  []value
	nulls []bool
}

var slabPool sync.Pool

// maxPooledSlab bounds the values of a slab kept for reuse (24 bytes each).
const maxPooledSlab = 1 << 20

// getSlab returns a slab of n zero values and nulls.
func getSlab(n int) *colSlab {
	sl, _ := slabPool.Get().(*colSlab)
	if sl == nil || cap(sl.vals) < n {
		return &colSlab{vals: make([]value, n), nulls: make([]bool, n)}
	}
	sl.vals, sl.nulls = sl.vals[:n], sl.nulls[:n]
	return sl
}

// putSlab gives sl back for reuse; nothing may use its values after.
func putSlab(sl *colSlab) {
	if sl == nil || cap(sl.vals) > maxPooledSlab {
		return
	}
	clear(sl.vals[:cap(sl.vals)]) // no strings kept alive, zero for the next
	clear(sl.nulls[:cap(sl.nulls)])
	slabPool.Put(sl)
}

// cellType is inferType of a cell's value.
func cellType(cb *colbatch.Batch, c colbatch.Cell) (Type, bool) {
	switch c.Kind {
	case colbatch.Int:
		return Int64, true
	case colbatch.Float:
		return Float64, true
	case colbatch.Bool:
		return Bool, true
	case colbatch.String:
		return String, true
	}
	v, _ := cb.Any(c)
	return inferType(v)
}

// coerceCell is coerce of a cell's value (not null): the common cases
// without boxing it, the others through coerce itself.
func coerceCell(cb *colbatch.Batch, c colbatch.Cell, t Type, trust bool) (value, error) {
	switch {
	case c.Kind == colbatch.Int && t == Int64, c.Kind == colbatch.Float && t == Float64, c.Kind == colbatch.Bool && t == Bool:
		return value{i: c.I}, nil
	case c.Kind == colbatch.Int && t == Float64:
		return intToFloat(c.I)
	case c.Kind == colbatch.String && t == String:
		return value{s: c.S}, nil
	case c.Kind == colbatch.String && t == Timestamp:
		ns, err := parseTimeString(c.S)
		return value{i: ns}, err
	case c.Kind == colbatch.Int && t == Timestamp:
		ns, err := unixGuess(c.I)
		return value{i: ns}, err
	case c.Kind == colbatch.Float && t == Timestamp:
		ns, err := unixGuessFloat(c.Float())
		return value{i: ns}, err
	case c.Kind == colbatch.Int && t == String:
		return value{s: strconv.FormatInt(c.I, 10)}, nil
	case c.Kind == colbatch.Float && t == Int64:
		f := c.Float()
		if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
			return value{i: int64(f)}, nil
		}
	}
	v, _ := cb.Any(c)
	if raw, ok := v.(json.RawMessage); ok && trust {
		// In place (TrustJSON), as coerce does.
		return value{s: unsafe.String(unsafe.SliceData(raw), len(raw))}, nil
	}
	return coerce(v, t)
}

// ColumnAdder is the Appender's AddColumns, for callers that hold an
// interface.
type ColumnAdder interface {
	AddColumns(ctx context.Context, cb *colbatch.Batch) error
}

var _ ColumnAdder = (*Appender)(nil)
