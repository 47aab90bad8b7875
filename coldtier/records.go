package coldtier

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
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
	// claimsMu serializes the claims' use by the readers of days
	// written at once.
	claimsMu *sync.Mutex
	// keys, for a keyed table, collects the keys of the rows written.
	keys *runKeys
}

// keep appends to kept the rows of blk the claims keep (those no other
// writer committed); its source columns follow the n written ones. The
// claims keep the batch tags they see, and a block's strings live only
// during its emit call: tag is the last tag, cloned once per change.
func (sel rowSel) keep(blk *table.BlockRows, n int, kept []int32, tag *string) []int32 {
	tags, offs := &blk.Cols[n], &blk.Cols[n+1]
	if sel.claimsMu != nil {
		sel.claimsMu.Lock()
		defer sel.claimsMu.Unlock()
	}
	for _, r := range blk.Rows {
		var t, off any
		if !tags.Null(r) && (tags.Type == table.String || tags.Type == table.JSON) {
			if s := tags.Strs[r]; s != *tag {
				*tag = strings.Clone(s)
			}
			t = *tag
		}
		if !offs.Null(r) && offs.Type == table.Int64 {
			off = offs.Ints[r]
		}
		if sel.claims.keep(t, off) {
			kept = append(kept, r)
		}
	}
	return kept
}

// newRowReader starts the query of rows [from, to) of the blocks sel
// selects, columns cols, in that order.
// workers blocks of the store are decoded at once.
func newRowReader(ctx context.Context, t *table.Table, cols []table.Column, from, to time.Time, sel rowSel, batchRows, workers int, byKey bool) *rowReader {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.Name, Type: arrowType(c.Type), Nullable: true}
	}
	return newRowReaderSchema(ctx, t, cols, arrow.NewSchema(fields, nil), from, to, sel, batchRows, workers, byKey)
}

