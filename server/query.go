package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/cluster/leases"
	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/internal/rowformat"
	"github.com/sluicedb/sluice/table"
)

// QueryRequest is a query as the API takes it: URL parameters on GET, or
// this JSON on POST.
//
// GET parameters: from, to (RFC 3339 or unix seconds), hash (repeatable; the
// hashBy values), columns (comma separated; a column may be a path into a
// json column, "address.city", as in where clauses), where (repeatable: "n>=5",
// "user IN a,b", "x IS NULL", "x IS NOT NULL", "address.city = Oslo": a
// path into a json column, WhereClause), limit, format (ndjson or
// csv; also chosen by Accept: text/csv).
type QueryRequest struct {
	From    TimeBound `json:"from,omitempty"`
	To      TimeBound `json:"to,omitempty"`
	Hash    []any     `json:"hash,omitempty"`
	Columns []string  `json:"columns,omitempty"`
	// Paths resolves names of Columns: the output column of that name is
	// the value Path addresses in the json column Column, or, with no
	// Path, the column Column itself (which must be the name). A name
	// Paths lacks is resolved as a where clause's column is
	// (resolveColumn). A cluster query's coordinator sends every member
	// every column resolved, so that all nodes read them as it did.
	Paths  map[string]table.ColumnPath `json:"paths,omitempty"`
	Where  []WhereClause               `json:"where,omitempty"`
	Limit  int                         `json:"limit,omitempty"`
	Format string                      `json:"format,omitempty"`

	// Cluster asks for every node's rows (docs/cluster.md); Partial lets
	// a cluster query answer without the nodes that failed, listed in the
	// Sluice-Missing-Nodes header (and trailer, for nodes that failed
	// mid-answer). Tier "hot" limits a node's answer to its store's rows,
	// without the cold tier's: what a cluster query asks of each node.
	Cluster bool   `json:"cluster,omitempty"`
	Partial bool   `json:"partial,omitempty"`
	Tier    string `json:"tier,omitempty"`
	// Lease reads this node's part under a read lease's hold (lease.go).
	Lease string `json:"lease,omitempty"`
	// Offsets is set by a cluster query's coordinator: the member reports
	// the source offsets its answer holds (header Sluice-Offsets) and
	// answers only for the share that the rest of the request body names
	// (overlap.go).
	Offsets bool `json:"offsets,omitempty"`
	// Keyed is set by the coordinator of a keyed table's cluster query:
	// the member answers its key index entries before its rows
	// (keyedmerge.go).
	Keyed bool `json:"keyed,omitempty"`

	// known are columns of the table's whole schema that this node's
	// store lacks (the Iceberg table's, or a member's, found by
	// knowColumns); the node answers them as null.
	known map[string]bool
}

// TimeBound is a query's from or to: RFC 3339 or unix seconds, as text.
// In JSON it may be a string or a number (`"from": 1732400000`).
type TimeBound string

// UnmarshalJSON accepts a JSON string or number.
func (b *TimeBound) UnmarshalJSON(data []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		*b = TimeBound(x)
	case json.Number:
		*b = TimeBound(x.String())
	case nil:
		*b = ""
	default:
		return fmt.Errorf("time %s: want RFC 3339 text or unix seconds", data)
	}
	return nil
}

// WhereClause is one predicate of a QueryRequest.
//
// Column may address a value inside a json column (docs/streams.md,
// "Nested values"): `address.city`, `items[0].sku`, `"a.b".c`. A Column
// that names a column of the table is that column, whatever it looks like;
// otherwise a text with a path is the path into the column before it
// (resolveWhere). Path, when set, is the path itself, into Column taken as
// a column name as it is: the form a cluster query's coordinator sends its
// members, so that every node reads the clause as the coordinator did.
type WhereClause struct {
	Column string `json:"column"`
	Path   string `json:"path,omitempty"`
	Op     string `json:"op"`
	Value  any    `json:"value,omitempty"`
	Values []any  `json:"values,omitempty"`
}

// UnmarshalJSON reads the clause as encoding/json does, except that a
// number float64 would round keeps its text (a json.Number, as the NDJSON
// ingest keeps it): a where clause on a decimal(38,s) column compares the
// exact value. Other numbers are float64, as before.
func (w *WhereClause) UnmarshalJSON(data []byte) error {
	type plain WhereClause
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	p.Value = exactNumber(p.Value)
	for i := range p.Values {
		p.Values[i] = exactNumber(p.Values[i])
	}
	*w = WhereClause(p)
	return nil
}

