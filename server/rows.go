package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/stream"
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
	// Record, when set, is a position stored in the same atomic write as
	// the rows of a one-batch ingest (BatchRows 0): the Idempotency-Key
	// record of an HTTP request (idempotency.go).
	Record *IngestRecord
	// Origin names where the input came from in its dead letters' origin
	// column and ids ("http key=<Idempotency-Key>", "http
	// request=<id>", "file <path>"); the rows' input line is beside it.
	Origin string
	// Delete makes every row of the input a delete of the key its columns
	// name (DELETE /v1/tables/{table}/rows; docs/changes.md): the rows
	// carry table.OperationDelete, which the input itself may not set.
	Delete bool
	// Registry, when set, is the Schema Registry format of framed
	// messages (FramedFormat): the input is those, not Format's.
	Registry string
}

// IngestRecord is a position committed with an ingest's rows; Value gets
// the result the caller will see once the commit succeeds.
type IngestRecord struct {
	Name  string
	Value func(ingest.Result) []byte
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
	if ts.degraded != "" {
		return res, ts.degradedError()
	}
	if opts.Record != nil && opts.BatchRows > 0 {
		return res, errors.New("server: a record is stored only with a one-batch ingest")
	}
	var err error
	var counted interface {
		io.Reader
		count() int64
	}
	if cr, ok := r.(*chunkReader); ok && cr.inPlace(opts.MaxBytes) {
		// A body in memory, not gzip, within the bound: its lines are
		// decoded where they lie in its chunks (ingest.Chunked).
		counted = cr
	} else {
		var zr io.Reader
		var releaseReader func()
		zr, releaseReader, err = ingest.MaybeGunzipPooled(r)
		defer releaseReader()
		if err != nil {
			return res, fmt.Errorf("%w: %w", ingest.ErrBadInput, err)
		}
		if opts.MaxBytes > 0 {
			zr = &limitedReader{r: zr, n: opts.MaxBytes}
		}
		counted = &countingReader{r: zr}
	}
	dopts := ingest.DecodeOptions{Format: opts.Format, Policy: ts.policy, Schema: ts.schema, BatchRows: opts.BatchRows}
	var skipped *badLines
	if ts.pipe.DeadLetters != nil && ts.policy == ingest.Skip {
		skipped = &badLines{format: opts.Format, origin: opts.Origin, now: s.now()}
		dopts.BadLine = skipped.add
	}
	var d ingest.Decoded
	// Without computed columns or filters, rows go from the decoder to the
	// table by column, without a map per row (ingest.DecodeColumns). A
	// delete's rows take the map path, which adds their operation.
	columnar := ts.pipe.Columnar() && !opts.Delete
	switch {
	case opts.Registry != "":
		res, d, err = s.ingestFramed(ctx, ts, counted, opts)
	case opts.BatchRows > 0 && columnar:
		d, err = ingest.DecodeColumns(counted, dopts, func(cb *colbatch.Batch) error {
			if err := noHiddenColumns(cb); err != nil {
				return err
			}
			b := ts.pipe.Begin()
			defer b.Close()
			b.Origin = opts.Origin
			if err := b.AddColumns(ctx, cb, &res); err != nil {
				return err
			}
			return b.Commit(ctx, &res)
		})
		if err == nil {
			err = skipped.store(ctx, ts.pipe.DeadLetters)
		}
	case opts.BatchRows > 0:
		// Every BatchRows rows are a batch of their own, durable on return.
		d, err = ingest.Decode(counted, dopts, func(rows []ingest.Row, lines []int) error {
			if err := operations(rows, lines, opts.Delete); err != nil {
				return err
			}
			b := ts.pipe.Begin()
			defer b.Close()
			b.Origin = opts.Origin
			if err := b.Add(ctx, rows, lines, &res); err != nil {
				return err
			}
			return b.Commit(ctx, &res)
		})
		if err == nil {
			err = skipped.store(ctx, ts.pipe.DeadLetters)
		}
	default:
		// One atomic batch, decoded and encoded into the table's pending
		// batch partRows rows at a time: its memory is the encoded blocks,
		// not a map per row of the whole input.
		b := ts.pipe.Begin()
		defer b.Close()
		b.Origin = opts.Origin
		dopts.BatchRows = partRows
		if rec := opts.Record; rec != nil {
			// d is the decode's outcome by the time Commit calls this.
			b.Record(rec.Name, func(r ingest.Result) []byte { r.AddBadLines(d); return rec.Value(r) })
		}
		if columnar {
			if ts.pipe.Compute == nil {
				// Without computed columns or filters nothing refers to
				// the string values once the batch is committed (or
				// not), unless they are in the result's dead letters.
				strs := stringsPool.Get().(*ingest.Strings)
				dopts.Strings = strs
				defer func() {
					if len(res.DeadLetters) == 0 {
						strs.Reset()
						stringsPool.Put(strs)
					}
				}()
			}
			d, err = ingest.DecodeColumns(counted, dopts, func(cb *colbatch.Batch) error {
				if err := noHiddenColumns(cb); err != nil {
					return err
				}
				return b.AddColumns(ctx, cb, &res)
			})
		} else {
			d, err = ingest.Decode(counted, dopts, func(rows []ingest.Row, lines []int) error {
				if err := operations(rows, lines, opts.Delete); err != nil {
					return err
				}
				return b.Add(ctx, rows, lines, &res)
			})
		}
		if err == nil {
			// The skipped lines are durable dead letters before the
			// batch is acknowledged (as compute's are).
			err = skipped.store(ctx, ts.pipe.DeadLetters)
		}
		if err == nil {
			err = b.Commit(ctx, &res)
		} else {
			b.Reject(&res)
		}
	}
	ts.pipe.Counters().Bytes.Add(counted.count())
	res.AddBadLines(d)
	if err != nil && errors.Is(err, ingest.ErrBadInput) && opts.BatchRows > 0 {
		ts.pipe.Counters().RejectedBatches.Add(1)
	}
	ts.pipe.Counters().Failed.Add(int64(d.BadCount))
	return res, err
}

