package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/stream"
	"github.com/sluicedb/sluice/table"
)

// Replay takes a table's dead letters back into the table after a fix
// (a computed column corrected, a schema widened): POST
// /v1/tables/{table}/replay, `sluice replay`. Each dead letter is taken
// once, whoever asks and however often:
//
//   - a dead letter has a stable id (ingest.DeadLetterID), and the
//     dead-letter table holds, beside the dead letters, a replay record per
//     dead letter replayed: a row whose replay_of is that id;
//   - a replay reads the dead-letter table (with compact.iceberg, the
//     Iceberg table and the store's uncommitted rows: every node's dead
//     letters, and what survives a lost store), leaves out the ids that
//     have a record, and stores each dead letter's rows in the main table
//     in the same synced store batch as its record: both or neither, so a
//     replay interrupted anywhere and run again takes only what has no
//     record yet;
//   - a dead letter that fails again becomes a new dead letter (its new
//     reason, a new id) in that same batch, beside the record of the old.
//
// The records reach the Iceberg table as the dead letters do (the same
// cold tier), so the rows and the records of a replay are committed by the
// same store's runs, each once.
//
// Across nodes: with compact.iceberg two nodes may replay one dead letter
// at once (each reads it from the shared Iceberg table before either has
// a record). Each replayed row, record and new dead letter then carries
// source columns as a stream's rows do (table.SourceBatchColumn,
// SourceOffsetColumn): the source replay/<table>, at an offset drawn from
// the dead letter's id (replayOffset). The cold tier's runs commit each
// offset of a source once across stores, whichever commits first (the
// claims of docs/cold-tier.md, "Each row once across nodes"), so the
// Iceberg tables get the dead letter's rows and its record once.

// ReplayOptions select the dead letters a replay takes.
type ReplayOptions struct {
	// Since and Until bound the dead letters' time: Since <= time < Until
	// (zero: unbounded).
	Since, Until time.Time
	// Reason, when set, takes only the dead letters whose error or loader
	// contains it.
	Reason string
	// Letters bounds the dead letters stored in one synced batch (0:
	// defaultReplayLetters).
	Letters int
	// Progress, when set, is called after each batch is durable with the
	// totals so far; an error it returns ends the replay with that error
	// (what is durable stays: a replay run again goes on from there).
	Progress func(ReplayResult) error
}

// replayHook, when set (tests), runs after a replay has read the dead
// letters and before it stores anything: two replays are made to read the
// same dead letters there.
var replayHook func(table string)

// replaySource is the source (table.SourceBatchColumn) of the rows a
// replay of tableName stores in a table with a cold tier.
func replaySource(tableName string) string { return "replay/" + tableName }

// replayOffset is the offset in replaySource of the rows of dead letter
// id: the first 62 bits of the id (a hash), the same on every node.
func replayOffset(id string) int64 {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) < 8 {
		sum := sha256.Sum256([]byte(id))
		b = sum[:]
	}
	return int64(binary.BigEndian.Uint64(b) >> 2)
}

// tagReplayed gives row the source columns of dead letter id's replay.
func tagReplayed(row map[string]any, tableName, id string) {
	off := replayOffset(id)
	row[table.SourceBatchColumn] = fmt.Sprintf("%s@%d-%d", replaySource(tableName), off, off+1)
	row[table.SourceOffsetColumn] = off
}

// defaultReplayLetters is how many dead letters one synced batch of a
// replay stores: a batch costs a sync, a dead letter that fails again
// costs its batch a retry.
const defaultReplayLetters = 256

// ReplayResult is what a replay did.
type ReplayResult struct {
	Table string `json:"table"`
	// Replayed are the dead letters stored in the table now; Rows their
	// rows (filters and drop policies may keep fewer than were decoded).
	Replayed int `json:"replayed"`
	Rows     int `json:"rows"`
	// Failed are the dead letters that failed again: each is a new dead
	// letter with its new reason.
	Failed int `json:"failed"`
	// Done are the dead letters the filter took that an earlier replay
	// had replayed already; Kept those it leaves as they are because a
	// replay cannot take them (a bad line of a message whose good lines
	// were stored, a body kept truncated, a change stream's event).
	Done int `json:"done"`
	Kept int `json:"kept"`
}

