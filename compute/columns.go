package compute

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/luavm"
)

// ColumnHandler is implemented by handlers that evaluate rows held by
// column (a colbatch.Batch, as ingest's decoders fill it) without a map
// per row: the Lua handlers, whose scripts get a lazy view of their row,
// and the built-ins. ValuesColumns has BatchHandler.Values' contract for
// the rows at indexes rows of cb; a function's writes to its row go to
// cb's cells (a new key adds a column).
type ColumnHandler interface {
	ValuesColumns(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, errs []error) error
}

// ColumnScript is a BatchScript that also runs rows held by column (the
// LuaJIT engine's).
type ColumnScript interface {
	ValuesColumns(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, errs []error) error
}

// Columns is the outcome of ProcessColumns.
type Columns struct {
	// Kept are the input indexes of the rows kept, in order: row k of the
	// batch on return was input row Kept[k].
	Kept []int
	// DeadLetters are the rows routed to the dead-letter output (Row is
	// the row as a map when its function failed); DeadLetterRows their
	// input indexes.
	DeadLetters    []DeadLetter
	DeadLetterRows []int
	// Errors are every failure in the batch, whatever the policy did.
	Errors []*Error
}

// Columnar reports whether every function of p evaluates rows held by
// column (ColumnHandler): then ProcessColumns costs no map per row. Go
// plugins take maps (their API is map[string]any); ProcessColumns makes
// them for those functions only.
func (p *Processor) Columnar() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, f := range p.all() {
		if !f.columnar() {
			return false
		}
	}
	return true
}

func (f *function) columnar() bool {
	if h, ok := f.handler.(*engineLua); ok {
		_, ok = h.script.(ColumnScript)
		return ok
	}
	_, ok := f.handler.(ColumnHandler)
	return ok
}

// ProcessColumns is Process for rows held by column: the same filters and
// columns in the same order, with the same results, errors, counters, logs
// and policies, on cb in place. Computed values are set in their columns'
// cells, and on return cb holds the kept rows only (Kept says which input
// rows they are; cb.Lines follow them). If a function with the reject
// policy fails, ProcessColumns returns an error wrapping ErrRejected (and
// the *Error, whose Row is the input index) and leaves cb's rows in place
// (with what the functions changed so far).
func (p *Processor) ProcessColumns(ctx context.Context, cb *colbatch.Batch) (Columns, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var b Columns
	n := cb.Len
	s := getScratch(n)
	defer putScratch(s)
	alive, idx := s.alive, s.idx // idx: indexes of the rows still alive
	for i := range idx {
		alive[i] = true
		idx[i] = i
	}
	out, nums, errs := s.out, s.nums, s.errs
	for _, f := range p.all() {
		if len(idx) == 0 {
			break
		}
		o, e := out[:len(idx)], errs[:len(idx)]
		clear(o)
		clear(e)
		f.evaluateColumns(ctx, cb, idx, o, nums[:len(idx)], e)
		f.stats.calls.Add(int64(len(idx)))
		col := -1 // the column's index in cb, once it has one
		column := func() int {
			if col < 0 {
				col = cb.ColumnOf(f.name)
			}
			return col
		}
		set := func(i int, v any) { cb.Set(column(), i, v) }
		kept := idx[:0]
		for j, i := range idx {
			v, err := o[j], e[j]
			if v == luavm.Number && err == nil {
				if cell, ok := numberCell(nums[j], f); ok {
					cb.Cols[column()].Cells[i] = cell
					kept = append(kept, i)
					continue
				}
				v = luavm.NumberToGo(nums[j])
			}
			if err == nil {
				v, err = f.check(v)
			}
			if err == nil {
				if f.filter {
					if v == false {
						f.stats.filteredOut.Add(1)
						alive[i] = false
						continue
					}
				} else {
					set(i, v)
				}
				kept = append(kept, i)
				continue
			}
			fe := f.errorf(i, err)
			b.Errors = append(b.Errors, fe)
			p.failed(f, fe, func() map[string]any { return rowMap(cb, i) })
			switch f.policy {
			case PolicyNull:
				f.stats.nulls.Add(1)
				set(i, nil)
				kept = append(kept, i)
			case PolicyKeep:
				kept = append(kept, i)
			case PolicyDrop:
				f.stats.dropped.Add(1)
				alive[i] = false
			case PolicyDeadLetter:
				f.stats.deadLettered.Add(1)
				alive[i] = false
				b.DeadLetters = append(b.DeadLetters, DeadLetter{Row: rowMap(cb, i), Column: f.name, Filter: f.filter, Loader: fe.Loader, Source: fe.Source, Error: err.Error()})
				b.DeadLetterRows = append(b.DeadLetterRows, i)
			case PolicyReject:
				f.stats.rejected.Add(1)
				return b, fmt.Errorf("%w: %w", ErrRejected, fe)
			}
		}
		idx = kept
	}
	b.Kept = make([]int, 0, len(idx))
	for i, a := range alive {
		if a {
			b.Kept = append(b.Kept, i)
		}
	}
	keepRows(cb, b.Kept)
	return b, nil
}

// numberColumns is implemented by the column handlers and scripts that can
// hand a number result over unboxed: out[i] = luavm.Number and the number
// in nums[i] (the Lua engines).
type numberColumns interface {
	ValuesColumnsNumbers(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, nums []float64, errs []error) error
}

