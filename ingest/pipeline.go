package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/internal/colbatch"
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
// (0 when unknown) and where its input came from (Batch.Origin).
type DeadLetter struct {
	compute.DeadLetter
	Line   int    `json:"line,omitempty"`
	Origin string `json:"origin,omitempty"`
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

// BatchAppender is an Appender that can also store one atomic batch in
// parts (table.Table: NewBatch), so that a large input need not be held as
// rows until it is stored.
type BatchAppender interface {
	Appender
	NewBatch() (AppendBatch, error)
}

// AppendBatch is one atomic append made of parts (table.Appender).
type AppendBatch interface {
	Add(ctx context.Context, rows []Row) error
	Commit(ctx context.Context) error
	Close()
}

// Ingest applies the compute step to rows and appends what is kept. It
// returns only when the rows are durable (or not stored at all, with an
// error). lines[i] is the input line of rows[i] (nil when unknown): errors
// about one row are *RowError naming it. Counters are updated; res
// accumulates across calls.
func (p *Pipeline) Ingest(ctx context.Context, rows []Row, lines []int, res *Result) error {
	b := p.Begin()
	defer b.Close()
	if err := b.Add(ctx, rows, lines, res); err != nil {
		return err
	}
	return b.Commit(ctx, res)
}

// Batch is one atomic batch fed to a Pipeline in parts: each Add computes
// its rows and, when the Table is a BatchAppender, encodes them into the
// table's pending batch at once, so the rows of a part can be dropped
// before the next part is decoded. Commit stores every kept row durably,
// or none (then every row counts as failed). Dead letters are stored per
// part, before the batch's rows. Not safe for concurrent use.
type Batch struct {
	p       *Pipeline
	tb      AppendBatch // nil: rows are held and appended at Commit
	held    []Row
	heldAt  []RowError // input index and line of each held row
	decoded int        // rows given to Add so far (the index of a part's first row)
	pending int        // kept rows not yet committed
	failed  bool
	records []record // staged by Record, written at Commit
	// Origin names where the batch's input came from ("http <key>",
	// "file <path>"), for its dead letters' origin and id.
	Origin string
}

// record is a position staged with Batch.Record.
type record struct {
	name  string
	value func(Result) []byte
}

// Begin starts a Batch; Close it.
func (p *Pipeline) Begin() *Batch {
	p.counters.Batches.Add(1)
	return &Batch{p: p}
}

// Add computes rows (lines as for Ingest) and adds what is kept to the
// batch. After an error the batch is rejected as a whole: Commit fails.
func (b *Batch) Add(ctx context.Context, rows []Row, lines []int, res *Result) error {
	if b.failed {
		return fmt.Errorf("%w: the batch already failed", ErrRejected)
	}
	if err := b.add(ctx, rows, lines, res); err != nil {
		b.fail(res)
		return err
	}
	return nil
}

func (b *Batch) add(ctx context.Context, rows []Row, lines []int, res *Result) error {
	p := b.p
	p.counters.Rows.Add(int64(len(rows)))
	in := len(rows)
	offset := b.decoded
	b.decoded += in
	locate := func(i int, err error) error {
		re := &RowError{Row: offset + i, Line: -1, Err: err}
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
		cb, err := p.Compute.Process(compute.WithRowSource(ctx, b.rowSource(offset, lines)), rows)
		countColumnErrors(res, cb.Errors)
		if err != nil {
			return p.computeFailed(err, in, res, locate)
		}
		if err := b.keepDeadLetters(ctx, withLines(cb.DeadLetters, input, lines), in, len(cb.Rows), res); err != nil {
			return err
		}
		rows = cb.Rows
	}
	if len(rows) == 0 {
		return nil
	}
	ba, ok := p.Table.(BatchAppender)
	if !ok {
		var index map[unsafe.Pointer]int // input index of each row, when compute dropped some
		if len(input) != len(rows) {
			index = make(map[unsafe.Pointer]int, len(input))
			for i, r := range input {
				index[reflect.ValueOf(r).UnsafePointer()] = i
			}
		}
		for k, r := range rows {
			i := k
			if index != nil {
				i = index[reflect.ValueOf(r).UnsafePointer()]
			}
			at := RowError{Row: offset + i, Line: -1}
			if i >= 0 && i < len(lines) {
				at.Line = lines[i]
			}
			b.heldAt = append(b.heldAt, at)
		}
		b.held = append(b.held, rows...)
		b.pending += len(rows)
		return nil
	}
	if b.tb == nil {
		tb, err := ba.NewBatch()
		if err != nil {
			p.countFailed(len(rows), res)
			return err
		}
		b.tb = tb
	}
	err := b.tb.Add(ctx, rows)
	var lo leftOut
	for err != nil && p.DeadLetters != nil && errors.As(err, &lo) && len(lo.LeftOut()) > 0 {
		// Rows the table left out (too wide for its column limit, values
		// that do not fit their column's type) are dead letters; the rest
		// of the part is added again, and may leave out others (a row
		// over the column limit once the mismatched ones are out).
		if rows, err = b.deadLetterLeftOut(ctx, lo, input, rows, lines, res); err != nil {
			break
		}
		if len(rows) > 0 {
			err = b.tb.Add(ctx, rows)
		}
	}
	if err != nil {
		p.countFailed(len(rows), res)
		if p.RowOf != nil {
			if k, ok := p.RowOf(err); ok && k >= 0 && k < len(rows) {
				return locate(inputIndex(input, rows, k), err)
			}
		}
		return err
	}
	b.pending += len(rows)
	return nil
}

// ColumnBatch is an AppendBatch that also takes rows by column
// (table.Appender: AddColumns).
type ColumnBatch interface {
	AddColumns(ctx context.Context, cb *colbatch.Batch) error
}

// Columnar reports whether rows by column (DecodeColumns) reach the table
// without a map per row: computed columns and filters that run on columns
// (compute.Processor.Columnar: Lua and built-ins; Go plugins take maps)
// and a table that takes columns. Otherwise AddColumns makes the maps.
func (p *Pipeline) Columnar() bool {
	if p.Compute != nil && !p.Compute.Columnar() {
		return false
	}
	_, ok := p.Table.(BatchAppender)
	return ok
}

// AddColumns is Add for rows by column (cb.Lines their input lines): the
// same results, counters and errors. cb is used only during the call.
func (b *Batch) AddColumns(ctx context.Context, cb *colbatch.Batch, res *Result) error {
	if !b.p.Columnar() {
		return b.Add(ctx, cb.Rows(), cb.Lines, res)
	}
	if b.failed {
		return fmt.Errorf("%w: the batch already failed", ErrRejected)
	}
	if err := b.addColumns(ctx, cb, res); err != nil {
		b.fail(res)
		return err
	}
	return nil
}

func (b *Batch) addColumns(ctx context.Context, cb *colbatch.Batch, res *Result) error {
	p := b.p
	n := cb.Len
	p.counters.Rows.Add(int64(n))
	offset := b.decoded
	b.decoded += n
	if n == 0 {
		return nil
	}
	// kept[k] is the input index of row k of cb once compute has dropped
	// rows (nil: none dropped).
	var kept []int
	if p.Compute != nil {
		var err error
		if kept, err = b.computeColumns(ctx, cb, offset, res); err != nil {
			return err
		}
		if n = cb.Len; n == 0 {
			return nil
		}
	}
	inputRow := func(k int) int {
		if kept != nil {
			return kept[k]
		}
		return k
	}
	if b.tb == nil {
		tb, err := p.Table.(BatchAppender).NewBatch()
		if err != nil {
			p.countFailed(n, res)
			return err
		}
		b.tb = tb
	}
	cbat, ok := b.tb.(ColumnBatch)
	if !ok {
		if p.Compute != nil {
			// Computed already: the kept rows as maps, straight to the table.
			return b.addComputed(ctx, cb, offset, inputRow, res)
		}
		// Not a column taker after all: the rows as maps, as Add does.
		b.decoded -= n
		p.counters.Rows.Add(-int64(n))
		return b.add(ctx, cb.Rows(), cb.Lines, res)
	}
	err := cbat.AddColumns(ctx, cb)
	var lo leftOut
	if err != nil && p.DeadLetters != nil && errors.As(err, &lo) && len(lo.LeftOut()) > 0 {
		// Rows left out: as in add, with the rows as maps.
		rows := cb.Rows()
		kept, derr := b.deadLetterLeftOut(ctx, lo, rows, rows, cb.Lines, res)
		if err = derr; err == nil && len(kept) > 0 {
			err = b.tb.Add(ctx, kept)
		}
		for err != nil && errors.As(err, &lo) && len(lo.LeftOut()) > 0 {
			var left []Row
			if left, err = b.deadLetterLeftOut(ctx, lo, rows, kept, cb.Lines, res); err != nil {
				break
			}
			if kept = left; len(kept) > 0 {
				err = b.tb.Add(ctx, kept)
			}
		}
		if err != nil {
			p.countFailed(len(kept), res)
			if p.RowOf != nil {
				if k, ok := p.RowOf(err); ok && k >= 0 && k < len(kept) {
					if i := inputIndex(rows, kept, k); i >= 0 {
						return &RowError{Row: offset + inputRow(i), Line: cb.Lines[i], Err: err}
					}
				}
			}
			return err
		}
		b.pending += len(kept)
		return nil
	}
	if err != nil {
		p.countFailed(n, res)
		if p.RowOf != nil {
			if k, ok := p.RowOf(err); ok && k >= 0 && k < n {
				return &RowError{Row: offset + inputRow(k), Line: lineOf(cb.Lines, k), Err: err}
			}
		}
		return err
	}
	b.pending += n
	return nil
}

// rowSource says where input row i of a part came from, for the log lines
// scripts write about it: the batch's origin, the row's index in the batch
// and its input line.
func (b *Batch) rowSource(offset int, lines []int) func(int) []slog.Attr {
	return func(i int) []slog.Attr {
		attrs := []slog.Attr{slog.String("origin", b.Origin), slog.Int("row", offset+i)}
		if l := lineOf(lines, i); l >= 0 {
			attrs = append(attrs, slog.Int("line", l))
		}
		return attrs
	}
}

// lineOf is lines[i], or -1 when unknown.
func lineOf(lines []int, i int) int {
	if i >= 0 && i < len(lines) {
		return lines[i]
	}
	return -1
}

// computeColumns is add's compute step for rows by column
// (compute.Processor.ProcessColumns): the same results, counters, dead
// letters and errors. On return cb holds the kept rows; kept are their
// input indexes (nil when every row was kept).
func (b *Batch) computeColumns(ctx context.Context, cb *colbatch.Batch, offset int, res *Result) (kept []int, err error) {
	p := b.p
	in := cb.Len
	lines := append([]int(nil), cb.Lines...) // the input lines, before compute drops rows
	out, err := p.Compute.ProcessColumns(compute.WithRowSource(ctx, b.rowSource(offset, lines)), cb)
	countColumnErrors(res, out.Errors)
	if err != nil {
		return nil, p.computeFailed(err, in, res, func(i int, err error) error { return locateRow(offset, i, lines, err) })
	}
	var dls []DeadLetter
	if len(out.DeadLetters) > 0 {
		dls = make([]DeadLetter, len(out.DeadLetters))
		for i, d := range out.DeadLetters {
			dls[i] = DeadLetter{DeadLetter: d}
			if r := out.DeadLetterRows[i]; r < len(lines) {
				dls[i].Line = lines[r]
			}
		}
	}
	if err := b.keepDeadLetters(ctx, dls, in, len(out.Kept), res); err != nil {
		return nil, err
	}
	if len(out.Kept) == in {
		return nil, nil
	}
	return out.Kept, nil
}

// countColumnErrors counts compute's failures per column or filter in res.
func countColumnErrors(res *Result, errs []*compute.Error) {
	for _, e := range errs {
		if res.ColumnErrors == nil {
			res.ColumnErrors = map[string]int{}
		}
		res.ColumnErrors[e.Column]++
	}
}

// computeFailed is the error of a compute step that failed on in rows:
// all of them count as failed, and an error about one row names its input
// line through locate (the compute error's own "row N", its index in the
// batch, would contradict it).
func (p *Pipeline) computeFailed(err error, in int, res *Result, locate func(i int, err error) error) error {
	p.countFailed(in, res)
	rejected := errors.Is(err, compute.ErrRejected)
	var ce *compute.Error
	if errors.As(err, &ce) && ce.Row >= 0 {
		unrowed := *ce
		unrowed.Row = -1
		err = locate(ce.Row, &unrowed)
	}
	if rejected {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return err
}

// keepDeadLetters stores the dead letters of a compute step over in rows
// of which kept were kept, and counts them and the filtered rows.
func (b *Batch) keepDeadLetters(ctx context.Context, dls []DeadLetter, in, kept int, res *Result) error {
	p := b.p
	for i := range dls {
		dls[i].Origin = b.Origin
	}
	if p.DeadLetters != nil && len(dls) > 0 {
		if err := p.DeadLetters.Append(ctx, DeadLetterRows(dls, time.Now())); err != nil {
			p.countFailed(in, res)
			return fmt.Errorf("storing %d dead letters: %w", len(dls), err)
		}
	}
	res.DeadLetters = append(res.DeadLetters, dls...)
	failed := len(dls)
	filtered := in - kept - failed
	res.Failed += failed
	res.Filtered += filtered
	p.counters.Failed.Add(int64(failed))
	p.counters.Filtered.Add(int64(filtered))
	return nil
}

// addComputed adds the rows of cb, computed already, as maps to a table
// batch that does not take columns.
func (b *Batch) addComputed(ctx context.Context, cb *colbatch.Batch, offset int, inputRow func(int) int, res *Result) error {
	rows := cb.Rows()
	if err := b.tb.Add(ctx, rows); err != nil {
		b.p.countFailed(len(rows), res)
		if b.p.RowOf != nil {
			if k, ok := b.p.RowOf(err); ok && k >= 0 && k < len(rows) {
				return &RowError{Row: offset + inputRow(k), Line: lineOf(cb.Lines, k), Err: err}
			}
		}
		return err
	}
	b.pending += len(rows)
	return nil
}

// locateRow is the *RowError of input row offset+i (line lines[i]).
func locateRow(offset, i int, lines []int, err error) error {
	re := &RowError{Row: offset + i, Line: -1, Err: err}
	if i >= 0 && i < len(lines) {
		re.Line = lines[i]
	}
	return re
}

// Record stages a position (table.Appender.SetPosition) named name that
// Commit writes in the same atomic write as the batch's rows: after a crash
// both are stored or neither. value is called at Commit with the result the
// caller will have once the commit succeeds. A batch whose rows were all
// filtered out still commits its records. The table must be a
// BatchAppender whose batches take positions.
func (b *Batch) Record(name string, value func(Result) []byte) {
	b.records = append(b.records, record{name, value})
}

// PositionSetter is an AppendBatch that also stages positions
// (table.Appender).
type PositionSetter interface {
	SetPosition(name string, value []byte) error
}

// stageRecords stages the batch's records into its table batch.
func (b *Batch) stageRecords(res Result) error {
	if b.tb == nil {
		ba, ok := b.p.Table.(BatchAppender)
		if !ok || len(b.held) > 0 {
			return errors.New("ingest: the table does not store records with its rows")
		}
		tb, err := ba.NewBatch()
		if err != nil {
			return err
		}
		b.tb = tb
	}
	ps, ok := b.tb.(PositionSetter)
	if !ok {
		return errors.New("ingest: the table does not store records with its rows")
	}
	res.Accepted += b.pending
	for _, r := range b.records {
		if err := ps.SetPosition(r.name, r.value(res)); err != nil {
			return err
		}
	}
	return nil
}

// Commit stores the batch's kept rows durably.
func (b *Batch) Commit(ctx context.Context, res *Result) error {
	if b.failed {
		return fmt.Errorf("%w: the batch already failed", ErrRejected)
	}
	if len(b.records) > 0 {
		if err := b.stageRecords(*res); err != nil {
			b.fail(res)
			return err
		}
	}
	var err error
	switch {
	case b.tb != nil:
		err = b.tb.Commit(ctx)
	case len(b.held) > 0:
		err = b.p.Table.Append(ctx, b.held)
		if err != nil && b.p.RowOf != nil {
			if k, ok := b.p.RowOf(err); ok && k >= 0 && k < len(b.heldAt) {
				at := b.heldAt[k]
				err = &RowError{Row: at.Row, Line: at.Line, Err: err}
			}
		}
	}
	if err != nil {
		b.fail(res)
		return err
	}
	res.Accepted += b.pending
	b.p.counters.Accepted.Add(int64(b.pending))
	b.pending = 0
	return nil
}

// Close releases the batch (abandoning it when not committed).
func (b *Batch) Close() {
	if b.tb != nil {
		b.tb.Close()
		b.tb = nil
	}
	b.held, b.heldAt = nil, nil
}

// Reject rejects the batch for a reason outside it (the input turned out
// malformed after some parts were added): nothing is stored and its kept
// rows count as failed.
func (b *Batch) Reject(res *Result) { b.fail(res) }

// fail rejects the batch: the kept rows of earlier parts count as failed.
func (b *Batch) fail(res *Result) {
	if !b.failed {
		b.p.counters.RejectedBatches.Add(1)
	}
	b.failed = true
	b.p.counters.Failed.Add(int64(b.pending))
	res.Failed += b.pending
	b.pending = 0
}

// DeadLetterColumns are the columns of a dead-letter table, as stored by
// DeadLetterRows: when the row failed, where (column or filter, its loader
// and source), the error, and the row itself as JSON text (as it was when
// the function failed); id is the dead letter's stable name (DeadLetterID),
// origin where its input came from, format how row is to be decoded again
// (FormatRow: a row as JSON; otherwise the message's format and row its
// body as received), and replay_of, on the rows a replay adds, the id of
// the dead letter that replay took (docs/streams.md, "Dead letters and
// replay").
var DeadLetterColumns = []struct{ Name, Type string }{
	{"time", "timestamp"}, {"column", "string"}, {"filter", "bool"}, {"loader", "string"},
	{"source", "string"}, {"error", "string"}, {"row", "string"}, {"line", "int64"},
	{"id", "string"}, {"origin", "string"}, {"format", "string"}, {"replay_of", "string"},
}

// FormatRow is the format column of a dead letter whose row column is a
// row as a JSON object (a function or the schema refused the row), not a
// message body as received.
const FormatRow = "row"

// DeadLetterID is the stable id of a dead letter: a hash of where its
// input came from and where in it (origin, line, ordinal, ...). The same
// input failing the same way gets the same id wherever and however often
// it is stored (a retried batch, two nodes consuming one message), so a
// replay takes each once.
func DeadLetterID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
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
	seen := map[string]int{} // dead letters so far of one origin and line: the ordinal in the id
	for i, d := range dls {
		js, err := compute.AppendJSONRow(nil, withoutHidden(d.Row), nil)
		if err != nil {
			js = []byte(fmt.Sprintf("%q", fmt.Sprint(d.Row)))
		}
		at := d.Origin + "\x00" + strconv.Itoa(d.Line)
		n := seen[at]
		seen[at]++
		id := DeadLetterID(d.Origin, strconv.Itoa(d.Line), strconv.Itoa(n), d.Loader, d.Column)
		if d.Origin == "" {
			// Nothing names the input (a caller that set no origin): the
			// time and the row tell two batches' dead letters apart.
			id = DeadLetterID(id, now.Format(time.RFC3339Nano), string(js))
		}
		rows[i] = Row{"time": now, "column": d.Column, "filter": d.Filter, "loader": d.Loader,
			"source": d.Source, "error": d.Error, "row": string(js), "format": FormatRow, "id": id}
		if d.Origin != "" {
			rows[i]["origin"] = d.Origin
		}
		if d.Line > 0 {
			rows[i]["line"] = int64(d.Line)
		}
	}
	return rows
}

// withoutHidden is row without sluice's hidden columns (names starting with
// "_sluice_", the stream sources' offsets): a replayed row must not carry
// them in (they are refused from input), and they are not the input.
func withoutHidden(row map[string]any) map[string]any {
	for k := range row {
		if strings.HasPrefix(k, "_sluice_") {
			out := make(map[string]any, len(row))
			for k, v := range row {
				if !strings.HasPrefix(k, "_sluice_") {
					out[k] = v
				}
			}
			return out
		}
	}
	return row
}

// leftOut is an append error that left some rows out and can take the
// others (table.ColumnLimitError, table.TypeMismatchError): the rows at
// LeftOut() are refused for RowReason(i), the others fit.
type leftOut interface {
	error
	LeftOut() []int
	RowReason(i int) string
}

// columnLeftOut is a leftOut that names the column each row did not fit
// (table.TypeMismatchError).
type columnLeftOut interface {
	RowColumn(i int) string
}

// deadLetterLeftOut stores the rows lo left out in the dead-letter table
// and returns the others.
func (b *Batch) deadLetterLeftOut(ctx context.Context, lo leftOut, input, rows []Row, lines []int, res *Result) ([]Row, error) {
	p := b.p
	out := lo.LeftOut()
	dls := make([]DeadLetter, 0, len(out))
	skip := make(map[int]bool, len(out))
	for i, k := range out {
		if k < 0 || k >= len(rows) {
			return rows, lo // not about these rows
		}
		skip[k] = true
		d := DeadLetter{DeadLetter: compute.DeadLetter{Row: rows[k], Loader: "schema", Error: lo.RowReason(i)}, Origin: b.Origin}
		if cl, ok := lo.(columnLeftOut); ok {
			d.Column = cl.RowColumn(i)
		}
		if in := inputIndex(input, rows, k); in >= 0 && in < len(lines) {
			d.Line = lines[in]
		}
		dls = append(dls, d)
	}
	if err := p.DeadLetters.Append(ctx, DeadLetterRows(dls, time.Now())); err != nil {
		return rows, fmt.Errorf("storing %d dead letters: %w", len(dls), err)
	}
	res.DeadLetters = append(res.DeadLetters, dls...)
	res.Failed += len(dls)
	p.counters.Failed.Add(int64(len(dls)))
	kept := make([]Row, 0, len(rows)-len(dls))
	for k, r := range rows {
		if !skip[k] {
			kept = append(kept, r)
		}
	}
	return kept, nil
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

// countFailed counts n rows of a failing part as failed.
func (p *Pipeline) countFailed(n int, res *Result) {
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
