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
// that the rows of a batch look their columns up once, not once a field,
// and, when keep is set (a batch of rows, not one), the memory its string
// and timestamp cells point into.
type columnCache struct {
	plan any
	cols []int
	keep bool
	// strs holds the string values of the batch's cells, one after
	// another (str).
	strs []byte
	// times are the timestamps of timeCell's cells, in blocks.
	times []time.Time
}

// strChunk is the size of one chunk of a cache's strings; a value over
// maxArenaString is a string of its own.
const (
	strChunk       = 16 << 10
	maxArenaString = strChunk / 8
)

// str returns b as a string. When the cache serves a batch of rows the
// strings are copied one after another into chunks of strChunk bytes: a
// value costs a copy, not an allocation of its own (nor a lookup among the
// column's earlier values, which cost more than the copy; the NDJSON
// column decoder lays its strings out the same way). A chunk lives as long
// as any string pointing into it, and its bytes are never written again
// once a string points to them.
func (c *columnCache) str(b []byte) string {
	if !c.keep || len(b) > maxArenaString || len(b) == 0 {
		return string(b)
	}
	if len(b) > cap(c.strs)-len(c.strs) {
		c.strs = make([]byte, 0, strChunk)
	}
	start := len(c.strs)
	c.strs = append(c.strs, b...)
	return unsafe.String(&c.strs[start], len(b))
}

// utf8Str is str for a value that must be valid UTF-8 (ok is false when
// it is not).
func (c *columnCache) utf8Str(b []byte) (s string, ok bool) {
	if !utf8.Valid(b) {
		return "", false
	}
	return c.str(b), true
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