// numberCell is the cell of f's column for the number result x, as
// check and colbatch's Set make it from the value the engine would have
// boxed (luavm.NumberToGo: an int64 when x is whole, else the float64);
// ok is false when it is not that simple (a filter, another type, an
// error to report), and the caller takes the general path.
func numberCell(x float64, f *function) (colbatch.Cell, bool) {
	if f.filter {
		return colbatch.Cell{}, false
	}
	switch f.typ {
	case Float64:
		if x == 0 {
			x = 0 // -0 is whole: the int64 0, then the float64 +0
		}
		return colbatch.Cell{Kind: colbatch.Float, I: int64(math.Float64bits(x))}, true
	case Int64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			return colbatch.Cell{Kind: colbatch.Int, I: int64(x)}, true
		}
	}
	return colbatch.Cell{}, false
}

// evaluateColumns runs f on the rows at idx of cb: by column when its
// handler can, otherwise on maps made for the call and written back. A
// handler that can leaves its number results in nums (numberColumns).
func (f *function) evaluateColumns(ctx context.Context, cb *colbatch.Batch, idx []int, out []any, nums []float64, errs []error) {
	var ch ColumnHandler
	switch h := f.handler.(type) {
	case nil:
		f.evaluate(ctx, nil, out, errs) // every row fails with ErrClosed
		return
	case *engineLua:
		if nc, ok := h.script.(numberColumns); ok {
			if err := nc.ValuesColumnsNumbers(ctx, cb, idx, out, nums, errs); err != nil {
				failAll(out, errs, err)
			}
			return
		}
		if cs, ok := h.script.(ColumnScript); ok {
			ch = columnScript{cs}
		}
	case numberColumns:
		if err := h.ValuesColumnsNumbers(ctx, cb, idx, out, nums, errs); err != nil {
			failAll(out, errs, err)
		}
		return
	case ColumnHandler:
		ch = h
	}
	if ch != nil {
		if err := ch.ValuesColumns(ctx, cb, idx, out, errs); err != nil {
			failAll(out, errs, err)
		}
		return
	}
	rows := make([]map[string]any, len(idx))
	for j, i := range idx {
		rows[j] = rowMap(cb, i)
	}
	f.evaluate(ctx, rows, out, errs)
	for j, i := range idx {
		setRow(cb, i, rows[j])
	}
}

// failAll fails every row with err (the handler could run none).
func failAll(out []any, errs []error, err error) {
	for i := range errs {
		out[i], errs[i] = nil, err
	}
}

// scratch is what ProcessColumns needs per batch, kept for the next one.
type scratch struct {
	alive []bool
	idx   []int
	out   []any
	nums  []float64
	errs  []error
}

var scratchPool sync.Pool

// getScratch returns scratch for n rows (out and errs cleared).
func getScratch(n int) *scratch {
	s, _ := scratchPool.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	if cap(s.idx) < n {
		*s = scratch{alive: make([]bool, n), idx: make([]int, n), out: make([]any, n), nums: make([]float64, n), errs: make([]error, n)}
	}
	s.alive, s.idx, s.out, s.nums, s.errs = s.alive[:n], s.idx[:n], s.out[:n], s.nums[:n], s.errs[:n]
	return s
}

// putScratch keeps s for the next batch, without the results it points to.
func putScratch(s *scratch) {
	clear(s.out)
	clear(s.errs)
	scratchPool.Put(s)
}

type columnScript struct{ s ColumnScript }

func (c columnScript) ValuesColumns(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, errs []error) error {
	return c.s.ValuesColumns(ctx, cb, rows, out, errs)
}

// rowMap is row r of cb as a map, as the map decoders make it.
func rowMap(cb *colbatch.Batch, r int) map[string]any {
	m := make(map[string]any)
	for i := range cb.Cols {
		if v, ok := cb.Any(cb.Cols[i].Cells[r]); ok {
			m[cb.Cols[i].Name] = v
		}
	}
	return m
}

// setRow makes row r of cb hold what row holds.
func setRow(cb *colbatch.Batch, r int, row map[string]any) {
	for i := range cb.Cols {
		if _, ok := row[cb.Cols[i].Name]; !ok {
			cb.Cols[i].Cells[r] = colbatch.Cell{}
		}
	}
	for k, v := range row {
		cb.Set(cb.ColumnOf(k), r, v)
	}
}

// keepRows compacts cb (its cells and lines) to the rows at kept, in order.
func keepRows(cb *colbatch.Batch, kept []int) {
	if len(kept) == cb.Len {
		return
	}
	for c := range cb.Cols {
		cells := cb.Cols[c].Cells
		for k, i := range kept {
			cells[k] = cells[i]
		}
		clear(cells[len(kept):])
		cb.Cols[c].Cells = cells[:len(kept)]
	}
	if len(cb.Lines) == cb.Len {
		for k, i := range kept {
			cb.Lines[k] = cb.Lines[i]
		}
		cb.Lines = cb.Lines[:len(kept)]
	}
	cb.Len = len(kept)
}

// columnsOf holds rows by column, as ingest's column decoders would have
// decoded them (a cell per value as colbatch.Batch.Set makes it).
func columnsOf(rows []map[string]any) *colbatch.Batch {
	cb := &colbatch.Batch{}
	for i, row := range rows {
		r := cb.AddRow(i + 1)
		for k, v := range row {
			cb.Set(cb.ColumnOf(k), r, v)
		}
	}
	return cb
}

// ValuesColumns computes the built-in for the rows at rows of cb; only
// make://json reads the row (as a map made for the call).
func (b *Builtin) ValuesColumns(_ context.Context, cb *colbatch.Batch, rows []int, out []any, errs []error) error {
	for j, i := range rows {
		var row map[string]any
		if b.name == "json" {
			row = rowMap(cb, i)
		}
		out[j], errs[j] = b.Value(row)
	}
	return nil
}