// ErrHiddenColumn: an ingested row names one of sluice's own columns
// (table.HiddenPrefix): its source position or operation, which only
// sluice sets (a delete is DELETE /v1/tables/{table}/rows).
var ErrHiddenColumn = errors.New("a column named " + table.HiddenPrefix + "* is sluice's own")

// operations refuses rows that set a hidden column, and marks each row a
// delete of its key when deletes is set.
func operations(rows []ingest.Row, lines []int, deletes bool) error {
	for i, r := range rows {
		for c := range r {
			if table.Hidden(c) {
				return fmt.Errorf("%w: %w", ingest.ErrBadInput, &ingest.LineError{Line: lines[i], Err: fmt.Errorf("%w: %q", ErrHiddenColumn, c)})
			}
		}
		if deletes {
			r[table.OperationColumn] = table.OperationDelete
		}
	}
	return nil
}

// noHiddenColumns is operations' refusal for rows by column (a column
// kept from earlier rows holds no value of these: only a set cell counts).
func noHiddenColumns(cb *colbatch.Batch) error {
	for _, c := range cb.Cols {
		if !table.Hidden(c.Name) {
			continue
		}
		for r, cell := range c.Cells[:min(len(c.Cells), cb.Len)] {
			if cell.Kind != colbatch.Absent {
				return fmt.Errorf("%w: %w", ingest.ErrBadInput, &ingest.LineError{Line: cb.Lines[r], Err: fmt.Errorf("%w: %q", ErrHiddenColumn, c.Name)})
			}
		}
	}
	return nil
}

// stringsPool holds the string arenas of one-batch ingests (ingest.Strings).
var stringsPool = sync.Pool{New: func() any { return new(ingest.Strings) }}

// partRows is how many decoded rows of an atomic batch are held as rows at
// once before they are computed and encoded into the table's batch.
const partRows = 8192

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) count() int64 { return c.n }

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

