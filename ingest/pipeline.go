package ingest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicedb/sluice/compute"
)

// Appender stores a batch of rows durably and atomically (table.Table).
type Appender interface {
	Append(ctx context.Context, rows []Row) error
}

// Pipeline is the way into one table: filters and computed columns, then
// the table. Safe for concurrent use.
type Pipeline struct {
	// Table receives the kept rows.
	Table Appender
	// Compute applies the table's filters and computed columns; nil means
	// none.
	Compute *compute.Processor
	// RowOf returns the index, in the rows given to Table.Append, of the row
	// an Append error is about (the table's *SchemaError), so that Ingest
	// can name its input line. Nil: Append errors are returned as they are.
	RowOf func(error) (int, bool)
	// DeadLetters, when set, stores the rows that a deadletter policy routed
	// away (as DeadLetterRows) before the batch's kept rows are stored, so a
	// batch is acknowledged only when its dead letters are durable too. A
	// retried batch may store its dead letters twice, never its rows. Nil:
	// dead letters are only returned in the Result.
	DeadLetters Appender

	counters Counters
}

// Counters are a table's ingest totals since start.
type Counters struct {
	Batches, RejectedBatches atomic.Int64
	// Rows are rows decoded; Accepted stored; Filtered dropped by filters
	// (and drop policies); Failed bad lines, dead letters and the rows of
	// rejected batches.
	Rows, Accepted, Filtered, Failed atomic.Int64
	Bytes                            atomic.Int64
}

// Counters returns the pipeline's totals (live: read with Load).
func (p *Pipeline) Counters() *Counters { return &p.counters }

// Result is what happened to one batch.
type Result struct {
	Accepted int `json:"accepted"`
	Filtered int `json:"filtered"`
	Failed   int `json:"failed"`
	// ColumnErrors counts compute failures per column or filter (whatever
	// its policy did with the row).
	ColumnErrors map[string]int `json:"column_errors,omitempty"`
	// DeadLetters are the rows a deadletter policy routed away.
	DeadLetters []DeadLetter `json:"dead_letters,omitempty"`
	// BadLines are malformed lines skipped (at most MaxReported).
	BadLines []string `json:"bad_lines,omitempty"`
}

// DeadLetter is a row a deadletter policy routed away, with its input line
// (0 when unknown).
type DeadLetter struct {
	compute.DeadLetter
	Line int `json:"line,omitempty"`
}

// AddBadLines records the bad lines of a decode in r.
func (r *Result) AddBadLines(d Decoded) {
	r.Failed += d.BadCount
	for _, e := range d.BadLines {
		r.BadLines = append(r.BadLines, e.Error())
	}
}

// RowError locates an error about one row of a batch: its index among the
// rows decoded from the input (from 0) and its input line. Its message
// names the line only: a user reads lines of what they sent, and the index
// among decoded rows (blank lines and skipped bad lines not counted) would
// look like an off-by-one line number.
type RowError struct {
	Row, Line int
	Err       error
}

// rowless is an error that can say itself without a row index of its own
// (table.SchemaError's index is among the rows given to Append, after
// filters: a third numbering).
type rowless interface{ ErrorWithoutRow() string }

func (e *RowError) Error() string {
	msg := e.Err.Error()
	if rl, ok := e.Err.(rowless); ok {
		msg = rl.ErrorWithoutRow()
	}
	if e.Line < 0 {
		return fmt.Sprintf("row %d: %s", e.Row, msg)
	}
	return fmt.Sprintf("line %d: %s", e.Line, msg)
}
func (e *RowError) Unwrap() error { return e.Err }

// ErrRejected is wrapped when a batch is rejected as a whole (a bad line
// under the reject policy, a function with the reject policy, a value that
// does not fit the schema): nothing of it is stored.
var ErrRejected = errors.New("batch rejected")

