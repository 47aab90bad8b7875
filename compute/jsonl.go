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
	var sum Summary
	r := bufio.NewReaderSize(in, 256<<10)
	w := bufio.NewWriterSize(out, 256<<10)
	var dw *bufio.Writer
	if dead != nil {
		dw = bufio.NewWriter(dead)
	}
	writeDead := func(dl DeadLetter) error {
		sum.DeadLetters++
		if dw == nil {
			return nil
		}
		b, err := json.Marshal(dl)
		if err != nil {
			b, _ = json.Marshal(DeadLetter{Column: dl.Column, Loader: dl.Loader, Error: dl.Error + "; row not encodable: " + err.Error()})
		}
		if _, err := dw.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("dead-letter output: %w", err)
		}
		return nil
	}
	rows := make([]map[string]any, 0, batchSize)
	firstLine := int64(1)
	var buf []byte
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		n := len(rows)
		b, err := p.Process(ctx, rows)
		for _, dl := range b.DeadLetters {
			if err := writeDead(dl); err != nil {
				return err
			}
		}
		if err != nil {
			if !errors.Is(err, ErrRejected) {
				return err
			}
			sum.RejectedBatches++
			sum.RejectedRows += int64(n)
			msg := fmt.Sprintf("batch of lines %d-%d rejected: %v", firstLine, sum.LinesIn, err)
			var fe *Error
			errors.As(err, &fe)
			for _, row := range rows[:n] {
				dl := DeadLetter{Row: row, Error: msg}
				if fe != nil {
					dl.Column, dl.Filter, dl.Loader, dl.Source = fe.Column, fe.Filter, fe.Loader, fe.Source
				}
				if err := writeDead(dl); err != nil {
					return err
				}
			}
		} else {
			sum.Dropped += int64(n - len(b.Rows) - len(b.DeadLetters))
			for _, row := range b.Rows {
				buf, err = AppendJSONRow(buf[:0], row, nil)
				if err != nil {
					if err := writeDead(DeadLetter{Row: nil, Loader: "output", Error: err.Error()}); err != nil {
						return err
					}
					continue
				}
				if _, err := w.Write(append(buf, '\n')); err != nil {
					return fmt.Errorf("output: %w", err)
				}
				sum.RowsOut++
			}
		}
		rows = rows[:0]
		firstLine = sum.LinesIn + 1
		return nil
	}
	for {
		line, err := readLine(r)
		if len(line) > 0 || err == nil {
			sum.LinesIn++
			if trimmed := trimSpace(line); len(trimmed) > 0 {
				row, derr := DecodeRow(trimmed)
				if derr != nil {
					sum.BadLines++
					if err := writeDead(DeadLetter{Loader: "input", Error: fmt.Sprintf("line %d: %v", sum.LinesIn, derr), Row: map[string]any{"line": string(trimmed)}}); err != nil {
						return sum, err
					}
				} else {
					rows = append(rows, row)
				}
			}
			if len(rows) == batchSize {
				if err := flush(); err != nil {
					return sum, err
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return sum, fmt.Errorf("input line %d: %w", sum.LinesIn+1, err)
		}
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
	}
	if err := flush(); err != nil {
		return sum, err
	}
	if err := w.Flush(); err != nil {
		return sum, fmt.Errorf("output: %w", err)
	}
	if dw != nil {
		if err := dw.Flush(); err != nil {
			return sum, fmt.Errorf("dead-letter output: %w", err)
		}
	}
	return sum, nil
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