// exactNumber is v with a json.Number made float64 when float64 holds it.
func exactNumber(v any) any {
	n, ok := v.(json.Number)
	if !ok {
		return v
	}
	if f, err := strconv.ParseFloat(string(n), 64); err == nil && compute.FloatKeepsText(string(n), f) {
		return f
	}
	return n
}

// resolveWhere is the column and path w addresses: its Path when it has
// one; Column as a column when known says the table has it; otherwise the
// column and path table.SplitColumnPath reads in it, if any.
func resolveWhere(w WhereClause, known func(string) bool) (column, path string, err error) {
	if w.Path != "" || known(w.Column) {
		return w.Column, w.Path, nil
	}
	col, p, ok, err := table.SplitColumnPath(w.Column)
	if err != nil {
		return "", "", fmt.Errorf("%w: where %q: %w", errBadQuery, w.Column, err)
	}
	if !ok {
		return col, "", nil
	}
	return col, p.String(), nil
}

// resolveColumn is the column and path the answer's column name reads:
// Paths' entry for it when there is one; name as a column when known says
// the table has it (a column's own name wins over a path); otherwise the
// column and path table.SplitColumnPath reads in it, if any (a quoted
// name, `"a.b"`, is the column a.b with no path).
func (r QueryRequest) resolveColumn(name string, known func(string) bool) (column, path string, err error) {
	if cp, ok := r.Paths[name]; ok {
		if cp.Path == "" && cp.Column != name {
			return "", "", fmt.Errorf("%w: paths: %q names column %q without a path (an answer's column is named by its column or its path)", errBadQuery, name, cp.Column)
		}
		return cp.Column, cp.Path, nil
	}
	if known(name) {
		return name, "", nil
	}
	col, p, ok, err := table.SplitColumnPath(name)
	if err != nil {
		return "", "", fmt.Errorf("%w: column %q: %w", errBadQuery, name, err)
	}
	if !ok {
		return col, "", nil
	}
	return col, p.String(), nil
}

// withColumns is r with every column resolved as q (r's tableQuery)
// resolved it, in Paths: a member whose store lacks a column or has one
// named as a path reads each column as the coordinator did.
func (r QueryRequest) withColumns(q table.Query) QueryRequest {
	if len(q.Columns) == 0 {
		return r
	}
	r.Columns = q.Columns
	r.Paths = make(map[string]table.ColumnPath, len(q.Columns))
	for _, name := range q.Columns {
		if cp, ok := q.Paths[name]; ok {
			r.Paths[name] = cp
		} else {
			r.Paths[name] = table.ColumnPath{Column: name}
		}
	}
	return r
}

// withWhere is r with its where clauses as q (r's tableQuery) resolved
// them: a column and its path apart, and a column with no path quoted when
// its name would read as one (a node whose store lacks the column
// "address.city" reads `"address.city"` as that column, not as a path
// into its address column).
func (r QueryRequest) withWhere(q table.Query) QueryRequest {
	where := make([]WhereClause, len(r.Where))
	for i, w := range r.Where {
		w.Column, w.Path = q.Where[i].Column, q.Where[i].Path
		if w.Path == "" {
			w.Column = table.QuoteColumn(w.Column)
		}
		where[i] = w
	}
	r.Where = where
	return r
}

// errBadQuery is wrapped by every error in a query's shape (400).
var errBadQuery = errors.New("bad query")