// newRowReaderSchema is newRowReader with the batches' schema given: its
// fields are cols with their arrowType (a day writer's file schema, whose
// fields carry their Iceberg field ids).
func newRowReaderSchema(ctx context.Context, t *table.Table, cols []table.Column, schema *arrow.Schema, from, to time.Time, sel rowSel, batchRows, workers int, byKey bool) *rowReader {
	names := make([]string, len(cols), len(cols)+2)
	for i, c := range cols {
		names[i] = c.Name
	}
	// The claims filter on the source columns: read after the written
	// ones, unless they are the last two written (a keyed table's).
	srcAt := len(cols)
	if n := len(cols); n >= 2 && cols[n-2].Name == table.SourceBatchColumn && cols[n-1].Name == table.SourceOffsetColumn {
		srcAt = n - 2
	} else if sel.claims != nil {
		names = append(names, table.SourceBatchColumn, table.SourceOffsetColumn)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &rowReader{schema: schema, ch: make(chan arrow.RecordBatch, 1), errCh: make(chan error, 1), cancel: cancel}
	r.refs.Store(1)
	go func() {
		defer close(r.ch)
		var (
			mem    *batchMemory   // the batch being built
			handed []*batchMemory // batches handed over, oldest first, maybe released
			b      *array.RecordBuilder
			n      int
			app    = vectorAppender{batchRows: batchRows}
		)
		start := func() error {
			var err error
			if mem, b, err = r.startBatch(ctx, &handed); err == nil {
				app.reserve(b)
			}
			return err
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
			app.sealed(b)
			err := r.sendBatch(ctx, b, mem, &handed)
			b, n = nil, 0
			return err
		}
		var (
			keep []int32 // the rows of a block the claims keep
			tag  string  // the last batch tag the claims saw (keep)
		)
		err := t.QueryBlocksSeqs(ctx, table.Query{From: from, To: to, Columns: names, ByKey: byKey}, sel.seqFrom, sel.seqLimit, workers, func(_ []table.Column, blk *table.BlockRows) error {
			rows := blk.Rows
			if sel.claims != nil {
				keep = sel.keep(blk, srcAt, keep[:0], &tag)
				rows = keep
			}
			if sel.keys != nil {
				var err error
				if rows, err = sel.keys.addRows(cols, blk, rows); err != nil {
					return err
				}
			}
			for len(rows) > 0 {
				if b == nil {
					if err := start(); err != nil {
						return err
					}
				}
				part := rows[:min(len(rows), batchRows-n)]
				for i := range cols {
					if err := app.appendVector(b.Field(i), cols[i], &blk.Cols[i], part); err != nil {
						return err
					}
				}
				n += len(part)
				r.rows.Add(int64(len(part)))
				rows = rows[len(part):]
				if n >= batchRows {
					if err := flush(); err != nil {
						return err
					}
				}
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

// startBatch starts the next batch once the writer holds at most one
// other: handed are the batches handed over, oldest first, maybe released
// (those found released are dropped from it). Compaction runs and the
// maintenance merge build their batches this way.
func (r *rowReader) startBatch(ctx context.Context, handed *[]*batchMemory) (*batchMemory, *array.RecordBuilder, error) {
	for len(*handed) > 0 {
		select {
		case <-(*handed)[0].released:
			*handed = (*handed)[1:]
			continue
		default:
		}
		if len(*handed) < 2 {
			break
		}
		if err := r.waitReleased(ctx, (*handed)[0]); err != nil {
			return nil, nil, err
		}
		*handed = (*handed)[1:]
	}
	mem := newBatchMemory(&r.held)
	r.maxHeld.Store(max(r.maxHeld.Load(), r.held.Add(1)))
	return mem, array.NewRecordBuilder(mem, r.schema), nil
}

// sendBatch turns b into a record batch, seals mem (the batch's memory,
// handed with it to the writer) and sends the batch to the reader's
// consumer; a run and the maintenance merge end their batches with it.
func (r *rowReader) sendBatch(ctx context.Context, b *array.RecordBuilder, mem *batchMemory, handed *[]*batchMemory) error {
	rec := b.NewRecordBatch()
	b.Release()
	mem.seal()
	*handed = append(*handed, mem)
	select {
	case r.ch <- rec:
		return nil
	case <-ctx.Done():
		rec.Release()
		return ctx.Err()
	}
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

// vectorAppender copies blocks' column vectors into a batch's Arrow
// builders with one bulk append per block and column (AppendValues,
// AppendStringValues) instead of one builder call per value: the rows of a
// block are usually a contiguous run without nulls, whose vector is then
// appended as it is; other rows are first gathered into scratch slices the
// appender reuses from block to block. It also reserves each batch's
// builders up front (batchRows rows, the previous batch's string bytes), so
// that a batch's buffers are allocated once instead of doubled from empty.
type vectorAppender struct {
	batchRows int
	valid     []bool
	ints      []int64
	floats    []float64
	strs      []string
	bools     []bool
	times     []arrow.Timestamp
	dates     []arrow.Date32
	clocks    []arrow.Time64
	decimals  []decimal128.Num
	// strBytes is the string bytes of each column in the last batch (the
	// estimate the next batch's data buffer is reserved with).
	strBytes []int
}

// reserve sizes a new batch's builders.
func (a *vectorAppender) reserve(b *array.RecordBuilder) {
	if len(a.strBytes) < len(b.Fields()) {
		a.strBytes = make([]int, len(b.Fields()))
	}
	for i, f := range b.Fields() {
		f.Reserve(a.batchRows)
		if sb, ok := f.(*array.StringBuilder); ok && a.strBytes[i] > 0 {
			sb.ReserveData(a.strBytes[i] + a.strBytes[i]/8)
		}
	}
}

// sealed notes the string bytes of a batch about to be built.
func (a *vectorAppender) sealed(b *array.RecordBuilder) {
	for i, f := range b.Fields() {
		if sb, ok := f.(*array.StringBuilder); ok && i < len(a.strBytes) {
			a.strBytes[i] = sb.DataLen()
		}
	}
}

// contiguous reports whether rows are one ascending run (r, r+1, ...).
func contiguous(rows []int32) bool {
	for i := 1; i < len(rows); i++ {
		if rows[i] != rows[i-1]+1 {
			return false
		}
	}
	return true
}

// gather returns the values of vals at rows: a subslice of vals when rows
// are contiguous, else scratch filled with them.
func gather[T any](vals []T, rows []int32, dense bool, scratch *[]T) []T {
	if dense {
		return vals[rows[0] : int(rows[0])+len(rows)]
	}
	s := (*scratch)[:0]
	for _, r := range rows {
		s = append(s, vals[r])
	}
	*scratch = s
	return s
}

// convert returns f of each value of vals at rows, in scratch.
func convert[T, U any](vals []T, rows []int32, scratch *[]U, f func(T) U) []U {
	s := (*scratch)[:0]
	for _, r := range rows {
		s = append(s, f(vals[r]))
	}
	*scratch = s
	return s
}

// appendVector appends rows of a block's column vector to its Arrow
// column. The vector has the column's type as the store has it now: one
// that differs from the run's column (widened during the run) is
// converted where that loses nothing (int64 into float64) and refused
// otherwise (the next run writes it with the new type).
func (a *vectorAppender) appendVector(b array.Builder, col table.Column, v *table.ColumnVector, rows []int32) error {
	if len(rows) == 0 {
		return nil
	}
	if v.Absent {
		b.AppendNulls(len(rows))
		return nil
	}
	// The values are gathered for every row, null ones included (their
	// slots hold a zero value, or for a column converted to string
	// whatever they held before: blanked below), so they line up with
	// valid.
	var valid []bool
	if v.HasNulls() {
		valid = a.valid[:0]
		for _, r := range rows {
			valid = append(valid, !v.Null(r))
		}
		a.valid = valid
	}
	dense := contiguous(rows)
	switch {
	case col.Type == table.Int64 && v.Type == table.Int64:
		b.(*array.Int64Builder).AppendValues(gather(v.Ints, rows, dense, &a.ints), valid)
	case col.Type == table.Float64 && v.Type == table.Float64:
		b.(*array.Float64Builder).AppendValues(gather(v.Floats, rows, dense, &a.floats), valid)
	case col.Type == table.Float64 && v.Type == table.Int64:
		b.(*array.Float64Builder).AppendValues(convert(v.Ints, rows, &a.floats, func(i int64) float64 { return float64(i) }), valid)
	case (col.Type == table.String || col.Type == table.JSON) && (v.Type == table.String || v.Type == table.JSON):
		// A null row's bytes are appended too: a column converted to
		// string (widened) keeps whatever its null slots held, so they
		// are blanked in scratch.
		strs := gather(v.Strs, rows, dense && valid == nil, &a.strs)
		for i := range valid {
			if !valid[i] {
				strs[i] = ""
			}
		}
		sb := b.(*array.StringBuilder)
		total := 0
		for _, s := range strs {
			total += len(s)
		}
		// AppendStringValues reserves exactly what it appends: grow the
		// data buffer here, to the whole batch at the bytes per row seen
		// so far (1/8 more), or a batch's string bytes would be copied
		// once per block, or once per doubling. The estimate is bounded
		// by 8× the bytes so far (a few huge first values must not
		// reserve them for every row), and grows by 1/4 at least.
		if need := sb.DataLen() + total; need > sb.DataCap() {
			whole := need / (sb.Len() + len(strs)) * a.batchRows
			sb.ReserveData(max(need+need/4, min(whole+whole/8, 8*need)) - sb.DataLen())
		}
		sb.AppendStringValues(strs, valid)
	case col.Type == table.Bool && v.Type == table.Bool:
		b.(*array.BooleanBuilder).AppendValues(convert(v.Ints, rows, &a.bools, func(i int64) bool { return i != 0 }), valid)
	case col.Type == table.Timestamp && v.Type == table.Timestamp:
		// time.Time.UnixMicro of the value the store holds (unix ns, UTC).
		b.(*array.TimestampBuilder).AppendValues(convert(v.Ints, rows, &a.times, func(ns int64) arrow.Timestamp { return arrow.Timestamp(floorDiv(ns, 1000)) }), valid)
	case col.Type == table.Date && v.Type == table.Date:
		b.(*array.Date32Builder).AppendValues(convert(v.Ints, rows, &a.dates, func(d int64) arrow.Date32 { return arrow.Date32(d) }), valid)
	case col.Type == table.TimeOfDay && v.Type == table.TimeOfDay:
		b.(*array.Time64Builder).AppendValues(convert(v.Ints, rows, &a.clocks, func(us int64) arrow.Time64 { return arrow.Time64(us) }), valid)
	case col.Type.IsDecimal() && v.Type.IsDecimal() && col.Type.Scale() == v.Type.Scale():
		// One scale: the unscaled values are the same numbers (a block
		// written at a smaller precision holds fewer digits).
		if !v.Type.IsWideDecimal() {
			b.(*array.Decimal128Builder).AppendValues(convert(v.Ints, rows, &a.decimals, decimal128.FromI64), valid)
			break
		}
		a.decimals = a.decimals[:0]
		for i, r := range rows {
			var n decimal128.Num
			if valid == nil || valid[i] {
				n = decimal128.New(v.Decimal(r).Int128())
			}
			a.decimals = append(a.decimals, n)
		}
		b.(*array.Decimal128Builder).AppendValues(a.decimals, valid)
	case col.Type == table.UUID && v.Type == table.UUID:
		ub := b.(*extensions.UUIDBuilder)
		for i, r := range rows {
			if valid != nil && !valid[i] {
				ub.AppendNull()
				continue
			}
			var u [16]byte
			copy(u[:], v.Strs[r])
			ub.AppendBytes(u)
		}
	case col.Type == table.Bytes && v.Type == table.Bytes:
		bb := b.(*array.BinaryBuilder)
		for i, r := range rows {
			if valid != nil && !valid[i] {
				bb.AppendNull()
				continue
			}
			bb.Append([]byte(v.Strs[r]))
		}
	default:
		return fmt.Errorf("coldtier: column %q (%v): values of type %v: the column changed type during compaction; run again", col.Name, col.Type, v.Type)
	}
	return nil
}

// floorDiv is a/b rounded towards minus infinity (time.Time.UnixMicro's
// rounding of a time before 1970).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
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
