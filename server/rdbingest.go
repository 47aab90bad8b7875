package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/rdb"
	"github.com/sluicedb/sluice/rdbtool"
	"github.com/sluicedb/sluice/table"
)

// RDBResult is what happened to a snapshot: the ingest result summed over
// its batches, how far the snapshot was read, and how it was stored.
type RDBResult struct {
	ingest.Result
	Keys    int64 `json:"keys"`    // keys selected by the filters (rows decoded)
	Batches int   `json:"batches"` // batches stored or staged (or tried)
	Bytes   int64 `json:"bytes"`   // snapshot bytes parsed
	// Mode is RDBAtomic, RDBStream or RDBState.
	Mode string `json:"mode"`
	// Generation orders the snapshots of mode RDBState (0 in the others);
	// Deleted counts the keys it deleted as absent from the snapshot.
	Generation int64 `json:"generation,omitempty"`
	Deleted    int64 `json:"deleted,omitempty"`
}

// The modes of an RDB ingest (RDBResult.Mode).
const (
	// RDBAtomic stores a snapshot whole or not at all: its rows are staged
	// on disk (table.Stage) and published in one step once the whole
	// snapshot was read and its CRC64 checked.
	RDBAtomic = "atomic"
	// RDBStream stores each batch as it is read (ingest.RDBOptions.Stream).
	RDBStream = "stream"
	// RDBState makes the snapshot the state of a keyed table: each batch
	// upserts its keys as it is read (as RDBStream), and once the snapshot
	// was read whole and its checksum matched, the keys it does not hold
	// are deleted (ingest.RDBOptions.State; docs/upserts.md, "A Redis
	// snapshot as the state").
	RDBState = "state"
)

// rdbStatePartition is the source partition of the rows of a snapshot
// ingested as a table's state; the offset is the snapshot's generation.
// One per table: the snapshots made a table's state are one sequence.
const rdbStatePartition = "rdb"

// ErrOlderSnapshot is wrapped by the error of a state ingest whose
// snapshot's generation is older than one the table was given already:
// nothing of it is stored.
var ErrOlderSnapshot = errors.New("the snapshot is older than the table's state")

// ErrGenerationReused is wrapped by the error of a state ingest of a
// snapshot whose generation is the one of another snapshot (another
// checksum) the table was given whole: its keys of the same generation
// were taken for that snapshot's and not rewritten, so the table may hold
// a mix of the two. A snapshot with a larger generation repairs it.
var ErrGenerationReused = errors.New("another snapshot with the same generation made the table's state")

// ErrNothingStored is wrapped by the error of an RDB ingest in atomic mode:
// nothing of the snapshot was stored.
var ErrNothingStored = errors.New("nothing of the snapshot was stored (mode atomic)")