// Ingest applies the compute step to rows and appends what is kept. It
// returns only when the rows are durable (or not stored at all, with an
// error). lines[i] is the input line of rows[i] (nil when unknown): errors
// about one row are *RowError naming it. Counters are updated; res
// accumulates across calls.
func (p *Pipeline) Ingest(ctx context.Context, rows []Row, lines []int, res *Result) error {
	p.counters.Batches.Add(1)
	p.counters.Rows.Add(int64(len(rows)))
	in := len(rows)
	locate := func(i int, err error) error {
		re := &RowError{Row: i, Line: -1, Err: err}
		if i >= 0 && i < len(lines) {
			re.Line = lines[i]
		}
		return re
	}
	// Process compacts rows in place; keep the input order to map an
	// Append error's row back to its input row.
	input := rows
	if p.Compute != nil {
		input = append([]Row(nil), rows...)
		b, err := p.Compute.Process(ctx, rows)
		for _, e := range b.Errors {
			if res.ColumnErrors == nil {
				res.ColumnErrors = map[string]int{}
			}
			res.ColumnErrors[e.Column]++
		}
		if err != nil {
			p.reject(in, res)
			rejected := errors.Is(err, compute.ErrRejected)
			var ce *compute.Error
			if errors.As(err, &ce) && ce.Row >= 0 {
				// The RowError names the line; the compute error's own
				// "row N" (its index in the batch) would contradict it.
				unrowed := *ce
				unrowed.Row = -1
				err = locate(ce.Row, &unrowed)
			}
			if rejected {
				return fmt.Errorf("%w: %w", ErrRejected, err)
			}
			return err
		}
		dls := withLines(b.DeadLetters, input, lines)
		if p.DeadLetters != nil && len(dls) > 0 {
			if err := p.DeadLetters.Append(ctx, DeadLetterRows(dls, time.Now())); err != nil {
				p.reject(in, res)
				return fmt.Errorf("storing %d dead letters: %w", len(dls), err)
			}
		}
		res.DeadLetters = append(res.DeadLetters, dls...)
		failed := len(b.DeadLetters)
		filtered := in - len(b.Rows) - failed
		res.Failed += failed
		res.Filtered += filtered
		p.counters.Failed.Add(int64(failed))
		p.counters.Filtered.Add(int64(filtered))
		rows = b.Rows
	}
	if len(rows) == 0 {
		return nil
	}
	if err := p.Table.Append(ctx, rows); err != nil {
		p.reject(len(rows), res)
		if p.RowOf != nil {
			if k, ok := p.RowOf(err); ok && k >= 0 && k < len(rows) {
				return locate(inputIndex(input, rows, k), err)
			}
		}
		return err
	}
	res.Accepted += len(rows)
	p.counters.Accepted.Add(int64(len(rows)))
	return nil
}

// DeadLetterColumns are the columns of a dead-letter table, as stored by
// DeadLetterRows: when the row failed, where (column or filter, its loader
// and source), the error, and the row itself as JSON text (as it was when
// the function failed).
var DeadLetterColumns = []struct{ Name, Type string }{
	{"time", "timestamp"}, {"column", "string"}, {"filter", "bool"}, {"loader", "string"},
	{"source", "string"}, {"error", "string"}, {"row", "string"}, {"line", "int64"},
}

// withLines finds the input line of each dead letter: its Row is the input
// row's map itself (compute routes the row, it does not copy it).
func withLines(dls []compute.DeadLetter, input []Row, lines []int) []DeadLetter {
	if len(dls) == 0 {
		return nil
	}
	at := make(map[unsafe.Pointer]int, len(input))
	for i, r := range input {
		if i < len(lines) {
			at[reflect.ValueOf(r).UnsafePointer()] = lines[i]
		}
	}
	out := make([]DeadLetter, len(dls))
	for i, d := range dls {
		out[i] = DeadLetter{DeadLetter: d, Line: at[reflect.ValueOf(d.Row).UnsafePointer()]}
	}
	return out
}

// DeadLetterRows turns dead letters into rows of a dead-letter table (line
// null when unknown).
func DeadLetterRows(dls []DeadLetter, now time.Time) []Row {
	rows := make([]Row, len(dls))
	for i, d := range dls {
		js, err := compute.AppendJSONRow(nil, d.Row, nil)
		if err != nil {
			js = []byte(fmt.Sprintf("%q", fmt.Sprint(d.Row)))
		}
		rows[i] = Row{"time": now, "column": d.Column, "filter": d.Filter, "loader": d.Loader,
			"source": d.Source, "error": d.Error, "row": string(js)}
		if d.Line > 0 {
			rows[i]["line"] = int64(d.Line)
		}
	}
	return rows
}

// inputIndex finds kept[k] in input: kept is input with rows dropped, in
// order, so the same maps appear in the same order.
func inputIndex(input, kept []Row, k int) int {
	target := reflect.ValueOf(kept[k]).UnsafePointer()
	for i, r := range input {
		if reflect.ValueOf(r).UnsafePointer() == target {
			return i
		}
	}
	return -1
}

func (p *Pipeline) reject(n int, res *Result) {
	p.counters.RejectedBatches.Add(1)
	p.counters.Failed.Add(int64(n))
	res.Failed += n
}

// Queue bounds the ingest batches in flight (decoding, computing, storing)
// so that a busy server answers "come back later" instead of buffering
// without bound. A slot is taken before the body is read, so the bound
// covers the memory of batches being read too.
type Queue struct {
	slots chan struct{}
}

// NewQueue makes a Queue of n slots (n >= 1).
func NewQueue(n int) *Queue { return &Queue{slots: make(chan struct{}, max(n, 1))} }

// TryEnter takes a slot if one is free; the caller must Leave after.
func (q *Queue) TryEnter() bool {
	select {
	case q.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Enter waits for a slot until ctx is done.
func (q *Queue) Enter(ctx context.Context) error {
	select {
	case q.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Leave frees a slot.
func (q *Queue) Leave() { <-q.slots }

// Len is the number of slots taken; Cap the bound.
func (q *Queue) Len() int { return len(q.slots) }

// Cap is the number of slots.
func (q *Queue) Cap() int { return cap(q.slots) }