// ErrNoDeadLetters: the table has no dead-letter table (no source, no
// deadletter policy).
var ErrNoDeadLetters = errors.New("the table has no dead-letter table")

// deadLetter is one row of a dead-letter table as replay reads it.
type deadLetter struct {
	id, origin, format, loader, column, errText, body string
	// metadata is a message's stream.MetadataColumn.
	metadata string
	line     int64
	at       time.Time
}

// replayColumns are the dead-letter columns replay reads, in the order
// readDeadLetters expects.
var replayColumns = []string{"time", "id", "origin", "format", "loader", "column", "error", "row", "line", "replay_of", stream.MetadataColumn}

// Replay replays the dead letters of tableName that o selects.
func (s *Server) Replay(ctx context.Context, tableName string, o ReplayOptions) (ReplayResult, error) {
	res := ReplayResult{Table: tableName}
	ts, ok := s.tables[tableName]
	if !ok {
		return res, fmt.Errorf("%w %q", ErrUnknownTable, tableName)
	}
	if ts.degraded != "" {
		return res, ts.degradedError()
	}
	if ts.deadLetter == nil {
		return res, fmt.Errorf("table %q: %w", tableName, ErrNoDeadLetters)
	}
	// One replay of a table at a time on a node: two could both read a
	// dead letter as not yet replayed.
	ts.deadLetter.replayMu.Lock()
	defer ts.deadLetter.replayMu.Unlock()
	letters, done, err := s.readDeadLetters(ctx, ts.deadLetter)
	if err != nil {
		return res, fmt.Errorf("table %q: reading its dead letters: %w", tableName, err)
	}
	if replayHook != nil {
		replayHook(tableName)
	}
	var todo []deadLetter
	for _, d := range letters {
		switch {
		case !o.Since.IsZero() && d.at.Before(o.Since), !o.Until.IsZero() && !d.at.Before(o.Until):
		case o.Reason != "" && !strings.Contains(d.errText, o.Reason) && !strings.Contains(d.loader, o.Reason):
		case done[d.id]:
			res.Done++
		case d.loader == "bad_line" || d.body == "" || strings.Contains(d.format, stream.FormatTruncated),
			strings.HasPrefix(d.format, stream.FormatChanges): // a change event replayed as a row would lose its operation
			res.Kept++
		default:
			todo = append(todo, d)
		}
	}
	n := o.Letters
	if n <= 0 {
		n = defaultReplayLetters
	}
	for len(todo) > 0 {
		part := todo[:min(n, len(todo))]
		todo = todo[len(part):]
		if err := s.replayPart(ctx, ts, part, &res); err != nil {
			return res, fmt.Errorf("table %q: replay: %w", tableName, err)
		}
		if o.Progress != nil {
			if err := o.Progress(res); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// readDeadLetters reads dead-letter table dts: its dead letters, each id
// once, in time order, and the ids a replay record names.
func (s *Server) readDeadLetters(ctx context.Context, dts *tableState) ([]deadLetter, map[string]bool, error) {
	byID := map[string]deadLetter{}
	done := map[string]bool{}
	q := table.Query{Columns: replayColumns}
	emit := func(_ []table.Column, v []any) error {
		if of := str(v[9]); of != "" {
			done[of] = true
			return nil
		}
		d := deadLetter{origin: str(v[2]), format: str(v[3]), loader: str(v[4]), column: str(v[5]),
			errText: str(v[6]), body: str(v[7]), metadata: str(v[10])}
		d.at, _ = v[0].(time.Time)
		d.line, _ = v[8].(int64)
		if d.id = str(v[1]); d.id == "" {
			// A dead letter stored before dead letters had ids: named by
			// what it holds.
			d.id = ingest.DeadLetterID("unnamed", d.at.UTC().Format(time.RFC3339Nano), d.origin, d.errText, d.body)
		}
		if _, dup := byID[d.id]; !dup {
			byID[d.id] = d
		}
		return nil
	}
	var err error
	if dts.cold != nil {
		// The Iceberg table (every node's dead letters and records, and
		// what outlived a store) and the store's rows it lacks yet; a row
		// in both is one id.
		err = dts.cold.QueryValues(ctx, q, true, emit)
	} else {
		err = dts.table.QueryValues(ctx, q, emit)
	}
	if err != nil {
		return nil, nil, err
	}
	out := make([]deadLetter, 0, len(byID))
	for _, d := range byID {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].at.Equal(out[j].at) {
			return out[i].at.Before(out[j].at)
		}
		return out[i].id < out[j].id
	})
	return out, done, nil
}

// str is a string cell's value ("" for null).
func str(v any) string {
	s, _ := v.(string)
	return s
}

// replayed is one dead letter on its way back: its rows once computed, or
// why it fails again.
type replayed struct {
	d       deadLetter
	rows    []ingest.Row
	dead    []compute.DeadLetter // rows a deadletter policy routed away again
	failure string
}

// replayPart stores the dead letters of part in one synced batch: the
// rows of each that decodes and computes, a new dead letter for each that
// fails, and a record of each.
func (s *Server) replayPart(ctx context.Context, ts *tableState, part []deadLetter, res *ReplayResult) error {
	unstored := unstoredMetadata(ts)
	rs := make([]*replayed, len(part))
	for i, d := range part {
		r := &replayed{d: d}
		rs[i] = r
		rows, err := decodeDeadLetter(ctx, ts, d)
		if errors.Is(err, schemaformat.ErrUnavailable) {
			// Not the dead letter's fault: the replay stops, storing
			// nothing of this batch, and a rerun goes on from here.
			return err
		}
		if err == nil {
			err = addMetadata(ts, d, rows)
		}
		if err == nil && ts.proc != nil && len(rows) > 0 {
			var b compute.Batch
			b, err = ts.proc.Process(ctx, rows)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err == nil {
				rows, r.dead = b.Rows, b.DeadLetters
			}
		}
		if err != nil {
			r.failure = err.Error()
			continue
		}
		for _, row := range rows {
			for _, c := range unstored {
				delete(row, c)
			}
			if ts.cold != nil {
				tagReplayed(row, ts.cfg.Name, d.id)
			}
		}
		r.rows = rows
	}
	// A row the table refuses fails its dead letter, and the batch is
	// staged again without it: each round fails one dead letter more.
	for range 1 + len(rs) {
		var rows []ingest.Row
		var owner []*replayed
		for _, r := range rs {
			if r.failure == "" {
				for _, row := range r.rows {
					rows = append(rows, row)
					owner = append(owner, r)
				}
			}
		}
		batch, err := s.store.NewBatch()
		if err != nil {
			return err
		}
		err = batch.Append(ts.table, rows)
		if failed := refusedBy(err, rows, owner); failed != nil {
			batch.Close()
			for _, f := range failed {
				f.failure = err.Error()
			}
			continue
		}
		if err != nil {
			batch.Close()
			return err
		}
		now := s.now()
		records, recordOf := replayRecords(rs, now)
		if ts.cold != nil {
			for i, r := range records {
				tagReplayed(r, ts.cfg.Name, recordOf[i])
			}
		}
		if err := batch.Append(ts.deadLetter.table, records); err != nil {
			batch.Close()
			return fmt.Errorf("dead-letter records: %w", err)
		}
		err = batch.Commit(ctx)
		batch.Close()
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.failure != "" || len(r.dead) > 0 {
				res.Failed++
			} else {
				res.Replayed++
			}
			res.Rows += len(r.rows)
		}
		return nil
	}
	return errors.New("every dead letter of the batch failed again and the batch still fails")
}

