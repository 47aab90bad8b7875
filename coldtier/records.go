package coldtier

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedb/sluice/table"
)

// rowReader streams a table query as Arrow record batches of at most
// batchRows rows: the query runs in its own goroutine and hands over one
// batch at a time (a channel of one), so a run holds about two batches in
// memory whatever the table's size. It implements array.RecordReader.
type rowReader struct {
	refs   atomic.Int64
	schema *arrow.Schema
	ch     chan arrow.RecordBatch
	cur    arrow.RecordBatch
	peeked arrow.RecordBatch // read by Empty, handed out by the next Next
	err    error
	errCh  chan error
	cancel context.CancelFunc
	rows   atomic.Int64
}

// newRowReader starts the query of rows [from, to) in the blocks with
// sequence below seqLimit (0: all), columns cols, in that order.
func newRowReader(ctx context.Context, t *table.Table, cols []table.Column, from, to time.Time, seqLimit uint64, batchRows int) *rowReader {
	fields := make([]arrow.Field, len(cols))
	names := make([]string, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.Name, Type: arrowType(c.Type), Nullable: true}
		names[i] = c.Name
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &rowReader{schema: arrow.NewSchema(fields, nil), ch: make(chan arrow.RecordBatch, 1), errCh: make(chan error, 1), cancel: cancel}
	r.refs.Store(1)
	go func() {
		defer close(r.ch)
		b := array.NewRecordBuilder(memory.DefaultAllocator, r.schema)
		defer b.Release()
		n := 0
		flush := func() error {
			if n == 0 {
				return nil
			}
			rec := b.NewRecordBatch()
			n = 0
			select {
			case r.ch <- rec:
				return nil
			case <-ctx.Done():
				rec.Release()
				return ctx.Err()
			}
		}
		err := t.QueryValuesBelow(ctx, table.Query{From: from, To: to, Columns: names, ByKey: true}, seqLimit, func(_ []table.Column, vals []any) error {
			for i, v := range vals {
				if err := appendValue(b.Field(i), cols[i], v); err != nil {
					return err
				}
			}
			n++
			r.rows.Add(1)
			if n >= batchRows {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		r.errCh <- err
	}()
	return r
}

// appendValue appends one sluice value to its Arrow column.
func appendValue(b array.Builder, col table.Column, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch col.Type {
	case table.Int64:
		if x, ok := v.(int64); ok {
			b.(*array.Int64Builder).Append(x)
			return nil
		}
	case table.Float64:
		switch x := v.(type) {
		case float64:
			b.(*array.Float64Builder).Append(x)
			return nil
		case int64:
			b.(*array.Float64Builder).Append(float64(x))
			return nil
		}
	case table.String, table.JSON:
		switch x := v.(type) {
		case string:
			b.(*array.StringBuilder).Append(x)
			return nil
		case json.RawMessage:
			b.(*array.StringBuilder).BinaryBuilder.Append(x)
			return nil
		}
	case table.Bool:
		if x, ok := v.(bool); ok {
			b.(*array.BooleanBuilder).Append(x)
			return nil
		}
	case table.Timestamp:
		if x, ok := v.(time.Time); ok {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(x.UnixMicro()))
			return nil
		}
	}
	return fmt.Errorf("coldtier: column %q (%v): value %T changed type during compaction; run again", col.Name, col.Type, v)
}

func (r *rowReader) Retain() { r.refs.Add(1) }

func (r *rowReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.close()
	}
}

// close stops the query and drains what it had made.
func (r *rowReader) close() {
	r.cancel()
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.peeked != nil {
		r.peeked.Release()
		r.peeked = nil
	}
	for rec := range r.ch {
		rec.Release()
	}
}

func (r *rowReader) Schema() *arrow.Schema { return r.schema }

// Empty reports whether the query has no rows (reading its first batch).
func (r *rowReader) Empty() bool {
	if r.peeked != nil {
		return false
	}
	rec, ok := <-r.ch
	if !ok {
		r.finish()
		return true
	}
	r.peeked = rec
	return false
}

func (r *rowReader) finish() {
	if r.err == nil {
		r.err = <-r.errCh
		r.errCh <- r.err // Err may be asked again
	}
}

func (r *rowReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.peeked != nil {
		r.cur, r.peeked = r.peeked, nil
		return true
	}
	rec, ok := <-r.ch
	if !ok {
		r.finish()
		return false
	}
	r.cur = rec
	return true
}

func (r *rowReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch (the older name array.RecordReader still has).
func (r *rowReader) Record() arrow.RecordBatch { return r.cur }

func (r *rowReader) Err() error { return r.err }

// handOver yields r's batches for a consumer that releases each batch it
// is given (iceberg-go's WriteRecords): each is retained first, since r
// releases it too on its next Next.
func handOver(r *rowReader) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for r.Next() {
			rec := r.RecordBatch()
			rec.Retain()
			if !yield(rec, nil) {
				return
			}
		}
		if err := r.Err(); err != nil {
			yield(nil, err)
		}
	}
}