// IngestRDB reads a Redis RDB snapshot from r (gzip or not) as it arrives
// and stores one row per selected key (ingest.RDBColumns) in table, in
// batches of opts.BatchRows rows, each going through the table's filters
// and computed columns. It is what POST /v1/tables/{table}/rows with
// Content-Type application/x-redis-rdb does, and `sluice ingest --format
// rdb` straight into a store directory. opts combine with the table's rdb:
// defaults (config.RDB; see withTableRDB).
//
// By default (RDBAtomic) the batches are staged on disk and published
// together once the snapshot was read to its end and its checksum matched:
// a snapshot that cannot be read, a batch refused, a cancelled ctx or a
// crash store nothing (the error then wraps ErrNothingStored), so a retry
// stores each key once. Memory stays bounded by a batch whatever the
// snapshot's size. With opts.Stream (RDBStream) each batch is durable on
// its own as it is read, as an HTTP batch is, and the batches stored
// before a failure stay stored (their count is in the result).
//
// A snapshot that cannot be read stops the ingest with an error wrapping
// ingest.ErrBadInput that names the input, byte offset and key.
func (s *Server) IngestRDB(ctx context.Context, tableName string, r io.Reader, opts ingest.RDBOptions) (RDBResult, error) {
	res := RDBResult{Mode: RDBAtomic}
	switch {
	case opts.State:
		res.Mode = RDBState
		opts.Stream = true // stored batch by batch
	case opts.Stream:
		res.Mode = RDBStream
	}
	ts, ok := s.tables[tableName]
	if !ok {
		return res, fmt.Errorf("%w %q", ErrUnknownTable, tableName)
	}
	if ts.degraded != "" {
		return res, ts.degradedError()
	}
	opts, err := withTableRDB(opts, ts.cfg.RDB)
	if err != nil {
		return res, fmt.Errorf("%w: table %s: %w", ingest.ErrBadInput, tableName, err)
	}
	zr, err := ingest.MaybeGunzip(r)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ingest.ErrBadInput, err)
	}
	if !opts.Stream && len(ts.table.PrimaryKey()) > 0 {
		// The atomic mode stages the snapshot outside the appends that keep
		// a keyed table's index (docs/upserts.md, "Refused for now").
		return res, fmt.Errorf("%w: table %s: mode %s: %w; mode %s makes the snapshot the table's state (absent keys deleted), mode %s upserts the snapshot's rows batch by batch",
			ingest.ErrBadInput, tableName, RDBAtomic, table.ErrKeyed, RDBState, RDBStream)
	}
	var state *rdbState
	if opts.State {
		if len(ts.table.PrimaryKey()) == 0 {
			return res, fmt.Errorf("%w: table %s: mode %s needs a table with a primary key (primary_key: [db, key])", ingest.ErrBadInput, tableName, RDBState)
		}
		unlock, err := lockRDBState(ctx, ts.table)
		if err != nil {
			return res, err
		}
		defer unlock()
		state = &rdbState{store: s.store, table: ts.table, generation: opts.Generation}
		opts.Header = state.begin
	}
	pipe := ts.pipe
	var stage *table.Stage
	if !opts.Stream {
		if stage, err = s.store.NewStage(); err != nil {
			return res, err
		}
		defer stage.Close()
		// The table's filters, computed columns and policies, into the
		// stage; its counters are added to the table's at the end.
		pipe = &ingest.Pipeline{Table: stagedAppender{stage, ts.table}, Compute: ts.pipe.Compute, RowOf: ts.pipe.RowOf}
		if ts.pipe.DeadLetters != nil && ts.deadLetter != nil {
			pipe.DeadLetters = stagedAppender{stage, ts.deadLetter.table}
		}
	}
	// With two cores or more, the next batch is decoded while this one is
	// stored (computed columns, synced append).
	opts.Overlap = runtime.GOMAXPROCS(0) >= 2
	// The value column is JSON written by rdbtool's own writer, valid by
	// construction: the table stores it without checking it again
	// (json.Valid was a quarter of the ingest's CPU). A computed column
	// that replaces it is checked by compute as any other.
	trusted := table.TrustJSON(ctx, "value")
	batches := 0
	d, err := ingest.DecodeRDB(ctx, zr, opts, func(rows []ingest.Row) error {
		if state != nil {
			if rdbStateBatchHook != nil {
				if err := rdbStateBatchHook(batches); err != nil {
					return err
				}
			}
			state.position(rows)
		}
		batches++
		return pipe.Ingest(trusted, rows, nil, &res.Result)
	})
	if err == nil && stage != nil {
		if err = stage.Publish(ctx); err != nil {
			err = fmt.Errorf("%s: publish the snapshot's rows: %w", opts.Name, err)
		}
	}
	if state != nil {
		res.Generation = state.generation
		if err == nil {
			res.Deleted, err = state.finish(ctx, d.Checksum, opts.BatchRows)
			if err != nil {
				err = fmt.Errorf("%s: %w", opts.Name, err)
			}
		}
	}
	res.Keys, res.Batches, res.Bytes = d.Rows, d.Batches, d.Bytes
	counters := ts.pipe.Counters()
	counters.Bytes.Add(d.Bytes)
	if errors.Is(err, ingest.ErrBadInput) || (err != nil && stage != nil) {
		// The unfinished batch is not stored: count it as a rejected one.
		counters.RejectedBatches.Add(1)
		counters.Rows.Add(int64(d.Pending))
		counters.Failed.Add(int64(d.Pending))
		res.Failed += d.Pending
	}
	if stage != nil {
		staged := pipe.Counters()
		counters.Batches.Add(staged.Batches.Load())
		counters.RejectedBatches.Add(staged.RejectedBatches.Load())
		counters.Rows.Add(staged.Rows.Load())
		counters.Filtered.Add(staged.Filtered.Load())
		counters.Failed.Add(staged.Failed.Load())
		if err != nil {
			// Nothing is stored: the rows that were staged failed too.
			counters.Failed.Add(staged.Accepted.Load())
			res.Failed += res.Accepted
			res.Accepted = 0
			err = fmt.Errorf("%w; %w", err, ErrNothingStored)
		} else {
			counters.Accepted.Add(staged.Accepted.Load())
		}
	}
	return res, err
}