// unstoredMetadata are the message metadata columns (_key, _topic, ...)
// of ts's sources that its static schema lacks: a row dead letter holds
// them, as the scripts saw them, and the table does not store them (the
// stream writer drops them after the scripts ran).
func unstoredMetadata(ts *tableState) []string {
	if len(ts.schema) == 0 {
		return nil
	}
	var out []string
	for _, sc := range ts.cfg.Sources {
		var names []string
		switch {
		case sc.Kafka != nil:
			names = sc.Kafka.Metadata
		case sc.NATS != nil:
			names = sc.NATS.Metadata
		}
		for _, n := range names {
			if _, listed := ts.schema["_"+n]; !listed {
				out = append(out, "_"+n)
			}
		}
	}
	return out
}

// addMetadata gives the rows of a message's dead letter d the metadata
// columns its source's config names now (_key, _headers, ...), from the
// message metadata the dead letter kept, typed as the source gives them:
// what the rows of the message would have had, had it not failed.
func addMetadata(ts *tableState, d deadLetter, rows []ingest.Row) error {
	if d.metadata == "" {
		return nil
	}
	var names []string
	for _, sc := range ts.cfg.Sources {
		if sc.Kafka != nil && strings.HasPrefix(d.origin, "kafka ") {
			names = sc.Kafka.Metadata
			break
		}
		if sc.NATS != nil && strings.HasPrefix(d.origin, "nats ") {
			names = sc.NATS.Metadata
			break
		}
	}
	if len(names) == 0 {
		return nil
	}
	var kept map[string]json.RawMessage
	if err := json.Unmarshal([]byte(d.metadata), &kept); err != nil {
		return fmt.Errorf("dead letter %s: its message metadata: %w", d.id, err)
	}
	for _, n := range names {
		col := "_" + n
		raw, ok := kept[col]
		if !ok {
			continue
		}
		v, err := metadataValue(col, raw)
		if err != nil {
			return fmt.Errorf("dead letter %s: its message's %s: %w", d.id, col, err)
		}
		for _, r := range rows {
			r[col] = v
		}
	}
	return nil
}

