package table

import (
	"encoding/json"
	"time"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/slab"
)

// Boxing values into `any` allocates once per value: a boxer copies a
// block's column into one fresh slab (internal/slab) and makes each
// interface point into it.

// boxer makes the Row values of one output column of one block.
type boxer struct {
	col   *decodedCol // nil: the block lacks the column (all null)
	slab  slab.Slab
	found *foundValues // a path column's values (jsonpath.go); nil: col's
}

// lookup prepares b for a path column of a block of n rows: the values
// path addresses in column c (nil: the block lacks it) at rows, into buf
// (nil: fresh arrays, for values that outlive the block's job).
func (b *boxer) lookup(c *decodedCol, n int, rows []int32, path *Path, buf *foundValues) {
	if buf == nil {
		buf = new(foundValues)
	}
	buf.fill(c, n, rows, path)
	*b = boxer{found: buf}
}

// reset prepares b for column c of a block of rows rows: it copies the
// column into a fresh slab (never written again once values point into it).
func (b *boxer) reset(c *decodedCol, rows int) {
	*b = boxer{col: c}
	if c == nil || rows == 0 {
		return
	}
	switch c.typ {
	case Int64:
		b.slab = slab.Of(append([]int64(nil), c.ints[:rows]...))
	case Float64:
		b.slab = slab.Of(append([]float64(nil), c.floats[:rows]...))
	case String:
		b.slab = slab.Of(append([]string(nil), c.strs[:rows]...))
	case JSON:
		vals := make([]json.RawMessage, rows)
		for r := range vals {
			vals[r] = json.RawMessage(c.strs[r])
		}
		b.slab = slab.Of(vals)
	case Timestamp:
		vals := make([]time.Time, rows)
		for r := range vals {
			vals[r] = time.Unix(0, c.ints[r]).UTC()
		}
		b.slab = slab.Of(vals)
	default:
		b.slab = newTypeSlab(c, rows)
	}
}

// newTypeSlab is the slab of a column of one of the types beyond json
// (their Go values are coltype's, and a bytes column's a fresh []byte per
// value): both boxers make them the same way.
func newTypeSlab(c *decodedCol, rows int) slab.Slab {
	switch {
	case c.typ == Date:
		vals := make([]coltype.DateValue, rows)
		for r := range vals {
			vals[r] = coltype.DateValue(c.ints[r])
		}
		return slab.Of(vals)
	case c.typ == TimeOfDay:
		vals := make([]coltype.TimeOfDayValue, rows)
		for r := range vals {
			vals[r] = coltype.TimeOfDayValue(c.ints[r])
		}
		return slab.Of(vals)
	case c.typ.IsDecimal():
		vals := make([]coltype.DecimalValue, rows)
		for r := range vals {
			if c.typ.IsWideDecimal() {
				if !c.isNull(r) {
					vals[r] = wideDecimalValue(c.strs[r], c.typ.Scale())
				}
				continue
			}
			vals[r] = coltype.DecimalValue{Unscaled: c.ints[r], Scale: c.typ.Scale()}
		}
		return slab.Of(vals)
	case c.typ == UUID:
		vals := make([]coltype.UUIDValue, rows)
		for r := range vals {
			copy(vals[r][:], c.strs[r])
		}
		return slab.Of(vals)
	case c.typ == Bytes:
		vals := make([][]byte, rows)
		for r := range vals {
			if !c.isNull(r) {
				vals[r] = []byte(c.strs[r])
			}
		}
		return slab.Of(vals)
	}
	return slab.Slab{}
}

// at returns row r's value: int64, float64, string, bool, time.Time (UTC),
// json.RawMessage, []byte or a coltype value (DateValue, TimeOfDayValue,
// UUIDValue, DecimalValue), nil for null. The interface is built on the stack
// pointing into the slab: no allocation, no write barrier until the caller
// stores it.
func (b *boxer) at(r int) any {
	if b.found != nil {
		return b.found.at(r)
	}
	c := b.col
	if c == nil || c.isNull(r) {
		return nil
	}
	if c.typ == Bool {
		return c.ints[r] != 0 // bools box without allocating
	}
	return b.slab.At(r)
}