// stagedAppender stages a table's rows in a Stage (an RDB snapshot stored
// all or nothing).
type stagedAppender struct {
	stage *table.Stage
	t     *table.Table
}

func (a stagedAppender) Append(ctx context.Context, rows []ingest.Row) error {
	return a.stage.Append(ctx, a.t, rows)
}

// withTableRDB combines a request's options (query parameters, CLI flags)
// with the table's rdb: section. db, type and prefix narrow the table's
// selection: a request may ask for some of the table's databases and types
// (not others), and for prefixes that start with one of the table's;
// min_size takes the larger of the two; pattern, regex and batch replace
// the table's when the request gives them. A request that asks for keys
// the table's section excludes is an error, not an empty result.
func withTableRDB(req ingest.RDBOptions, table config.RDB) (ingest.RDBOptions, error) {
	def, _ := rdbFilter(table) // checked by New (ValidateOptions)
	out := req
	var errs []error
	if len(def.DBs) > 0 {
		out.Filter.DBs = def.DBs
		if len(req.Filter.DBs) > 0 {
			out.Filter.DBs = req.Filter.DBs
			for _, db := range req.Filter.DBs {
				if !slices.Contains(def.DBs, db) {
					errs = append(errs, fmt.Errorf("db %d: not among the databases of the table's rdb.db %v", db, def.DBs))
				}
			}
		}
	}
	if len(def.Types) > 0 {
		out.Filter.Types = def.Types
		if len(req.Filter.Types) > 0 {
			out.Filter.Types = req.Filter.Types
			for _, t := range req.Filter.Types {
				if !slices.Contains(def.Types, t) {
					errs = append(errs, fmt.Errorf("type %s: not among the types of the table's rdb.type %v", t, table.Type))
				}
			}
		}
	}
	if len(def.Prefixes) > 0 {
		out.Filter.Prefixes = def.Prefixes
		if len(req.Filter.Prefixes) > 0 {
			out.Filter.Prefixes = req.Filter.Prefixes
			for _, p := range req.Filter.Prefixes {
				if !slices.ContainsFunc(def.Prefixes, func(d string) bool { return strings.HasPrefix(p, d) }) {
					errs = append(errs, fmt.Errorf("prefix %q: does not start with one of the table's rdb.prefix %q", p, def.Prefixes))
				}
			}
		}
	}
	out.Filter.MinSize = max(req.Filter.MinSize, def.MinSize)
	if req.Filter.Pattern == "" {
		out.Filter.Pattern = def.Pattern
	}
	if req.Filter.Regex == "" {
		out.Filter.Regex = def.Regex
	}
	if req.BatchRows <= 0 {
		out.BatchRows = table.Batch
	}
	return out, errors.Join(errs...)
}

// RDBParams are the query parameters of an RDB ingest request: the
// snapshot filters and the batch size.
//
//	db=0,3  type=hash,zset  prefix=user: (repeatable)  pattern=user:*:cart
//	regex=^user:\d+$  min_size=100000  batch=1000  checksum=false
//	mode=atomic (the default), mode=stream or mode=state  generation=1717171717
func RDBParams(q url.Values) (ingest.RDBOptions, error) {
	var o ingest.RDBOptions
	var errs []error
	for _, v := range splitParams(q["db"]) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("db %q: want a database number", v))
			continue
		}
		o.Filter.DBs = append(o.Filter.DBs, n)
	}
	for _, v := range splitParams(q["type"]) {
		t, err := rdbtool.ParseType(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		o.Filter.Types = append(o.Filter.Types, t)
	}
	// Prefixes are taken whole (one per parameter): a prefix may hold a comma.
	o.Filter.Prefixes = q["prefix"]
	o.Filter.Pattern = q.Get("pattern")
	o.Filter.Regex = q.Get("regex")
	if v := q.Get("min_size"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("min_size %q: want a number of bytes", v))
		}
		o.Filter.MinSize = n
	}
	if v := q.Get("batch"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1_000_000 {
			errs = append(errs, fmt.Errorf("batch %q: want 1 to 1000000 rows", v))
		}
		o.BatchRows = n
	}
	if v := q.Get("checksum"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("checksum %q: want true or false", v))
		}
		o.SkipChecksum = !b
	}
	switch v := q.Get("mode"); v {
	case "", RDBAtomic:
	case RDBStream:
		o.Stream = true
	case RDBState:
		o.State = true
	default:
		errs = append(errs, fmt.Errorf("mode %q: want %s (the snapshot stored whole or not at all), %s (each batch as it is read) or %s (the snapshot becomes a keyed table's state)", v, RDBAtomic, RDBStream, RDBState))
	}
	if v := q.Get("generation"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil || n <= 0:
			errs = append(errs, fmt.Errorf("generation %q: want a positive number", v))
		case !o.State:
			errs = append(errs, fmt.Errorf("generation %q: only with mode=%s", v, RDBState))
		}
		o.Generation = n
	}
	for k := range q {
		switch k {
		case "db", "type", "prefix", "pattern", "regex", "min_size", "batch", "checksum", "mode", "generation":
		default:
			errs = append(errs, fmt.Errorf("unknown parameter %q (want db, type, prefix, pattern, regex, min_size, batch, checksum, mode, generation)", k))
		}
	}
	return o, errors.Join(errs...)
}

