package cluster

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
)

// StartWriter calls Start before its first byte (an HTTP handler writes
// its header there).
type StartWriter struct {
	W       io.Writer
	Start   func()
	Started bool
}

func (sw *StartWriter) Write(p []byte) (int, error) {
	if !sw.Started {
		sw.Started = true
		sw.Start()
	}
	return sw.W.Write(p)
}

// CopyLines copies NDJSON lines from src to dst, at most max of them when
// max ≥ 0 (JSON lines hold no raw newline, so a line is a row).
func CopyLines(dst io.Writer, src io.Reader, max int) (int, error) {
	br := bufio.NewReaderSize(src, 64<<10)
	bw := bufio.NewWriterSize(dst, 64<<10)
	n := 0
	for max < 0 || n < max {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if _, werr := bw.Write(line); werr != nil {
				return n, werr
			}
			if line[len(line)-1] == '\n' {
				n++
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			bw.Flush()
			return n, err
		}
	}
	return n, bw.Flush()
}

// CopyCSV copies CSV records from src to dst without src's header record,
// at most max of them when max ≥ 0. It parses rather than counts lines: a
// quoted field may hold a newline.
func CopyCSV(dst io.Writer, src io.Reader, max int) (int, error) {
	r := csv.NewReader(bufio.NewReaderSize(src, 64<<10))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	bw := bufio.NewWriterSize(dst, 64<<10)
	cw := csv.NewWriter(bw)
	n := 0
	if _, err := r.Read(); err != nil { // the header
		if err == io.EOF {
			return 0, nil
		}
		return 0, err
	}
	for max < 0 || n < max {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			cw.Flush()
			bw.Flush()
			return n, fmt.Errorf("csv: %w", err)
		}
		if err := cw.Write(rec); err != nil {
			return n, err
		}
		n++
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return n, err
	}
	return n, bw.Flush()
}