// enterQueue takes an ingest slot, or answers 429 and reports false. On true
// the caller must s.queue.Leave(); the response's write deadline is set.
func (s *Server) enterQueue(w http.ResponseWriter) bool {
	if !s.queue.TryEnter() {
		s.throttled.Add(1)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "ingest queue full, retry later")
		return false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(deadline(s.cfg.Limits.WriteTimeout))
	return true
}

func (s *Server) handleRows(w http.ResponseWriter, r *http.Request) { s.serveRows(w, r, false) }

// handleDeleteRows deletes the keys its body's rows name (docs/changes.md):
// the same formats, limits and answers as handleRows.
func (s *Server) handleDeleteRows(w http.ResponseWriter, r *http.Request) { s.serveRows(w, r, true) }

// serveRows stores the rows of r's body in its table, each a delete of its
// key when deletes is set.
func (s *Server) serveRows(w http.ResponseWriter, r *http.Request, deletes bool) {
	name := r.PathValue("table")
	if !s.ready.Load() {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "server is shutting down")
		return
	}
	ts, ok := s.tables[name]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown table %q", name))
		return
	}
	if s.router.Routed(name) {
		writeError(w, http.StatusConflict, ingestRefused(name))
		return
	}
	if ts.degraded != "" {
		// No Retry-After: retrying does not help until a restart loads
		// the table's scripts.
		writeError(w, http.StatusServiceUnavailable, ts.degradedError().Error())
		return
	}
	var format ingest.Format
	registry := FramedFormat(r.Header.Get("Content-Type"))
	if registry == "" {
		var err error
		if format, err = ingest.FormatOf(r.Header.Get("Content-Type")); err != nil {
			writeError(w, http.StatusUnsupportedMediaType, err.Error())
			return
		}
	}
	if format == ingest.RDB && deletes {
		writeError(w, http.StatusUnsupportedMediaType, "a delete's body names keys as rows (NDJSON, JSON, CSV or Parquet), not an RDB snapshot")
		return
	}
	if format == ingest.RDB && r.Header.Get(idempotencyKeyHeader) != "" {
		writeError(w, http.StatusBadRequest, "Idempotency-Key is not supported for RDB snapshots (a snapshot is streamed, not held: use the atomic mode, docs/rdb.md)")
		return
	}
	if format == ingest.RDB {
		// A snapshot is streamed, not buffered (it may be larger than any
		// body limit), so it holds a slot while it arrives; its read deadline
		// moves only while bytes keep coming (rdbingest.go).
		if !s.enterQueue(w) {
			return
		}
		defer s.queue.Leave()
		s.serveRDB(w, r, name)
		return
	}
	// The body is read before a slot is taken: a client that trickles its
	// body holds only the bytes it has sent (out of a budget shared by all
	// bodies), never one of the slots that decode, compute and store.
	body, release, err := s.readBody(w, r)
	defer release()
	if err != nil {
		s.writeBodyError(w, err)
		return
	}
	opts := IngestOptions{Format: format, MaxBytes: s.cfg.Limits.MaxBodyBytes, Origin: requestOrigin(w, r), Delete: deletes, Registry: registry}
	if h := r.Header.Get(idempotencyKeyHeader); h != "" && s.cfg.Limits.IdempotencyTTL > 0 {
		k, answered := s.keyedRequest(w, name, h, body.(*chunkReader), deletes)
		if answered {
			return
		}
		defer k.end()
		opts.Record = k.record()
	}
	if !s.enterQueue(w) {
		return
	}
	defer s.queue.Leave()
	res, err := s.Ingest(r.Context(), name, body, opts)
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
	case errors.Is(err, schemaformat.ErrUnavailable):
		// Nothing was stored: the body is good again once the registry
		// answers, as a stream source pauses.
		w.Header().Set("Retry-After", "5")
		code = http.StatusServiceUnavailable
	case errors.Is(err, ErrNoRegistry):
		code = http.StatusUnsupportedMediaType
	case errors.Is(err, ingest.ErrRejected) && errors.As(err, &ce):
		code, resp.Column = http.StatusUnprocessableEntity, ce.Column
	case errors.Is(err, ingest.ErrBadInput):
		code = http.StatusBadRequest
	case errors.Is(err, ErrUnknownTable):
		code = http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		code = http.StatusRequestTimeout
	case errors.Is(err, table.ErrDiskFull):
		// Logged by the store when writes start being refused, not per request.
		code = diskFullStatus(w)
	}
	if code >= 500 && code != http.StatusInsufficientStorage {
		s.log.Error("ingest failed", "table", name, "error", err)
	}
	writeJSON(w, code, resp)
}

