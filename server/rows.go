package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/table"
)

// ErrUnknownTable is wrapped when a table is not configured.
var ErrUnknownTable = errors.New("unknown table")

// IngestOptions configure Ingest.
type IngestOptions struct {
	Format ingest.Format
	// BatchRows splits the input into batches of this many rows, each
	// appended (and durable) on its own; 0 makes the whole input one
	// atomic batch (what an HTTP request is).
	BatchRows int
	// MaxBytes bounds the input after gzip decoding (0 = no bound); past
	// it the error wraps ErrTooLarge.
	MaxBytes int64
}

// ErrTooLarge: the input (after gzip decoding) is over IngestOptions.MaxBytes.
var ErrTooLarge = errors.New("input too large")

// Ingest decodes r (gzip or not) and stores its rows in table, returning
// what happened to them. It is what POST /v1/tables/{table}/rows does, and
// what `sluice ingest` does straight into a store directory.
func (s *Server) Ingest(ctx context.Context, tableName string, r io.Reader, opts IngestOptions) (ingest.Result, error) {
	var res ingest.Result
	ts, ok := s.tables[tableName]
	if !ok {
		return res, fmt.Errorf("%w %q", ErrUnknownTable, tableName)
	}
	zr, err := ingest.MaybeGunzip(r)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ingest.ErrBadInput, err)
	}
	if opts.MaxBytes > 0 {
		zr = &limitedReader{r: zr, n: opts.MaxBytes}
	}
	counted := &countingReader{r: zr}
	d, err := ingest.Decode(counted, ingest.DecodeOptions{Format: opts.Format, Policy: ts.policy, Schema: ts.schema, BatchRows: opts.BatchRows},
		func(rows []ingest.Row, lines []int) error { return ts.pipe.Ingest(ctx, rows, lines, &res) })
	ts.pipe.Counters().Bytes.Add(counted.n)
	res.AddBadLines(d)
	if err != nil && errors.Is(err, ingest.ErrBadInput) {
		ts.pipe.Counters().RejectedBatches.Add(1)
		ts.pipe.Counters().Failed.Add(int64(d.BadCount))
	} else {
		ts.pipe.Counters().Failed.Add(int64(d.BadCount))
	}
	return res, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// limitedReader fails with ErrTooLarge past n bytes (http.MaxBytesReader
// bounds the wire bytes; this bounds them after gzip decoding too).
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n+1] // read one byte more to see whether the limit is passed
	}
	n, err := l.r.Read(p)
	if int64(n) > l.n {
		l.n = 0
		return n - 1, ErrTooLarge
	}
	l.n -= int64(n)
	return n, err
}

// ingestResponse is the body of an ingest answer.
type ingestResponse struct {
	ingest.Result
	Error string `json:"error,omitempty"`
	// Line, Row and Column locate the error when it is about one.
	Line   int    `json:"line,omitempty"`
	Row    *int   `json:"row,omitempty"`
	Column string `json:"column,omitempty"`
}

func (s *Server) handleRows(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("table")
	if !s.ready.Load() {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "server is shutting down")
		return
	}
	if _, ok := s.tables[name]; !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown table %q", name))
		return
	}
	format, err := ingest.FormatOf(r.Header.Get("Content-Type"))
	if err != nil {
		writeError(w, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	// The slot is taken before the body is read so the bound covers the
	// memory of bodies being read; ReadTimeout bounds how long a slow
	// client can hold one.
	if !s.queue.TryEnter() {
		s.throttled.Add(1)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "ingest queue full, retry later")
		return
	}
	defer s.queue.Leave()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(deadline(s.cfg.Limits.WriteTimeout))
	if format == ingest.RDB {
		s.serveRDB(w, r, name) // streamed in batches: rdbingest.go
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxBodyBytes)
	res, err := s.Ingest(r.Context(), name, body, IngestOptions{Format: format, MaxBytes: s.cfg.Limits.MaxBodyBytes})
	resp := ingestResponse{Result: res}
	if err == nil {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	resp.Error = err.Error()
	code := http.StatusInternalServerError
	var mbe *http.MaxBytesError
	var le *ingest.LineError
	var re *ingest.RowError
	var se *table.SchemaError
	var ce *compute.Error
	if errors.As(err, &re) {
		resp.Row, resp.Line = &re.Row, re.Line
	}
	switch {
	case errors.As(err, &mbe) || errors.Is(err, ErrTooLarge):
		code = http.StatusRequestEntityTooLarge
		resp.Error = fmt.Sprintf("body larger than %d bytes", s.cfg.Limits.MaxBodyBytes)
	case errors.As(err, &le):
		code, resp.Line = http.StatusBadRequest, le.Line
	case errors.As(err, &se):
		code, resp.Column = http.StatusBadRequest, se.Column
	case errors.Is(err, ingest.ErrRejected) && errors.As(err, &ce):
		code, resp.Column = http.StatusUnprocessableEntity, ce.Column
	case errors.Is(err, ingest.ErrBadInput):
		code = http.StatusBadRequest
	case errors.Is(err, ErrUnknownTable):
		code = http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		code = http.StatusRequestTimeout
	}
	if code >= 500 {
		s.log.Error("ingest failed", "table", name, "error", err)
	}
	writeJSON(w, code, resp)
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(v)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// deadline is now+d, or no deadline for d <= 0.
func deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}
