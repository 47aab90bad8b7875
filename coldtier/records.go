package coldtier

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedb/sluice/table"
)

// rowReader streams a table query as Arrow record batches of at most
// batchRows rows. The query runs in its own goroutine, which builds a batch
// while the writer writes the previous one, and waits before building the
// next until the writer has released the one before that: a run holds at
// most two batches whatever the table's size. (iceberg-go's Append takes
// batches as fast as they come and queues them, up to 64 per partition
// writer, so waiting on the hand-over alone would not bound anything: when
// the store is read faster than Parquet is written, the batches of a big
// day piled up in that queue.) It implements array.RecordReader.
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
	// stalls counts the waits for a batch's release that gave up after
	// releaseWait (a reference iceberg-go kept would otherwise stop the
	// run): 0 unless something holds batches it is done with.
	stalls atomic.Int64
	// held counts the batches built or being built and not yet released
	// by the writer; maxHeld is its highest value (tests check the bound).
	held, maxHeld atomic.Int64
}

// releaseWait bounds the wait for the writer to release a batch. The writer
// may legitimately take long (a slow upload holds it), so this is long: it
// only keeps a leaked reference from stopping a run.
var releaseWait = time.Minute

// rowSel selects the rows of a run besides their time range: the blocks
// with a sequence in [seqFrom, seqLimit) (seqLimit 0: no bound), and, with
// claims, the rows whose source offset no other writer committed.
type rowSel struct {
	seqFrom, seqLimit uint64
	claims            *runClaims
}

// newRowReader starts the query of rows [from, to) of the blocks sel
// selects, columns cols, in that order.
func newRowReader(ctx context.Context, t *table.Table, cols []table.Column, from, to time.Time, sel rowSel, batchRows int, byKey bool) *rowReader {
	fields := make([]arrow.Field, len(cols))
	names := make([]string, len(cols), len(cols)+2)
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.Name, Type: arrowType(c.Type), Nullable: true}
		names[i] = c.Name
	}
	if sel.claims != nil {
		// The source columns are read after the written ones, to filter.
		names = append(names, table.SourceBatchColumn, table.SourceOffsetColumn)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &rowReader{schema: arrow.NewSchema(fields, nil), ch: make(chan arrow.RecordBatch, 1), errCh: make(chan error, 1), cancel: cancel}
	r.refs.Store(1)
	go func() {
		defer close(r.ch)
		var (
			mem    *batchMemory   // the batch being built
			handed []*batchMemory // batches handed over, oldest first, maybe released
			b      *array.RecordBuilder
			n      int
		)
		start := func() error {
			// Build this batch while the writer has at most one other.
			for len(handed) > 0 {
				select {
				case <-handed[0].released:
					handed = handed[1:]
					continue
				default:
				}
				if len(handed) < 2 {
					break
				}
				if err := r.waitReleased(ctx, handed[0]); err != nil {
					return err
				}
				handed = handed[1:]
			}
			mem = newBatchMemory(&r.held)
			r.maxHeld.Store(max(r.maxHeld.Load(), r.held.Add(1)))
			b = array.NewRecordBuilder(mem, r.schema)
			return nil
		}
		defer func() {
			if b != nil {
				b.Release()
			}
		}()
		flush := func() error {
			if n == 0 {
				return nil
			}
			rec := b.NewRecordBatch()
			b.Release()
			b, n = nil, 0
			mem.seal()
			handed = append(handed, mem)
			select {
			case r.ch <- rec:
				return nil
			case <-ctx.Done():
				rec.Release()
				return ctx.Err()
			}
		}
		err := t.QueryValuesSeqs(ctx, table.Query{From: from, To: to, Columns: names, ByKey: byKey, Serial: true}, sel.seqFrom, sel.seqLimit, func(_ []table.Column, vals []any) error {
			if sel.claims != nil {
				if !sel.claims.keep(vals[len(cols)], vals[len(cols)+1]) {
					return nil // committed by another writer
				}
				vals = vals[:len(cols)]
			}
			if b == nil {
				if err := start(); err != nil {
					return err
				}
			}
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

// waitReleased waits until the writer has released every buffer of batch
// m (or ctx ends, or releaseWait passes).
func (r *rowReader) waitReleased(ctx context.Context, m *batchMemory) error {
	timer := time.NewTimer(releaseWait)
	defer timer.Stop()
	select {
	case <-m.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		r.stalls.Add(1)
		return nil
	}
}

// batchMemory allocates the Arrow buffers of one batch (from Go's heap, as
// memory.DefaultAllocator does) and tells when all of them are freed:
// Arrow frees a buffer when its last reference is released, whichever
// array or record (iceberg-go's projections of the batch included) held it.
type batchMemory struct {
	memory.GoAllocator
	held     *atomic.Int64 // decremented when the batch is released
	live     atomic.Int64  // bytes allocated and not freed
	sealed   atomic.Bool   // the batch is built: live reaching 0 means released
	once     sync.Once
	released chan struct{}
}

func newBatchMemory(held *atomic.Int64) *batchMemory {
	return &batchMemory{held: held, released: make(chan struct{})}
}

func (m *batchMemory) Allocate(size int) []byte {
	b := m.GoAllocator.Allocate(size)
	m.live.Add(int64(len(b)))
	return b
}

func (m *batchMemory) Reallocate(size int, b []byte) []byte {
	nb := m.GoAllocator.Reallocate(size, b)
	m.live.Add(int64(len(nb) - len(b)))
	return nb
}

func (m *batchMemory) Free(b []byte) {
	m.GoAllocator.Free(b)
	if m.live.Add(-int64(len(b))) <= 0 && m.sealed.Load() {
		m.once.Do(m.release)
	}
}

// seal marks the batch built (no more allocations).
func (m *batchMemory) seal() {
	m.sealed.Store(true)
	if m.live.Load() <= 0 {
		m.once.Do(m.release)
	}
}

func (m *batchMemory) release() {
	m.held.Add(-1)
	close(m.released)
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
