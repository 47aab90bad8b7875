package schemaformat

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// rowAppender is a body decoder that writes a row's cells into a column
// batch itself, without a map per row.
type rowAppender interface {
	appendRow(body []byte, cb *colbatch.Batch, row int, cache *columnCache) error
}

// columnCache holds the batch's column indexes of one plan's fields, so
// that the rows of a batch look their columns up once, not once a field.
type columnCache struct {
	plan any
	cols []int
	// values[i] are the string values of column cols[i] met in the batch:
	// low-cardinality columns (a country, an action) then cost no
	// allocation per row. Kept only when keep is set (a batch of rows,
	// not one).
	values []stringValues
	keep   bool
	// times are the timestamps of timeCell's cells, in blocks.
	times []time.Time
}

type stringValues struct {
	vals map[string]string
	off  bool
}

// maxValues bounds one column's kept values, maxValueLen the length of a
// kept value: a column of ever-new values stops being kept.
const (
	maxValues   = 256
	maxValueLen = 64
)

// str returns b as a string, the one kept for column i when b is one of
// its values.
func (c *columnCache) str(i int, b []byte) string {
	s, _ := c.keptStr(i, b, false)
	return s
}

// utf8Str is str for a value that must be valid UTF-8 (ok is false when
// it is not). Only a value not kept yet is checked: a kept one was checked
// when it was first met, so a low-cardinality column's values cost one
// map lookup a row, not a lookup and a check.
func (c *columnCache) utf8Str(i int, b []byte) (s string, ok bool) {
	return c.keptStr(i, b, true)
}

func (c *columnCache) keptStr(i int, b []byte, check bool) (string, bool) {
	if i < 0 || i >= len(c.values) || len(b) > maxValueLen || c.values[i].off {
		return string(b), !check || utf8.Valid(b)
	}
	v := &c.values[i]
	if s, ok := v.vals[string(b)]; ok {
		return s, true
	}
	if check && !utf8.Valid(b) {
		return "", false
	}
	if len(v.vals) >= maxValues {
		v.off, v.vals = true, nil
		return string(b), true
	}
	if v.vals == nil {
		v.vals = map[string]string{}
	}
	s := string(b)
	v.vals[s] = s
	return s, true
}

// timeBlock is how many timestamps one allocation of timeCell holds.
const timeBlock = 256

// timeCell is cb.CellOf(t) without an allocation per timestamp when the
// cache serves a batch of rows. An interface holding a time.Time (24
// bytes) points to a copy of it, which CellOf allocates for every row (a
// third of the bench row's allocated bytes and its one allocation); here
// the copies are laid in blocks of timeBlock, one allocation a block. A
// block lives as long as any cell pointing into it, and a copy is never
// written again once a cell points to it, so each interface sees the
// value it was made with, as one from CellOf does.
func (c *columnCache) timeCell(cb *colbatch.Batch, t time.Time) colbatch.Cell {
	if !c.keep {
		return cb.CellOf(t)
	}
	if len(c.times) == cap(c.times) {
		c.times = make([]time.Time, 0, timeBlock)
	}
	c.times = append(c.times, t)
	v := zeroTime
	(*eface)(unsafe.Pointer(&v)).data = unsafe.Pointer(&c.times[len(c.times)-1])
	return cb.CellOf(v)
}

// zeroTime is an interface holding a time.Time, whose type word timeCell
// copies.
var zeroTime any = time.Time{}

// eface is the layout of an interface{} value (runtime.eface).
type eface struct {
	typ, data unsafe.Pointer
}

// columns returns the indexes in cb of names, the columns of plan.
func (c *columnCache) columns(plan any, names func(yield func(string) bool), cb *colbatch.Batch) []int {
	if c.plan == plan {
		return c.cols
	}
	c.plan, c.cols = plan, c.cols[:0]
	for name := range names {
		c.cols = append(c.cols, cb.ColumnOf(name))
	}
	if c.keep {
		c.values = make([]stringValues, len(c.cols))
	}
	return c.cols
}

// Rows decodes messages into the rows of one column batch, keeping what
// the rows of a batch share (the last schema's decoder and its columns'
// indexes). Not safe for concurrent use; the batch must not be Reset
// while Rows is in use.
type Rows struct {
	d     *Decoder
	cb    *colbatch.Batch
	id    int
	bd    bodyDecoder
	cache columnCache
}

// Rows returns a Rows decoding into cb.
func (d *Decoder) Rows(cb *colbatch.Batch) *Rows {
	return &Rows{d: d, cb: cb, id: -1, cache: columnCache{keep: true}}
}

// Append decodes one message into a new row of the batch (its input line
// line), a cell per top-level field: the row Decode returns, held by
// column. Its errors are Decode's; on error the batch is as it was (apart
// from columns it may have gained, with no cell in any row).
func (r *Rows) Append(ctx context.Context, msg []byte, line int) error {
	id, body, err := splitFrame(msg)
	if err != nil {
		return err
	}
	if id != r.id {
		bd, err := r.d.schema(ctx, id)
		if err != nil {
			return err
		}
		r.id, r.bd = id, bd
	}
	cb := r.cb
	row := cb.AddRow(line)
	if ra, ok := r.bd.(rowAppender); ok {
		err = ra.appendRow(body, cb, row, &r.cache)
	} else {
		var m map[string]any
		if m, err = r.bd.decode(body); err == nil {
			for k, v := range m {
				cb.Set(cb.ColumnOf(k), row, v)
			}
		}
	}
	if err != nil {
		cb.DropLastRow()
		return fmt.Errorf("%w: schema id %d: %w", ErrBody, id, err)
	}
	return nil
}