// errBodyBudget: the bodies being read or ingested already hold the
// server's body budget (max_inflight × (max_body_bytes + bodySlack)).
var errBodyBudget = errors.New("too many request bodies in memory")

// readBody reads r's body whole (at most max_body_bytes) into chunks of
// bodyChunk bytes, each reserved from the server's body budget as it is
// needed (a client holds what it has sent, not what its Content-Length
// promises). The body returned frees each chunk, and returns it to the
// budget, once it is read: the decoded batch grows as the body shrinks.
// release returns the rest (call it even on error).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (body io.Reader, release func(), err error) {
	limit := s.cfg.Limits.MaxBodyBytes
	cr := &chunkReader{budget: &s.bodyBytes}
	release = cr.release
	if r.ContentLength > limit {
		return nil, release, &http.MaxBytesError{Limit: limit}
	}
	src := http.MaxBytesReader(w, r.Body, limit)
	var read int64
	next := int64(firstBodyChunk)
	for {
		size := next
		next = min(2*next, bodyChunk)
		if r.ContentLength >= 0 {
			// The last chunks are no larger than what is left (+1 to see
			// EOF), down to the first chunk's size, and of the pools'
			// sizes: a last chunk cut to the exact length was allocated
			// for every request (73 KB of a 200 KB body).
			for left := r.ContentLength - read + 1; size > firstBodyChunk && size > left; {
				size /= 2
			}
		}
		cr.reserved += size
		if s.bodyBytes.Add(size) > s.bodyBudget {
			return nil, release, errBodyBudget
		}
		buf := getChunk(size)
		n, err := fill(src, buf)
		read += int64(n)
		cr.chunks = append(cr.chunks, buf[:n])
		cr.bufs = append(cr.bufs, buf)
		cr.sizes = append(cr.sizes, size)
		if errors.Is(err, io.EOF) {
			return cr, release, nil
		}
		if err != nil {
			// A body cut short is io.ErrUnexpectedEOF from net/http: an
			// error, not the end of a smaller batch.
			return nil, release, err
		}
	}
}

// fill reads into buf until it is full (nil error) or r fails (io.EOF at
// the end). Unlike io.ReadFull it passes io.EOF on as it is, so that a
// reader's own io.ErrUnexpectedEOF is not mistaken for the end.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// chunkReader reads chunks in order, dropping each (and returning its
// reservation to budget, its buffer to the chunk pool) once read. Read
// copies out of the chunks: nothing refers to a chunk once dropped.
type chunkReader struct {
	chunks   [][]byte
	bufs     [][]byte // the buffer of each chunk, whole
	sizes    []int64  // the reservation of each chunk
	budget   *atomic.Int64
	reserved int64
	read     int64 // bytes handed out, by Read and NextChunk
	handed   bool  // chunks[0] was handed out whole by NextChunk and is in use
}

func (c *chunkReader) Read(p []byte) (int, error) {
	c.dropHanded()
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.drop()
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	c.read += int64(n)
	if len(c.chunks[0]) == 0 {
		c.drop()
	}
	return n, nil
}