// metadataValue is a kept metadata value as its source gives it: an
// integer for _partition, _offset and _sequence, a time for _timestamp, a
// JSON object for _headers, a string for the rest.
func metadataValue(col string, raw json.RawMessage) (any, error) {
	switch col {
	case "_partition", "_offset", "_sequence":
		var n int64
		err := json.Unmarshal(raw, &n)
		return n, err
	case "_timestamp":
		var t time.Time
		err := json.Unmarshal(raw, &t)
		return t, err
	case "_headers":
		return raw, nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// refusedBy is the dead letters whose rows the table's error err is about
// (a value that does not fit the schema, rows past the column limit); nil
// when err is not about rows.
func refusedBy(err error, rows []ingest.Row, owner []*replayed) []*replayed {
	if err == nil {
		return nil
	}
	var se *table.SchemaError
	if errors.As(err, &se) && se.Row >= 0 && se.Row < len(rows) {
		return []*replayed{owner[se.Row]}
	}
	var lo interface{ LeftOut() []int }
	if errors.As(err, &lo) {
		var out []*replayed
		for _, k := range lo.LeftOut() {
			if k >= 0 && k < len(owner) {
				out = append(out, owner[k])
			}
		}
		return out
	}
	return nil
}

// replayRecords are the dead-letter table's rows of one replayed batch: a
// record of each dead letter (replay_of its id, error what became of it),
// and a new dead letter for each that failed again, or for each of its
// rows a deadletter policy routed away again; of[i] is the id of the dead
// letter out[i] is about.
func replayRecords(rs []*replayed, now time.Time) (out []table.Row, of []string) {
	for _, r := range rs {
		from := len(out)
		d := r.d
		outcome := fmt.Sprintf("replayed: %d rows stored", len(r.rows))
		switch {
		case r.failure != "":
			id := ingest.DeadLetterID(d.id, "replay", r.failure)
			outcome = "replayed: failed again as " + id
			row := table.Row{"time": now, "id": id, "origin": d.origin, "format": d.format, "loader": d.loader,
				"column": d.column, "filter": false, "source": "", "error": r.failure, "row": d.body}
			if d.line > 0 {
				row["line"] = d.line
			}
			out = append(out, row)
		case len(r.dead) > 0:
			letters := make([]ingest.DeadLetter, len(r.dead))
			for i, dl := range r.dead {
				letters[i] = ingest.DeadLetter{DeadLetter: dl, Line: int(d.line), Origin: "replay " + d.id}
			}
			again := ingest.DeadLetterRows(letters, now)
			outcome = fmt.Sprintf("replayed: %d rows stored, %d failed again", len(r.rows), len(again))
			out = append(out, again...)
		}
		out = append(out, table.Row{"time": now, "id": ingest.DeadLetterID(d.id, "replay record"), "replay_of": d.id,
			"origin": d.origin, "loader": "replay", "column": "", "filter": false, "source": "", "error": outcome, "row": ""})
		for range out[from:] {
			of = append(of, d.id)
		}
	}
	return out, of
}

// decodeDeadLetter decodes a dead letter's row column back into rows: a
// row as JSON (ingest.FormatRow), or a message body in its source's format
// (Go-quoted when it was not UTF-8), a Schema Registry format's with ts's
// registry. Every line must decode: a dead letter is replayed whole or
// fails again whole.
func decodeDeadLetter(ctx context.Context, ts *tableState, d deadLetter) ([]ingest.Row, error) {
	body := d.body
	base, quoted := strings.CutSuffix(d.format, stream.FormatQuoted)
	if quoted {
		var err error
		if body, err = strconv.Unquote(body); err != nil {
			return nil, fmt.Errorf("dead letter %s: its quoted body: %w", d.id, err)
		}
	}
	if slices.Contains(schemaformat.Formats, base) {
		dec, err := registryDecoder(ts, base)
		if err != nil {
			return nil, fmt.Errorf("dead letter %s: %w", d.id, err)
		}
		row, err := dec.Decode(ctx, []byte(body))
		if err != nil {
			return nil, fmt.Errorf("dead letter %s: %w", d.id, err)
		}
		return []ingest.Row{row}, nil
	}
	var format ingest.Format
	switch base {
	case ingest.FormatRow, "", "ndjson":
		format = ingest.NDJSON
	case "json":
		format = ingest.JSONArray
	case "csv":
		format = ingest.CSV
	case "parquet":
		format = ingest.Parquet
	default:
		return nil, fmt.Errorf("dead letter %s: format %q cannot be replayed", d.id, d.format)
	}
	var rows []ingest.Row
	_, err := ingest.Decode(strings.NewReader(body), ingest.DecodeOptions{Format: format, Policy: ingest.Reject, Schema: ts.schema},
		func(rs []ingest.Row, _ []int) error {
			rows = append(rows, rs...)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// handleReplay replays a table's dead letters (POST
// /v1/tables/{table}/replay[?since=RFC3339&until=RFC3339&reason=text],
// `sluice replay`).
func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request) {
	var o ReplayOptions
	q := r.URL.Query()
	for _, b := range []struct {
		name string
		at   *time.Time
	}{{"since", &o.Since}, {"until", &o.Until}} {
		if v := q.Get(b.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %q: want an RFC 3339 time such as 2026-11-29T08:00:00Z", b.name, v))
				return
			}
			*b.at = t
		}
	}
	o.Reason = q.Get("reason")
	res, err := s.Replay(r.Context(), r.PathValue("table"), o)
	if errors.Is(err, ErrTableDegraded) {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeRunResult(w, res, err, ErrNoDeadLetters)
}

// Replay asks the server to replay the dead letters of tableName that o
// selects (o.Letters and o.Progress are the server's own).
func (c *Client) Replay(ctx context.Context, tableName string, o ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	v := url.Values{}
	if !o.Since.IsZero() {
		v.Set("since", o.Since.Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		v.Set("until", o.Until.Format(time.RFC3339Nano))
	}
	if o.Reason != "" {
		v.Set("reason", o.Reason)
	}
	path := "/v1/tables/" + url.PathEscape(tableName) + "/replay"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	err := c.post(ctx, "replay "+tableName, path, &res)
	return res, err
}
