package table

import (
	"context"
	"fmt"

	"github.com/sluicedb/sluice/coltype"
)

// A block-wise query hands its reader each decoded block's matching rows as
// typed column vectors instead of one boxed value per row and column: a
// bulk reader (the cold tier's compaction, which copies the rows into Arrow
// column builders) then costs no interface, no slab and no type switch per
// value. The blocks are decoded on a number of workers the caller chooses
// (it bounds the decoded blocks held: at most workers besides the one
// being emitted) and emitted in key order on the caller's goroutine, as in
// a row-wise query (scan.go).

// ColumnVector is one projected column of a decoded block, converted to the
// column's schema type: Int64, Timestamp (unix ns) and Bool (0 or 1) in
// Ints, Float64 in Floats, String and JSON in Strs. Absent: the block lacks
// the column, every row is null. The strings point into the decoded block
// (no copy of their bytes per block): like the rest of the vector, they
// are valid only during the emit call; clone one to keep it.
type ColumnVector struct {
	Type    Type
	Absent  bool
	present []bool // nil: no null
	Ints    []int64
	Floats  []float64
	Strs    []string
}

// Null reports whether row r is null.
func (c *ColumnVector) Null(r int32) bool {
	return c.Absent || (c.present != nil && !c.present[r])
}

// Decimal is row r of a decimal column: its unscaled value is Ints[r] for
// a decimal of up to 18 digits, and 16 bytes of Strs[r] for a wider one
// (a layout of the store's own, so read it here).
func (c *ColumnVector) Decimal(r int32) coltype.DecimalValue {
	if c.Type.IsWideDecimal() {
		return wideDecimalValue(c.Strs[r], c.Type.Scale())
	}
	return coltype.DecimalValue{Unscaled: c.Ints[r], Scale: c.Type.Scale()}
}

// HasNulls reports whether some row of the block may be null.
func (c *ColumnVector) HasNulls() bool { return c.Absent || c.present != nil }

// BlockRows are the matching rows of one block: Rows indexes the vectors
// of Cols (in the query's projection order), in emit order. Everything in
// it is valid only during the emit call that receives it.
type BlockRows struct {
	Rows []int32
	Cols []ColumnVector
}

// QueryBlocksSeqs is QueryValuesSeqs block by block: emit gets the
// projected columns once (cols) and each block's matching rows, in the
// order QueryValuesSeqs emits them. workers blocks are decoded at once
// (at most 1: on the caller's goroutine); q.Limit and q.Serial are
// ignored.
func (t *Table) QueryBlocksSeqs(ctx context.Context, q Query, seqFrom, seqLimit uint64, workers int, emit func(cols []Column, b *BlockRows) error) error {
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	t.queries.Add(1)
	p, err := t.plan(q)
	if err != nil || p.empty {
		return err
	}
	if len(q.Paths) > 0 {
		return fmt.Errorf("table %s: %w: a block-wise query has no path columns", p.tableName, ErrBadQuery)
	}
	p.seqLimit, p.seqFrom = seqLimit, seqFrom
	p.limit = 0
	s := &blockScan{t: t, out: p.out, emit: emit}
	// The jobs decode the columns and find the rows; nothing is boxed.
	p.out = nil
	s.cols = make([]Column, len(s.out))
	for i, c := range s.out {
		s.cols[i] = Column{Name: c.name, Type: c.typ}
	}
	s.rows.Cols = make([]ColumnVector, len(s.out))
	// At most workers blocks decoded ahead: the memory a caller bounds.
	d := &scanDriver{t: t, p: p, workers: workers, depth: workers, borrowStrings: true, emit: s.emitJob}
	return d.finish(t.scanBlocks(ctx, p, d))
}

// blockFeeder takes a query's blocks in key order (scanBlocks), each with
// its dead-row mark (nil for none).
type blockFeeder interface {
	block(ctx context.Context, key, val, dead []byte) (done bool, err error)
}

// blockScan emits a block-wise query's decoded blocks.
type blockScan struct {
	t    *Table
	out  []outCol
	cols []Column
	emit func([]Column, *BlockRows) error
	rows BlockRows
}

func (s *blockScan) emitJob(j *blockJob) (bool, error) {
	if j.err != nil {
		return true, j.err
	}
	if len(j.rows) == 0 {
		return false, nil
	}
	for i, o := range s.out {
		v := &s.rows.Cols[i]
		c := j.byName[o.name]
		if c == nil {
			*v = ColumnVector{Type: o.typ, Absent: true}
			continue
		}
		*v = ColumnVector{Type: c.typ, present: c.present, Ints: c.ints, Floats: c.floats, Strs: c.strs}
	}
	s.rows.Rows = j.rows
	s.t.rowsEmitted.Add(int64(len(j.rows)))
	if err := s.emit(s.cols, &s.rows); err != nil {
		return true, err
	}
	return false, nil
}