// NextChunk is ingest.Chunked's: the rest of the next chunk, which stays
// held (and reserved) until the next call; nil at the end.
func (c *chunkReader) NextChunk() []byte {
	c.dropHanded()
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.drop()
	}
	if len(c.chunks) == 0 {
		return nil
	}
	b := c.chunks[0]
	c.chunks[0] = b[len(b):]
	c.read += int64(len(b))
	c.handed = true
	return b
}

// dropHanded drops the chunk NextChunk handed out, now that it is not used.
func (c *chunkReader) dropHanded() {
	if c.handed {
		c.handed = false
		c.drop()
	}
}

func (c *chunkReader) count() int64 { return c.read }

// inPlace reports whether the body can be decoded from its chunks as they
// are: it is not gzip (which MaybeGunzip would sniff from its first two
// bytes; only the last chunk is short, so two bytes are in the first one
// unless the body is shorter) and within maxBytes (0: no bound), so that
// neither the gunzip nor the limit of the reader path changes anything.
func (c *chunkReader) inPlace(maxBytes int64) bool {
	if c.read > 0 || c.handed {
		return false
	}
	var size int64
	for _, b := range c.chunks {
		size += int64(len(b))
	}
	if maxBytes > 0 && size > maxBytes {
		return false
	}
	if len(c.chunks) > 0 && len(c.chunks[0]) >= 2 && c.chunks[0][0] == 0x1f && c.chunks[0][1] == 0x8b {
		return false
	}
	return true
}

func (c *chunkReader) drop() {
	free := c.sizes[0]
	putChunk(c.bufs[0])
	c.chunks[0], c.bufs[0] = nil, nil
	c.chunks, c.bufs, c.sizes = c.chunks[1:], c.bufs[1:], c.sizes[1:]
	c.reserved -= free
	c.budget.Add(-free)
}

func (c *chunkReader) release() {
	c.budget.Add(-c.reserved)
	c.reserved = 0
	for _, b := range c.bufs {
		putChunk(b)
	}
	c.chunks, c.bufs, c.sizes = nil, nil, nil
}

// chunkPools hold the body chunks of whole sizes firstBodyChunk << i, for
// reuse by the next bodies: a request's chunks were its largest garbage
// (a 1000-row body of 200 KB allocated 252 KB), and so drove the garbage
// collections of the ingest. The budget still counts the chunks of bodies
// in flight; idle ones are the pool's, which a collection empties.
var chunkPools [chunkClasses]sync.Pool

// chunkClasses: firstBodyChunk, twice that, ..., bodyChunk.
const chunkClasses = 9

// chunkClass is the pool of chunks of size, or -1 for a size that is not
// a whole class (the last, shortened chunk of a body with a length).
func chunkClass(size int64) int {
	for i := range chunkClasses {
		if int64(firstBodyChunk)<<i == size {
			return i
		}
	}
	return -1
}

// getChunk returns a buffer of size bytes (not zeroed).
func getChunk(size int64) []byte {
	if c := chunkClass(size); c >= 0 {
		if b, ok := chunkPools[c].Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, size)
}

// putChunk gives b (from getChunk) back; nothing may use it after.
func putChunk(b []byte) {
	if c := chunkClass(int64(len(b))); c >= 0 {
		chunkPools[c].Put(&b)
	}
}

// Request bodies are read and reserved in chunks that double from
// firstBodyChunk to bodyChunk: a body holds at most about twice what has
// arrived, and a client that trickles a few bytes holds a few KiB.
const (
	firstBodyChunk = 4 << 10
	bodyChunk      = 1 << 20
)

// bodySlack is the body budget per slot beyond max_body_bytes: room for
// the first chunks of bodies still arriving while the slots' bodies are
// whole.
const bodySlack = 64 << 10

// writeBodyError answers a body that could not be read.
func (s *Server) writeBodyError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", s.cfg.Limits.MaxBodyBytes))
	case errors.Is(err, errBodyBudget):
		s.throttled.Add(1)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "ingest queue full (request bodies in memory), retry later")
	case isTimeout(err):
		writeError(w, http.StatusRequestTimeout, fmt.Sprintf("the body did not arrive within read_timeout (%v)", s.cfg.Limits.ReadTimeout))
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reading the body: %v", err))
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// Not HTML-escaped: error messages quote where clauses (n >= "abc"),
	// which read as n \u003e= otherwise.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // ends with a newline
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

