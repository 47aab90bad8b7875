package table

import (
	"encoding/json"
	"time"

	"github.com/sluicedb/sluice/internal/slab"
)

// Boxing values into `any` allocates once per value: a boxer copies a
// block's column into one fresh slab (internal/slab) and makes each
// interface point into it.

// boxer makes the Row values of one output column of one block.
type boxer struct {
	col  *decodedCol // nil: the block lacks the column (all null)
	slab slab.Slab
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
	}
}

// at returns row r's value: int64, float64, string, bool, time.Time (UTC)
// or json.RawMessage, nil for null. The interface is built on the stack
// pointing into the slab: no allocation, no write barrier until the caller
// stores it.
func (b *boxer) at(r int) any {
	c := b.col
	if c == nil || c.isNull(r) {
		return nil
	}
	if c.typ == Bool {
		return c.ints[r] != 0 // bools box without allocating
	}
	return b.slab.At(r)
}