// ParseQueryURL reads a QueryRequest from URL parameters.
func ParseQueryURL(v map[string][]string) (QueryRequest, error) {
	get := func(k string) string {
		if s := v[k]; len(s) > 0 {
			return s[0]
		}
		return ""
	}
	q := QueryRequest{From: TimeBound(get("from")), To: TimeBound(get("to")), Format: get("format"), Tier: get("tier"), Lease: get("lease")}
	for _, b := range []struct {
		name string
		to   *bool
	}{{"cluster", &q.Cluster}, {"partial", &q.Partial}} {
		if v := get(b.name); v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return q, fmt.Errorf("%w: %s %q: want true or false", errBadQuery, b.name, v)
			}
			*b.to = on
		}
	}
	for _, h := range v["hash"] {
		for _, p := range strings.Split(h, ",") {
			q.Hash = append(q.Hash, p)
		}
	}
	for _, c := range v["columns"] {
		for c != "" {
			// A comma in a quoted name of a path (`attrs."a,b"`) is the
			// name's, not a separator.
			i := indexUnquoted(c, func(i int) bool { return c[i] == ',' })
			p := c
			if i >= 0 {
				p, c = c[:i], c[i+1:]
			} else {
				c = ""
			}
			if p = strings.TrimSpace(p); p != "" {
				q.Columns = append(q.Columns, p)
			}
		}
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return q, fmt.Errorf("%w: limit %q", errBadQuery, l)
		}
		q.Limit = n
	}
	for _, w := range v["where"] {
		c, err := parseWhere(w)
		if err != nil {
			return q, err
		}
		q.Where = append(q.Where, c)
	}
	return q, nil
}

// parseWhere reads "col OP value". Values are strings: the table converts
// them to the column's type.
func parseWhere(s string) (WhereClause, error) {
	w, ok := splitWhere(s)
	if !ok || w.Column == "" {
		return WhereClause{}, fmt.Errorf("%w: where %q: want column, operator (= != < <= > >= IN, IS NULL, IS NOT NULL) and value", errBadQuery, s)
	}
	return w, nil
}

func splitWhere(s string) (WhereClause, bool) {
	// ASCII-only upper case keeps byte offsets valid in s (ToUpper may
	// change the length of invalid or non-ASCII text).
	up := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, s)
	if len(up) != len(s) {
		up = s // invalid UTF-8: Map rewrote it; match the operators case-sensitively
	}
	trimmed := strings.TrimSpace(up)
	for _, op := range []string{"IS NOT NULL", "IS NULL"} {
		if strings.HasSuffix(trimmed, " "+op) {
			i := strings.LastIndex(up, " "+op)
			return WhereClause{Column: strings.TrimSpace(s[:i]), Op: op}, true
		}
	}
	if i := indexUnquoted(up, func(i int) bool { return strings.HasPrefix(up[i:], " IN ") }); i > 0 {
		var vals []any
		list := strings.Trim(strings.TrimSpace(s[i+4:]), "()")
		for _, p := range strings.Split(list, ",") {
			vals = append(vals, strings.TrimSpace(p))
		}
		return WhereClause{Column: strings.TrimSpace(s[:i]), Op: "IN", Values: vals}, true
	}
	// The first operator character splits column from value, so values
	// may contain operators ("note = a=b"); a quoted name in the column's
	// path may too (`attrs."a=b" = 1`).
	i := indexUnquoted(s, func(i int) bool { return strings.IndexByte("!<>=", s[i]) >= 0 })
	if i <= 0 {
		return WhereClause{}, false
	}
	for _, op := range []string{"!=", "<>", "<=", ">=", "==", "=", "<", ">"} {
		if strings.HasPrefix(s[i:], op) {
			return WhereClause{Column: strings.TrimSpace(s[:i]), Op: op, Value: strings.TrimSpace(s[i+len(op):])}, true
		}
	}
	return WhereClause{}, false
}

// indexUnquoted is the first index of s at which at holds, outside the
// quoted names of a column's path: a JSON string at the start or right
// after a . or [ (`"a.b".c`, `attrs["x=y"]`). Any other quote is text.
func indexUnquoted(s string, at func(i int) bool) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '"' && (i == 0 || s[i-1] == '.' || s[i-1] == '[') {
			if end := quotedEnd(s, i); end > 0 {
				i = end - 1
				continue
			}
		}
		if at(i) {
			return i
		}
	}
	return -1
}

// quotedEnd is the end (past its closing quote) of the JSON string at i
// of s, or -1 when it is not closed.
func quotedEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// parseTime reads RFC 3339 or unix seconds; "" is unbounded.
func parseTime(b TimeBound) (time.Time, error) {
	s := string(b)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%w: time %q: want RFC 3339 or unix seconds", errBadQuery, s)
}