// memPerSlot bounds the memory of one ingest batch in flight, in multiples
// of max_body_bytes (docs/server.md, "Memory"; TestIngestMemoryBound).
const memPerSlot = 3

// memBaseline is the memory of a server with an empty store and no
// request in flight, with room for Pebble's caches.
const memBaseline = 64 << 20

// MemoryBound is the peak memory (RSS) of a server that ingests
// maxInflight bodies of maxBody bytes at once: memBaseline + maxInflight ×
// memPerSlot × maxBody (docs/server.md, "Memory"). The server sets it as
// the Go runtime's soft memory limit unless GOMEMLIMIT is set.
func MemoryBound(maxBody int64, maxInflight int) int64 {
	return memBaseline + int64(maxInflight)*memPerSlot*maxBody
}

// requestIDHeader names, in an ingest answer, the id a request without an
// Idempotency-Key gets: its dead letters' origin is "http request=<id>".
const requestIDHeader = "Sluice-Request-Id"

// requestOrigin is the dead-letter origin of an ingest request: its
// Idempotency-Key when it has one (a retry's dead letters then get the
// same ids), otherwise a random request id, answered in Sluice-Request-Id
// so that the client can find them.
func requestOrigin(w http.ResponseWriter, r *http.Request) string {
	if k := r.Header.Get(idempotencyKeyHeader); k != "" {
		return "http key=" + k
	}
	var b [12]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	w.Header().Set(requestIDHeader, id)
	return "http request=" + id
}

// badLines are the lines an ingest under on_bad_line: skip skipped, as
// dead letters: the line itself (a JSON array's element as an array of
// one), its line, the request's origin; CSV and Parquet rows are named but
// not kept (without their header or file they mean nothing, and replay
// leaves such a dead letter as it is).
type badLines struct {
	format ingest.Format
	// registry, when set, is the Schema Registry format of framed
	// messages: a line is a message, kept as its bytes (Go-quoted when
	// they are not UTF-8) for replay to decode with the registry again.
	registry string
	origin   string
	now      time.Time
	rows     []ingest.Row
}

func (b *badLines) add(e *ingest.LineError) {
	row := ingest.Row{"time": b.now, "column": "", "filter": false, "loader": "input", "source": "",
		"error": e.Error(), "line": int64(e.Line),
		"id": ingest.DeadLetterID(b.origin, strconv.Itoa(e.Line), "input")}
	if b.origin != "" {
		row["origin"] = b.origin
	} else {
		// Nothing names the input: the time and the text tell two
		// requests' lines apart.
		row["id"] = ingest.DeadLetterID(row["id"].(string), b.now.Format(time.RFC3339Nano), e.Text)
	}
	switch {
	case b.registry != "":
		row["row"], row["format"] = e.Text, b.registry
		if !utf8.ValidString(e.Text) {
			row["row"], row["format"] = strconv.Quote(e.Text), b.registry+stream.FormatQuoted
		}
	case e.Text == "":
		row["row"] = ""
	case b.format == ingest.JSONArray:
		row["row"], row["format"] = "["+e.Text+"]", ingest.JSONArray.String()
	default:
		row["row"], row["format"] = e.Text, ingest.NDJSON.String()
	}
	b.rows = append(b.rows, row)
}

// store appends the dead letters to dead (nil b: nothing to store).
func (b *badLines) store(ctx context.Context, dead ingest.Appender) error {
	if b == nil || len(b.rows) == 0 {
		return nil
	}
	if err := dead.Append(ctx, b.rows); err != nil {
		return fmt.Errorf("storing %d skipped lines as dead letters: %w", len(b.rows), err)
	}
	b.rows = nil
	return nil
}
