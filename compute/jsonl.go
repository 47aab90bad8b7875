package compute

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Summary counts what RunJSONLines did.
type Summary struct {
	LinesIn, RowsOut, BadLines int64
	Dropped                    int64 // by filters and drop policies
	DeadLetters                int64 // rows written to the dead-letter output
	RejectedBatches            int64
	RejectedRows               int64
}

// maxLine bounds one JSON line.
const maxLine = 64 << 20

// RunJSONLines reads JSON objects, one per line, from in, applies p in
// batches of batchSize rows and writes the kept rows as JSON lines to out.
// Dead letters (deadletter policy, lines that are not JSON objects, and the
// rows of rejected batches) go to dead as JSON lines annotated with column,
// loader and error; with a nil dead they are counted and dropped. A bad line
// or a rejected batch does not stop the run; an I/O error does.
func RunJSONLines(ctx context.Context, p *Processor, in io.Reader, out, dead io.Writer, batchSize int) (Summary, error) {
	if batchSize <= 0 {
		batchSize = 512
	}
	run := &jsonlRun{p: p, out: bufio.NewWriterSize(out, 256<<10), rows: make([]map[string]any, 0, batchSize), firstLine: 1}
	if dead != nil {
		run.dead = bufio.NewWriter(dead)
	}
	r := bufio.NewReaderSize(in, 256<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 || err == nil {
			if err := run.addLine(line); err != nil {
				return run.sum, err
			}
			if len(run.rows) == batchSize {
				if err := run.flush(ctx); err != nil {
					return run.sum, err
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return run.sum, fmt.Errorf("input line %d: %w", run.sum.LinesIn+1, err)
		}
		if ctx.Err() != nil {
			return run.sum, ctx.Err()
		}
	}
	return run.sum, run.finish(ctx)
}

// jsonlRun is the state of one RunJSONLines: the batch being gathered, the
// outputs and the counts.
type jsonlRun struct {
	p         *Processor
	out       *bufio.Writer
	dead      *bufio.Writer // nil: dead letters are counted only
	rows      []map[string]any
	firstLine int64  // the input line of rows[0]
	buf       []byte // one encoded output row, reused
	sum       Summary
}

// addLine counts one input line and decodes it into the batch; a line
// that is not a JSON object becomes a dead letter. Blank lines are skipped.
func (run *jsonlRun) addLine(line []byte) error {
	run.sum.LinesIn++
	trimmed := trimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	row, err := DecodeRow(trimmed)
	if err != nil {
		run.sum.BadLines++
		return run.writeDead(DeadLetter{Loader: "input", Error: fmt.Sprintf("line %d: %v", run.sum.LinesIn, err), Row: map[string]any{"line": string(trimmed)}})
	}
	run.rows = append(run.rows, row)
	return nil
}

// flush processes the batch and writes its kept rows and dead letters; a
// rejected batch becomes dead letters, one a row.
func (run *jsonlRun) flush(ctx context.Context) error {
	if len(run.rows) == 0 {
		return nil
	}
	b, err := run.p.Process(ctx, run.rows)
	for _, dl := range b.DeadLetters {
		if err := run.writeDead(dl); err != nil {
			return err
		}
	}
	switch {
	case errors.Is(err, ErrRejected):
		err = run.reject(err)
	case err == nil:
		run.sum.Dropped += int64(len(run.rows) - len(b.Rows) - len(b.DeadLetters))
		err = run.writeRows(b.Rows)
	}
	if err != nil {
		return err
	}
	run.rows = run.rows[:0]
	run.firstLine = run.sum.LinesIn + 1
	return nil
}

// reject writes every row of the batch as a dead letter of the error that
// rejected it (ErrRejected), naming the function that failed.
func (run *jsonlRun) reject(err error) error {
	run.sum.RejectedBatches++
	run.sum.RejectedRows += int64(len(run.rows))
	msg := fmt.Sprintf("batch of lines %d-%d rejected: %v", run.firstLine, run.sum.LinesIn, err)
	var fe *Error
	errors.As(err, &fe)
	for _, row := range run.rows {
		dl := DeadLetter{Row: row, Error: msg}
		if fe != nil {
			dl.Column, dl.Filter, dl.Loader, dl.Source = fe.Column, fe.Filter, fe.Loader, fe.Source
		}
		if err := run.writeDead(dl); err != nil {
			return err
		}
	}
	return nil
}

// writeRows writes the kept rows as JSON lines; a row that cannot be
// encoded becomes a dead letter of the "output" loader.
func (run *jsonlRun) writeRows(rows []map[string]any) error {
	for _, row := range rows {
		var err error
		run.buf, err = AppendJSONRow(run.buf[:0], row, nil)
		if err != nil {
			if err := run.writeDead(DeadLetter{Row: nil, Loader: "output", Error: err.Error()}); err != nil {
				return err
			}
			continue
		}
		if _, err := run.out.Write(append(run.buf, '\n')); err != nil {
			return fmt.Errorf("output: %w", err)
		}
		run.sum.RowsOut++
	}
	return nil
}

// writeDead counts a dead letter and writes it as a JSON line (unless there
// is no dead-letter output).
func (run *jsonlRun) writeDead(dl DeadLetter) error {
	run.sum.DeadLetters++
	if run.dead == nil {
		return nil
	}
	b, err := json.Marshal(dl)
	if err != nil {
		b, _ = json.Marshal(DeadLetter{Column: dl.Column, Loader: dl.Loader, Error: dl.Error + "; row not encodable: " + err.Error()})
	}
	if _, err := run.dead.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("dead-letter output: %w", err)
	}
	return nil
}

// finish processes the last batch and flushes both outputs.
func (run *jsonlRun) finish(ctx context.Context) error {
	if err := run.flush(ctx); err != nil {
		return err
	}
	if err := run.out.Flush(); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if run.dead != nil {
		if err := run.dead.Flush(); err != nil {
			return fmt.Errorf("dead-letter output: %w", err)
		}
	}
	return nil
}

// readLine returns the next line without its newline; the slice is valid
// until the next call.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			line, err = r.ReadSlice('\n')
			long = append(long, line...)
			if len(long) > maxLine {
				return nil, fmt.Errorf("line longer than %d bytes", maxLine)
			}
		}
		line = long
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	return line, err
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// WriteSummary prints the run's counts and the counters of every column and
// filter as a table.
func WriteSummary(w io.Writer, sum Summary, stats []Stats) error {
	fmt.Fprintf(w, "compute: %d lines in, %d rows out, %d dropped, %d dead-lettered, %d bad lines, %d rejected batches (%d rows)\n",
		sum.LinesIn, sum.RowsOut, sum.Dropped, sum.DeadLetters, sum.BadLines, sum.RejectedBatches, sum.RejectedRows)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tLOADER\tCALLS\tERRORS\tNULL\tDROPPED\tDEADLETTER\tREJECTED\tFILTERED\tRELOADS\tLAST ERROR")
	for _, s := range stats {
		kind := "column"
		if s.Filter {
			kind = "filter"
		}
		// One line per function: a multi-line error (a plugin's stack
		// trace) broke the table; the log has the whole of it.
		last, _, cut := strings.Cut(strings.ReplaceAll(s.LastError, "\t", " "), "\n")
		if cut {
			last += " ..."
		}
		if len(last) > 120 {
			last = last[:120] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", kind, s.Name, s.Loader, s.Calls, s.Errors, s.Nulls, s.Dropped, s.DeadLettered, s.Rejected, s.FilteredOut, s.Reloads, last)
	}
	return tw.Flush()
}