// RDBValues is the inverse of RDBParams, for clients.
func RDBValues(o ingest.RDBOptions) url.Values {
	q := url.Values{}
	if len(o.Filter.DBs) > 0 {
		dbs := make([]string, len(o.Filter.DBs))
		for i, d := range o.Filter.DBs {
			dbs[i] = strconv.Itoa(d)
		}
		q.Set("db", strings.Join(dbs, ","))
	}
	if len(o.Filter.Types) > 0 {
		ts := make([]string, len(o.Filter.Types))
		for i, t := range o.Filter.Types {
			ts[i] = t.String()
		}
		q.Set("type", strings.Join(ts, ","))
	}
	for _, p := range o.Filter.Prefixes {
		q.Add("prefix", p)
	}
	if o.Filter.Pattern != "" {
		q.Set("pattern", o.Filter.Pattern)
	}
	if o.Filter.Regex != "" {
		q.Set("regex", o.Filter.Regex)
	}
	if o.Filter.MinSize > 0 {
		q.Set("min_size", strconv.FormatInt(o.Filter.MinSize, 10))
	}
	if o.BatchRows > 0 {
		q.Set("batch", strconv.Itoa(o.BatchRows))
	}
	if o.SkipChecksum {
		q.Set("checksum", "false")
	}
	switch {
	case o.State:
		q.Set("mode", RDBState)
		if o.Generation > 0 {
			q.Set("generation", strconv.FormatInt(o.Generation, 10))
		}
	case o.Stream:
		q.Set("mode", RDBStream)
	}
	return q
}