// tableQuery converts the request to a table.Query, checking every column
// name against the store's schema and the whole schema's columns
// knowColumns found. A cluster member's share (tier hot) is not checked:
// its coordinator checked the names against the cluster, and the member
// answers those its store lacks as null.
func (r QueryRequest) tableQuery(t *table.Table) (table.Query, error) {
	var q table.Query
	var err error
	if q.From, err = parseTime(r.From); err != nil {
		return q, err
	}
	if q.To, err = parseTime(r.To); err != nil {
		return q, err
	}
	known := map[string]bool{}
	for _, c := range t.Schema() {
		known[c.Name] = true
	}
	var unknown []string
	check := func(c string) {
		if !known[c] && !r.known[c] && r.Tier != "hot" {
			unknown = append(unknown, strconv.Quote(c))
		}
	}
	isKnown := func(c string) bool { return known[c] || r.known[c] }
	for name := range r.Paths {
		if !slices.Contains(r.Columns, name) {
			return q, fmt.Errorf("%w: paths: %q is not one of the columns", errBadQuery, name)
		}
	}
	for _, name := range r.Columns {
		col, path, err := r.resolveColumn(name, isKnown)
		if err != nil {
			return q, err
		}
		check(col)
		if path == "" {
			q.Columns = append(q.Columns, col)
			continue
		}
		if q.Paths == nil {
			q.Paths = map[string]table.ColumnPath{}
		}
		q.Columns = append(q.Columns, name)
		q.Paths[name] = table.ColumnPath{Column: col, Path: path}
	}
	q.HashIn = r.Hash
	q.Limit = r.Limit
	for _, w := range r.Where {
		col, path, err := resolveWhere(w, isKnown)
		if err != nil {
			return q, err
		}
		check(col)
		op, err := table.ParseOp(w.Op)
		if err != nil {
			return q, fmt.Errorf("%w: %w", errBadQuery, err)
		}
		q.Where = append(q.Where, table.Predicate{Column: col, Path: path, Op: op, Value: w.Value, Values: w.Values})
	}
	if len(unknown) > 0 {
		return q, fmt.Errorf("%w: unknown column %s", errBadQuery, strings.Join(unknown, ", "))
	}
	return q, nil
}

func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("table")
	if _, ok := s.tables[name]; !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown table %q", name))
		return
	}
	// A cluster query's coordinator sends its node id: the request that
	// reaches the coordinator itself through the member list gets nothing
	// (the coordinator answers for itself), and another node reports an
	// error after its header in a trailer rather than as a row.
	coordinator := r.Header.Get(cluster.HeaderCoordinator)
	if coordinator == s.nodeID {
		// The coordinator's request body ends only after its own part
		// (clusterQuery): answer without waiting for it, and close the
		// connection rather than read the body to its end to reuse it.
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	peer := coordinator != ""
	var req QueryRequest
	var err error
	var rest io.Reader // a member's request body after the query
	if r.Method == http.MethodPost {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err = dec.Decode(&req); err != nil {
			err = fmt.Errorf("%w: body: %v", errBadQuery, err)
		}
		rest = io.MultiReader(dec.Buffered(), r.Body)
	} else {
		req, err = ParseQueryURL(r.URL.Query())
	}
	if err == nil && req.Tier != "" && req.Tier != "all" && req.Tier != "hot" && (req.Tier != leases.TierCluster || req.Lease == "") {
		err = fmt.Errorf("%w: tier %q: want all or hot (or %s with a lease)", errBadQuery, req.Tier, leases.TierCluster)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	format := req.Format
	if format == "" && strings.Contains(r.Header.Get("Accept"), "text/csv") {
		format = "csv"
	}
	if err := checkFormat(format); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Limits.QueryTimeout)
	defer cancel()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(deadline(s.cfg.Limits.QueryTimeout))
	if req.Cluster {
		s.clusterQuery(ctx, w, name, req, format)
		return
	}
	if req.Lease != "" && req.Tier == leases.TierCluster {
		s.mergedLeaseRead(ctx, w, name, req, format)
		return
	}
	if req.Lease != "" {
		s.queryUnderLease(ctx, w, name, req, format)
		return
	}
	if peer && rest != nil {
		s.memberQuery(ctx, w, rc, name, req, format, rest)
		return
	}
	// An error after the header goes in a trailer for a coordinator, and
	// for a format that has no error row (Arrow).
	_, encoded := rowformat.Lookup(format)
	trailer := peer || encoded
	start := func() {
		setContentType(w, format)
		if trailer {
			w.Header().Set("Trailer", cluster.TrailerError)
		}
		w.WriteHeader(http.StatusOK)
	}
	n, err := s.query(ctx, name, req, w, format, start, false, nil)
	if err != nil && n < 0 {
		writeError(w, queryErrorCode(err), err.Error())
		return
	}
	if err != nil {
		s.log.Warn("query failed mid-stream", "table", name, "rows", n, "error", err)
		if trailer {
			w.Header().Set(cluster.TrailerError, err.Error())
			return
		}
		endWithError(w, format, err)
	}
}