func splitParams(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// rdbResponse is the body of an RDB ingest answer.
type rdbResponse struct {
	RDBResult
	Error string `json:"error,omitempty"`
	// Offset and Key locate a snapshot that could not be read.
	Offset *int64 `json:"offset,omitempty"`
	Key    string `json:"key,omitempty"`
	// Row and Column locate a row a computed column or the schema refused.
	Row    *int   `json:"row,omitempty"`
	Column string `json:"column,omitempty"`
}

// serveRDB answers an ingest request whose body is an RDB snapshot (the
// caller holds a queue slot). The body is parsed as it arrives and staged
// (or, with mode=stream, stored) batch by batch, so it is not bound by
// max_body_bytes (memory is bound by the batch) and read_timeout bounds a
// stall, not the whole upload: the read deadline moves on as bytes arrive.
func (s *Server) serveRDB(w http.ResponseWriter, r *http.Request, name string) {
	opts, err := RDBParams(r.URL.Query())
	if err == nil {
		// Checked here too (IngestRDB does it again) to answer before the
		// body is read.
		_, err = withTableRDB(opts, s.tables[name].cfg.RDB)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	opts.Name = "request body"
	rc := http.NewResponseController(w)
	body := &deadlineReader{r: r.Body, rc: rc, timeout: s.cfg.Limits.ReadTimeout}
	res, err := s.IngestRDB(r.Context(), name, body, opts)
	resp := rdbResponse{RDBResult: res}
	code := http.StatusOK
	if err != nil {
		resp.Error = err.Error()
		code = http.StatusInternalServerError
		var ce *rdb.CorruptionError
		var re *ingest.RowError
		var se *table.SchemaError
		var cerr *compute.Error
		if errors.As(err, &ce) {
			resp.Offset, resp.Key = &ce.Offset, string(ce.Key)
		}
		if errors.As(err, &re) {
			resp.Row = &re.Row
		}
		switch {
		case body.readErr != nil && errors.Is(err, body.readErr):
			// The body broke off (client gone, stalled past read_timeout).
			code = http.StatusRequestTimeout
		case errors.Is(err, ingest.ErrBadInput):
			code = http.StatusBadRequest
		case errors.Is(err, ErrOlderSnapshot), errors.Is(err, ErrGenerationReused):
			code = http.StatusConflict
		case errors.As(err, &se):
			code, resp.Column = http.StatusBadRequest, se.Column
		case errors.Is(err, ingest.ErrRejected) && errors.As(err, &cerr):
			code, resp.Column = http.StatusUnprocessableEntity, cerr.Column
		case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
			code = http.StatusRequestTimeout
		case errors.Is(err, table.ErrDiskFull):
			code = diskFullStatus(w)
		}
		if code >= 500 {
			s.log.Error("rdb ingest failed", "table", name, "error", err)
		}
		if body.readErr == nil {
			// Read what is left of the body (each stall bounded by
			// read_timeout) before answering: a client still sending would
			// otherwise see the connection reset instead of the answer
			// (TestRDBOverHTTPCorruptEarly caught it under -race).
			_, _ = io.Copy(io.Discard, body)
		}
	}
	_ = rc.SetWriteDeadline(deadline(s.cfg.Limits.WriteTimeout))
	writeJSON(w, code, resp)
}

// deadlineReader moves the connection's read deadline timeout ahead of
// the last read, so a long upload is bound by stalls rather than by its
// total time; it remembers the first read error other than io.EOF.
type deadlineReader struct {
	r       io.Reader
	rc      *http.ResponseController
	timeout time.Duration
	moved   time.Time
	readErr error
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if d.timeout > 0 {
		// Moved at most every quarter of the timeout (and every second),
		// so a stall of three quarters of it is always allowed.
		if now := time.Now(); now.Sub(d.moved) >= min(time.Second, d.timeout/4) {
			d.moved = now
			_ = d.rc.SetReadDeadline(now.Add(d.timeout))
		}
	}
	n, err := d.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && d.readErr == nil {
		d.readErr = err
	}
	return n, err
}

// PostRDB streams an RDB snapshot to POST /v1/tables/{table}/rows as
// application/x-redis-rdb with opts as query parameters (the server parses
// it as it arrives). The request asks for 100-continue, so a server that
// answers 429 or 503 before reading does so before the body is sent; it is
// then retried when body is an io.Seeker (a file), rewound to its start.
func (c *Client) PostRDB(ctx context.Context, tableName string, body io.Reader, opts ingest.RDBOptions) (RDBResult, error) {
	var res RDBResult
	path := "/v1/tables/" + url.PathEscape(tableName) + "/rows?" + RDBValues(opts).Encode()
	retries := c.MaxRetries
	if retries == 0 {
		retries = 20
	}
	hc := c.HTTP
	if hc == nil {
		// No overall timeout: a snapshot of gigabytes takes as long as it
		// takes; ctx bounds it. A transport of its own, with a 100-continue
		// wait, closed after (one snapshot, one connection).
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = c.TLS
		tr.ExpectContinueTimeout = 5 * time.Second
		defer tr.CloseIdleConnections()
		hc = &http.Client{Transport: tr}
	}
	seeker, canRetry := body.(io.Seeker)
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, http.MethodPost, path, io.NopCloser(body))
		if err != nil {
			return res, err
		}
		req.Header.Set("Content-Type", ingest.RDBContentType)
		req.Header.Set("Expect", "100-continue")
		resp, err := hc.Do(req)
		if err != nil {
			return res, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		busy := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
		if busy && attempt < retries && canRetry {
			if _, err := seeker.Seek(0, io.SeekStart); err != nil {
				canRetry = false // not rewindable after all: report the answer
			}
		}
		if busy && attempt < retries && canRetry {
			wait := time.Second
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
				wait = time.Duration(s) * time.Second
			}
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		var r rdbResponse
		_ = json.Unmarshal(b, &r)
		if resp.StatusCode != http.StatusOK {
			return r.RDBResult, &StatusError{Code: resp.StatusCode, Body: string(b)}
		}
		return r.RDBResult, nil
	}
}