// memberQuery is a cluster query's member's answer (docs/cluster.md,
// "What is exact"): hold the cold tier (no commit of this node until the
// coordinator has read the Iceberg table), report the source offsets this
// node's rows hold, and only then send the header, which tells the
// coordinator it may read; read this node's share from the request body,
// answer with its rows, and hold until they are out and the coordinator
// has read its own part (the body's mark, or its end). Then wait for the
// coordinator's turn to read this answer (the body's end) without the
// hold. An error after the header goes in a trailer. A coordinator that
// makes no progress for the reader timeout (reads no row, sends no
// heartbeat; from its turn, takes no write) ends the answer and the hold
// (cluster.WatchStall, cluster.ReadMemberBody).
func (s *Server) memberQuery(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, name string,
	req QueryRequest, format string, rest io.Reader) {
	ts := s.tables[name]
	hold, err := s.holdTier(ctx, ts)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "cluster query: "+err.Error())
		return
	}
	release := sync.OnceFunc(hold)
	defer release()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := cluster.WatchStall(s.readerTimeout(), rc, cancel, "the coordinator")
	defer watch.Stop()
	fail := func(err error) {
		if cause := context.Cause(ctx); cause != nil && errors.Is(cause, cluster.ErrReaderStalled) {
			err = cause
		}
		s.log.Warn("cluster query: member answer failed", "table", name, "error", err)
		w.Header().Set(cluster.TrailerError, err.Error())
	}
	var held cluster.Offsets
	if req.Offsets {
		q, err := req.tableQuery(ts.table)
		if err == nil {
			held, err = s.heldOffsets(ctx, ts, q)
		}
		if err != nil {
			writeError(w, queryErrorCode(err), "cluster query: "+err.Error())
			return
		}
		w.Header().Set(cluster.HeaderOffsets, held.String())
	}
	_ = rc.EnableFullDuplex() // read the request body's end after the answer started
	_ = rc.SetReadDeadline(deadline(s.cfg.Limits.QueryTimeout))
	setContentType(w, format)
	w.Header().Set("Trailer", cluster.TrailerError)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	turn := cluster.NewReaderTurn(rc, s.readerTimeout())
	body := cluster.ReadMemberBody(rest, req.Offsets, watch, turn)
	var keep cluster.Offsets
	if req.Offsets {
		if hook := beforeShareWait.Load(); hook != nil {
			(*hook)(body.Ended)
		}
		got := false
		select {
		case keep = <-body.Keep:
			got = true
		case <-body.Ended:
			// The share and the body's end may both be in by now (a
			// coordinator whose own part was quick): select picks either,
			// so the end counts only when no share came before it.
			select {
			case keep = <-body.Keep:
				got = true
			default:
			}
		case <-ctx.Done():
			fail(context.Cause(ctx))
			return
		}
		if !got {
			err := body.Err
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			fail(fmt.Errorf("the coordinator ended the query before this node's share: %w", err))
			return
		}
		if keep == nil {
			fail(fmt.Errorf("the coordinator sent a bad share: %w", body.Err))
			return
		}
	}
	answer := cluster.ProgressWriter{W: w, Watch: watch, Turn: turn}
	if req.Keyed {
		if err := writeKeyStates(ctx, ts, req, answer); err != nil {
			fail(err)
			return
		}
	}
	n, err := s.query(ctx, name, req, answer, format, nil, true, keep)
	if err != nil {
		s.log.Warn("query failed mid-stream", "table", name, "rows", n, "error", err)
		fail(err)
		return
	}
	select {
	case <-body.OwnPartRead:
	case <-ctx.Done():
		fail(context.Cause(ctx))
		return
	}
	release()
	// The answer's end (its last chunk and trailer) goes out when this
	// handler returns, and the request body must be read to its end
	// before: wait for the coordinator's turn.
	select {
	case <-body.Ended:
	case <-ctx.Done():
		fail(context.Cause(ctx))
	}
}

// checkFormat accepts ndjson (""), csv and the formats this binary links
// (internal/rowformat: arrow in sluice-full).
func checkFormat(format string) error {
	switch format {
	case "", "ndjson", "csv":
		return nil
	}
	if _, ok := rowformat.Lookup(format); ok {
		return nil
	}
	if format == "arrow" {
		return fmt.Errorf("format arrow: %w", rowformat.ErrNotLinked)
	}
	return fmt.Errorf("format %q: want ndjson, csv or arrow", format)
}

func setContentType(w http.ResponseWriter, format string) {
	if f, ok := rowformat.Lookup(format); ok {
		w.Header().Set("Content-Type", f.ContentType)
		return
	}
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
}

// queryErrorCode is the status of a query that failed before its first row.
func queryErrorCode(err error) int {
	if errors.Is(err, errBadQuery) || errors.Is(err, table.ErrUnknownColumn) || errors.Is(err, table.ErrBadQuery) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// endWithError ends a query stream whose header is out: the error can only
// end the stream, as a last NDJSON line a client can recognise (CSV has no
// such line; the stream just ends).
func endWithError(w io.Writer, format string, err error) {
	if format != "csv" {
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		w.Write(append(b, '\n'))
	}
}

// Query runs req on table and streams the rows to w as NDJSON (format ""
// or "ndjson") or CSV with a header. start is called once, before the first
// byte is written (an HTTP handler writes its header there). It returns the
// rows written, or -1 with an error when nothing was written.
func (s *Server) Query(ctx context.Context, tableName string, req QueryRequest, w io.Writer, format string, start func()) (int, error) {
	return s.query(ctx, tableName, req, w, format, start, false, nil)
}

// query is Query; held says the caller holds the table's cold tier
// (holdTier), so the rows are read without taking its lock again. A
// non-nil keep leaves out the stream rows of other source offsets (a
// cluster query's share of this node, overlap.go).
func (s *Server) query(ctx context.Context, tableName string, req QueryRequest, w io.Writer, format string, start func(), held bool, keep cluster.Offsets) (int, error) {
	ts, ok := s.tables[tableName]
	if !ok {
		return -1, fmt.Errorf("%w %q", ErrUnknownTable, tableName)
	}
	req, err := knowColumns(ctx, ts, req)
	if err != nil {
		return -1, err
	}
	q, err := req.tableQuery(ts.table)
	if err != nil {
		return -1, err
	}
	tcols, absent, err := splitAbsent(ctx, ts, q)
	if err != nil {
		return -1, err
	}
	cols := make([]string, len(tcols))
	for i, c := range tcols {
		cols[i] = c.Name
	}
	started := false
	begin := func() {
		if !started {
			started = true
			if start != nil {
				start()
			}
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	n := 0
	// Rows come as values in projection order (QueryValues), so neither
	// encoder fills or reads a map per row.
	var emit func([]table.Column, []any) error
	var cw *csv.Writer
	var enc rowformat.Encoder
	if f, ok := rowformat.Lookup(format); ok {
		if enc, err = f.NewEncoder(bw, tcols); err != nil {
			return -1, err
		}
		defer enc.Close()
		emit = func(_ []table.Column, vals []any) error {
			begin()
			n++
			return enc.Row(vals)
		}
	} else if format == "csv" {
		cw = csv.NewWriter(bw)
		rec := make([]string, len(cols))
		emit = func(_ []table.Column, vals []any) error {
			if !started {
				begin()
				if err := cw.Write(cols); err != nil {
					return err
				}
			}
			for i, v := range vals {
				rec[i] = csvField(v)
			}
			n++
			return cw.Write(rec)
		}
	} else {
		var buf []byte
		enc := newRowEncoder(cols)
		if ts.cold == nil && (absent == nil || !absent.None) {
			// The hot store alone: rows are encoded on the scan's workers and
			// the chunks written here in order (table.QueryEncoded), so a
			// big answer's encoding uses the cores as its decoding does.
			sq := q
			if absent != nil {
				sq = absent.Query
			}
			err = ts.table.QueryEncoded(ctx, sq, func(buf []byte, vals []any) ([]byte, error) {
				if absent != nil {
					vals = absent.Row(nil, vals) // the workers' own slice
				}
				buf, err := enc.appendValues(buf, vals)
				return append(buf, '\n'), err
			}, func(chunk []byte, rows int) error {
				begin()
				n += rows
				_, err := bw.Write(chunk)
				return err
			})
			if err != nil && !started {
				return -1, err
			}
			begin()
			if ferr := bw.Flush(); err == nil {
				err = ferr
			}
			return n, err
		}
		emit = func(_ []table.Column, vals []any) error {
			begin()
			var err error
			buf, err = enc.appendValues(buf[:0], vals)
			if err != nil {
				return err
			}
			buf = append(buf, '\n')
			n++
			_, err = bw.Write(buf)
			return err
		}
	}
	err = s.absentValues(ctx, ts, q, absent, req.Tier == "hot", held, keep, emit)
	if err != nil && !started {
		return -1, err
	}
	begin()
	if enc != nil {
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
	}
	if cw != nil {
		if n == 0 {
			cw.Write(cols)
		}
		cw.Flush()
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return n, err
}

// absentValues is tierValues of a query whose absent columns (nil: none)
// are answered as null.
func (s *Server) absentValues(ctx context.Context, ts *tableState, q table.Query, absent *table.Absent, hotOnly, held bool, keep cluster.Offsets, emit func([]table.Column, []any) error) error {
	if absent == nil {
		return s.tierValues(ctx, ts, q, hotOnly, held, keep, emit)
	}
	if absent.None {
		return nil
	}
	var row []any
	return s.tierValues(ctx, ts, absent.Query, hotOnly, held, keep, func(_ []table.Column, vals []any) error {
		row = absent.Row(row, vals)
		return emit(absent.Out, row)
	})
}

// tierValues answers q from ts: hotOnly leaves out the rows the Iceberg
// table holds (tier=hot: the hot store's rows it lacks); held says the
// caller holds the cold tier (holdTier); a non-nil keep (only with held)
// leaves out the stream rows of the source offsets it lacks.
func (s *Server) tierValues(ctx context.Context, ts *tableState, q table.Query, hotOnly, held bool, keep cluster.Offsets, emit func([]table.Column, []any) error) error {
	if keep != nil && held && ts.cold != nil {
		return keepValues(ctx, ts, q, keep, emit, func(ctx context.Context, q table.Query, emit func([]table.Column, []any) error) error {
			return ts.cold.QueryValuesHeld(ctx, q, readsCold(ts), hotOnly, emit)
		})
	}
	switch {
	case ts.cold == nil:
		return ts.table.QueryValues(ctx, q, emit)
	case held:
		return ts.cold.QueryValuesHeld(ctx, q, readsCold(ts), hotOnly, emit)
	case !hotOnly:
		return ts.cold.QueryValues(ctx, q, readsCold(ts), emit)
	}
	release, err := ts.cold.Hold(ctx)
	if err != nil {
		return err
	}
	defer release()
	return ts.cold.QueryValuesHeld(ctx, q, readsCold(ts), true, emit)
}

// readsCold says whether a query of ts reads the Iceberg table beside its
// store. It can, each row once, in the two modes the config allows: with
// remove the store holds only rows no run committed; in continuous mode the
// store keeps committed rows for its retention, and the table's
// committed-sequence mark tells them from the others (the hot side leaves
// out the blocks below it). Without either, the query would miss every row
// the store no longer has: another node's, a node's that left, or its own
// past the table's ttl.
func readsCold(ts *tableState) bool {
	ic := ts.cfg.Compact.Iceberg
	return ic != nil && (ts.cfg.Compact.Remove || ic.Continuous)
}

// holdTier holds ts's cold tier (coldapi.Tier.Hold); a table without one
// has nothing to hold.
func (s *Server) holdTier(ctx context.Context, ts *tableState) (release func(), err error) {
	if ts.cold == nil {
		return func() {}, nil
	}
	return ts.cold.Hold(ctx)
}

func csvField(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case json.RawMessage:
		return string(x)
	case json.Number: // a path column's number, as the JSON text has it
		return string(x)
	case []byte:
		// A bytes column: base64, as in NDJSON (CSV has no bytes either).
		return base64.StdEncoding.EncodeToString(x)
	}
	// A date, time of day, uuid or decimal: its text (fmt.Stringer).
	return fmt.Sprint(v)
}
