package stream

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/table"
)

// Target is the table a source writes into and what a batch goes through
// on its way: the same decode options, processor and bad-line policy as the
// table's HTTP ingest.
type Target struct {
	Store *table.Store
	Table *table.Table
	// SourceColumns adds to every row the hidden source columns
	// table.SourceBatchColumn and table.SourceOffsetColumn (where the
	// row came from), which the cold tier needs to commit each message's
	// rows once across nodes (docs/cold-tier.md). The server sets it for
	// tables with compact.iceberg.
	SourceColumns bool
	// DeadLetters receives undecodable (poison) messages and the rows a
	// deadletter policy routes away, each with its origin; nil: they are
	// logged and counted only.
	DeadLetters *table.Table
	// Compute is the table's processor (nil: no computed columns or filters).
	Compute *compute.Processor
	// Schema is the static schema's types (CSV conversion).
	Schema map[string]compute.Type
	// Policy is the table's on_bad_line: Reject makes a message with a bad
	// line a poison message as a whole; Skip drops only its bad lines.
	Policy ingest.Policy
	Log    *slog.Logger
	// MaxMessageBytes bounds a message body, as received and after gzip
	// decoding: a larger one is a dead letter, never decoded (0:
	// DefaultMaxMessageBytes). The server caps it at limits.max_body_bytes,
	// HTTP's bound on a request body after gzip decoding.
	MaxMessageBytes int64
}

// DefaultMaxMessageBytes is the bound on a message body (as received and
// gzip-decoded) when the source sets none: decoded rows take several times
// their text, and the documented consumer RSS is 256 MB.
const DefaultMaxMessageBytes = 8 << 20

// Header is one message header.
type Header struct {
	Key   string
	Value []byte
}

// Message is one message of a stream, in the terms both sources share.
type Message struct {
	Body    []byte
	Key     []byte
	Headers []Header
	// Topic is the Kafka topic or the NATS subject.
	Topic     string
	Partition int32
	// Offset is the Kafka offset or the JetStream stream sequence.
	Offset int64
	Time   time.Time
	// Source names the source partition and its incarnation, the space
	// Offset counts in: "kafka/<topic>/<partition>/<topic id>",
	// "nats/<stream>/<subject filter>/<creation time>" (the rows'
	// table.SourceBatchColumn).
	Source string

	// unpacked: Body is gzip-decoded already (or bodyErr says why it
	// cannot be); see Writer.unpack.
	unpacked bool
	bodyErr  error
	// change is the operation of a change stream's message.
	change messageChange
}

// Position is a source position to store with a batch's rows.
type Position struct {
	Name  string
	Value []byte
}

// Result is what happened to one batch of messages.
type Result struct {
	Messages, Rows, Accepted, Filtered, DeadLetters int
	// Poison counts messages routed away as a whole (undecodable under
	// on_bad_line reject, failing a reject column, not fitting the schema).
	Poison int
	// BadLines counts lines skipped under on_bad_line skip.
	BadLines int
}

// metaField is one message field added to rows.
type metaField struct {
	column string
	value  func(*Message) any
}

// Writer turns batches of messages into rows and commits them with their
// positions. Safe for concurrent use (the table and processor are).
type Writer struct {
	target Target
	format ingest.Format
	// registry, when set, decodes each message instead of format: the
	// Schema Registry formats (NewKafka sets it).
	registry messageDecoder
	// changes, when set, makes the source a change stream: each row
	// carries its operation (changes.go).
	changes *Changes
	meta    []metaField
	// fields are every metadata field the source has, configured or
	// not: a message's dead letter keeps them all (MetadataColumn).
	fields map[string]metaField
	// unstored are metadata columns a static schema lacks: scripts see
	// them, the table does not get them.
	unstored []string
	origin   func(*Message) string
	now      func() time.Time
	// mapsOnly turns the by-column path off (tests compare the two).
	mapsOnly bool
	// byColumn counts the batches stored by column (writeColumns).
	byColumn atomic.Int64
}

// messageDecoder decodes one message into one row. An error wrapping
// schemaformat.ErrUnavailable means it cannot decode anything now (its
// registry is down): the batch fails and is retried, nothing is dropped;
// any other error makes the message a dead letter.
type messageDecoder interface {
	Decode(ctx context.Context, msg []byte) (map[string]any, error)
	// Rows decodes messages into new rows of cb, by column.
	Rows(cb *colbatch.Batch) *schemaformat.Rows
	// Format is the decoder's format; JSONRows, for json_schema, gives
	// the messages' JSON bodies and their schemas' types.
	Format() string
	JSONRows() *schemaformat.JSONRows
}

// maxDeadLetterBody bounds the message text kept in a dead letter.
const maxDeadLetterBody = 64 << 10

// newWriter makes a Writer for format ("" is ndjson) adding the named
// metadata fields (validated by config).
func newWriter(t Target, format string, metadata []string, fields map[string]metaField, origin func(*Message) string) (*Writer, error) {
	w := &Writer{target: t, origin: origin, now: time.Now, fields: fields}
	switch format {
	case "", "ndjson":
		w.format = ingest.NDJSON
	case "json":
		w.format = ingest.JSONArray
	case "csv":
		w.format = ingest.CSV
	case "parquet":
		w.format = ingest.Parquet
	default:
		return nil, fmt.Errorf("stream: format %q: want ndjson, json, csv or parquet", format)
	}
	for _, m := range metadata {
		f, ok := fields[m]
		if !ok {
			return nil, fmt.Errorf("stream: metadata %q unknown", m)
		}
		w.meta = append(w.meta, f)
		if _, listed := t.Schema[f.column]; len(t.Schema) > 0 && !listed {
			w.unstored = append(w.unstored, f.column)
		}
	}
	if w.target.Log == nil {
		w.target.Log = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

// headersJSON is a message's headers as a JSON object (a repeated key keeps
// the last value).
func headersJSON(hs []Header) any {
	if len(hs) == 0 {
		return nil
	}
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[h.Key] = string(h.Value)
	}
	b, _ := json.Marshal(m)
	return json.RawMessage(b)
}

// decoded are the rows of a batch of messages.
type decoded struct {
	rows  []ingest.Row
	msgOf []int32 // msgOf[i] is the message of rows[i]
	// poison holds the messages rejected as a whole, with why.
	poison map[int]error
	// bad holds, under Skip, the first bad line of each message that had
	// some, for its dead letter.
	bad      map[int]error
	badLines int
}

// Write decodes, computes and stores msgs with positions, all in one
// synced batch. It returns an error only when nothing was stored (a store
// failure, a canceled context, a processor closed): the caller retries the
// same messages. Poison messages do not make it fail: they go to the dead
// letters and the rest is stored.
func (w *Writer) Write(ctx context.Context, msgs []Message, positions []Position) (Result, error) {
	if w.changes != nil {
		if err := w.readChanges(ctx, msgs); err != nil {
			return Result{Messages: len(msgs)}, err
		}
	}
	if w.columnar() {
		res, done, err := w.writeColumns(ctx, msgs, positions)
		if done {
			return res, err
		}
	}
	res := Result{Messages: len(msgs)}
	var d decoded
	if w.registry != nil {
		var err error
		if d, err = w.decodeRegistry(ctx, msgs); err != nil {
			return res, err
		}
	} else {
		d = w.decode(msgs)
	}
	w.addChanges(msgs, &d)
	w.addSource(msgs, &d)
	res.Rows = len(d.rows)
	res.BadLines = d.badLines
	for range 1 + len(msgs) { // each round poisons one message more, at most
		kept, deadRows, stats, retry, err := w.attempt(ctx, msgs, positions, &d)
		if err != nil {
			return res, err
		}
		if retry {
			continue
		}
		res.Accepted, res.Filtered, res.DeadLetters = stats.accepted, stats.filtered, len(deadRows)
		res.Poison = len(d.poison)
		_ = kept
		return res, nil
	}
	return res, errors.New("stream: every message of the batch is poison and it still fails")
}

// storePositions stores positions alone, in one synced batch: a source
// whose position moves without rows (a reset after a recreated topic).
func (w *Writer) storePositions(ctx context.Context, positions []Position) error {
	batch, err := w.target.Store.NewBatch()
	if err != nil {
		return err
	}
	defer batch.Close()
	for _, p := range positions {
		if err := batch.SetPosition(p.Name, p.Value); err != nil {
			return err
		}
	}
	return batch.Commit(ctx)
}

type attemptStats struct{ accepted, filtered int }

// attempt computes and stores what is not poison; retry means a message
// was found poison (added to d.poison) and nothing was stored.
func (w *Writer) attempt(ctx context.Context, msgs []Message, positions []Position, d *decoded) (kept []ingest.Row, dead []table.Row, st attemptStats, retry bool, err error) {
	in := d.rows
	msgOf := d.msgOf
	if len(d.poison) > 0 {
		in, msgOf = nil, nil
		for i, r := range d.rows {
			if _, p := d.poison[int(d.msgOf[i])]; !p {
				in = append(in, r)
				msgOf = append(msgOf, d.msgOf[i])
			}
		}
	}
	now := w.now()
	kept = in
	var dls []compute.DeadLetter
	if w.target.Compute != nil && len(in) > 0 {
		work := append([]ingest.Row(nil), in...) // Process compacts in place
		b, perr := w.target.Compute.Process(compute.WithRowSource(ctx, messageSource(msgs, msgOf)), work)
		if perr != nil {
			var ce *compute.Error
			if errors.Is(perr, compute.ErrRejected) && errors.As(perr, &ce) && ce.Row >= 0 && ce.Row < len(in) {
				d.poison[int(msgOf[ce.Row])] = perr
				return nil, nil, st, true, nil
			}
			return nil, nil, st, false, fmt.Errorf("stream: compute: %w", perr)
		}
		kept, dls = b.Rows, b.DeadLetters
		st.filtered = len(in) - len(kept) - len(dls)
	}
	// Dead letters: computed-column ones with the origin of their message,
	// then one per poison message and per message with skipped bad lines.
	if len(dls) > 0 {
		index := rowIndex(in)
		// The origin column locates a row (topic, partition and offset, or
		// stream sequence); a line within a message body is not kept.
		letters := make([]ingest.DeadLetter, len(dls))
		from := make([]int, len(dls)) // the message of each dead letter (-1: unknown)
		for i, dl := range dls {
			letters[i] = ingest.DeadLetter{DeadLetter: dl}
			from[i] = -1
			if k, ok := index[reflect.ValueOf(dl.Row).UnsafePointer()]; ok {
				from[i] = int(msgOf[k])
				letters[i].Origin = w.origin(&msgs[from[i]])
			}
		}
		for i, r := range ingest.DeadLetterRows(letters, now) {
			if from[i] >= 0 {
				w.sourceOfDead(r, msgs, from[i])
			}
			dead = append(dead, r)
		}
	}
	for _, m := range sortedKeys(d.poison) {
		dead = append(dead, w.sourceOfDead(w.messageDeadLetter(now, &msgs[m], d.poison[m], "poison"), msgs, m))
	}
	for _, m := range sortedKeys(d.bad) {
		if _, p := d.poison[m]; !p {
			dead = append(dead, w.sourceOfDead(w.messageDeadLetter(now, &msgs[m], d.bad[m], "bad_line"), msgs, m))
		}
	}
	if len(w.unstored) > 0 {
		for _, r := range kept {
			for _, c := range w.unstored {
				delete(r, c)
			}
		}
	}
	batch, err := w.target.Store.NewBatch()
	if err != nil {
		return nil, nil, st, false, err
	}
	defer batch.Close()
	if len(kept) > 0 {
		if err := batch.Append(w.target.Table, kept); err != nil {
			var se *table.SchemaError
			if errors.As(err, &se) && se.Row >= 0 && se.Row < len(kept) {
				if k, ok := rowIndex(in)[reflect.ValueOf(kept[se.Row]).UnsafePointer()]; ok {
					d.poison[int(msgOf[k])] = err
					return nil, nil, st, true, nil
				}
			}
			return nil, nil, st, false, err
		}
	}
	if len(dead) > 0 {
		if w.target.DeadLetters != nil {
			if err := batch.Append(w.target.DeadLetters, dead); err != nil {
				return nil, nil, st, false, fmt.Errorf("stream: dead letters: %w", err)
			}
		} else {
			for _, r := range dead {
				w.target.Log.Warn("dead letter dropped (the table has no dead-letter table)", "origin", r["origin"], "error", r["error"])
			}
		}
	}
	for _, p := range positions {
		if err := batch.SetPosition(p.Name, p.Value); err != nil {
			return nil, nil, st, false, err
		}
	}
	if err := batch.Commit(ctx); err != nil {
		return nil, nil, st, false, err
	}
	st.accepted = len(kept)
	return kept, dead, st, false, nil
}

// messageDeadLetter is the dead letter of a whole message: its body as
// received (gzip-decoded), its origin, and a format that says how replay
// decodes it again: the source's format, with ";quoted" when the body is
// not UTF-8 (kept as a Go-quoted string) and ";truncated" when it was
// longer than maxDeadLetterBody (it cannot be replayed).
func (w *Writer) messageDeadLetter(now time.Time, m *Message, err error, kind string) table.Row {
	body := m.deadLetterBody()
	format := w.format.String()
	if w.registry != nil {
		// Replay decodes it with the registry again (the table's or its
		// source's).
		format = w.registry.Format()
	}
	if w.changes != nil {
		// Not replayable as a plain row: replay would lose the operation.
		format = FormatChanges + w.changes.Format
	}
	if len(body) > maxDeadLetterBody {
		body = body[:maxDeadLetterBody]
		format += FormatTruncated
	}
	text := string(body)
	if !utf8.ValidString(text) {
		text = strconv.Quote(text)
		format += FormatQuoted
	}
	origin := w.origin(m)
	row := table.Row{"time": now, "column": "", "filter": false, "loader": kind, "source": "",
		"error": err.Error(), "row": text, "origin": origin, "format": format,
		"id": ingest.DeadLetterID(origin, "message", kind)} // sourceOfDead adds the incarnation
	if meta := w.messageMetadata(m); meta != "" {
		row[MetadataColumn] = meta
	}
	var ce *compute.Error
	if errors.As(err, &ce) {
		// A reject column or filter: name it as a deadletter policy would.
		row["column"], row["filter"], row["loader"], row["source"] = ce.Column, ce.Filter, ce.Loader, ce.Source
	}
	var se *table.SchemaError
	if errors.As(err, &se) {
		row["column"] = se.Column
	}
	return row
}

// MetadataColumn is the dead-letter column that keeps a message's
// metadata (its key, headers, topic, partition, offset or sequence,
// timestamp) beside its body: a JSON object of the columns the source's
// metadata config would give its rows (_key, _headers, ...), all of them
// whatever the config names now, so that a replay gives a row what the
// config names then (docs/streams.md, "Dead letters and replay").
const MetadataColumn = "metadata"

// messageMetadata is m's MetadataColumn ("" when it has none).
func (w *Writer) messageMetadata(m *Message) string {
	obj := make(map[string]any, len(w.fields))
	for _, f := range w.fields {
		if v := f.value(m); v != nil {
			obj[f.column] = v
		}
	}
	if len(obj) == 0 {
		return ""
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return ""
	}
	return string(b)
}

// The suffixes of a dead letter's format (messageDeadLetter).
const (
	FormatQuoted    = ";quoted"
	FormatTruncated = ";truncated"
)

// FormatChanges starts the format of a change stream's dead letter
// ("changes:debezium"): replay keeps it, because a replayed body would be
// stored as a plain row, its operation lost.
const FormatChanges = "changes:"

// sourceOfDead adds to a dead letter of msgs[m] its message's source
// incarnation in its id (the origin names the topic and offset, and a
// recreated topic counts its offsets again), and the hidden source columns
// its message's rows get (addSource), so that the cold tier commits it to
// the dead-letter Iceberg table once across nodes, as it does the rows.
func (w *Writer) sourceOfDead(r table.Row, msgs []Message, m int) table.Row {
	if id, ok := r["id"].(string); ok && msgs[m].Source != "" {
		r["id"] = ingest.DeadLetterID(msgs[m].Source, id)
	}
	if !w.target.SourceColumns || msgs[m].Source == "" {
		return r
	}
	r[table.SourceBatchColumn] = sourceBatch(msgs)
	r[table.SourceOffsetColumn] = msgs[m].Offset
	return r
}

func rowIndex(rows []ingest.Row) map[any]int {
	idx := make(map[any]int, len(rows))
	for i, r := range rows {
		idx[reflect.ValueOf(r).UnsafePointer()] = i
	}
	return idx
}

func sortedKeys(m map[int]error) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

var gzipMagic = []byte{0x1f, 0x8b}

// ErrMessageTooLarge: a message body, as received or gzip-decoded, is over
// the source's max_message_bytes. The message is a dead letter.
var ErrMessageTooLarge = errors.New("message too large")

// body returns a message's body, gunzipped when it starts with the gzip
// magic number, or why it cannot be stored (see Writer.unpack).
func body(m *Message) ([]byte, error) {
	if m.bodyErr != nil {
		return nil, m.bodyErr
	}
	if m.unpacked || !bytes.HasPrefix(m.Body, gzipMagic) {
		return m.Body, nil
	}
	return gunzip(m.Body, 0)
}

// gunzip decodes b, failing with ErrMessageTooLarge past limit bytes
// (0: no limit) without holding more than limit+1 of them: a gzip bomb
// (1.5 MB of zeros is 1.5 GB) costs its limit, not its size.
func gunzip(b []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	var r io.Reader = zr
	if limit > 0 {
		r = io.LimitReader(zr, limit+1)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if limit > 0 && int64(len(out)) > limit {
		return nil, fmt.Errorf("%w: gzip-decoded body over max_message_bytes (%d bytes)", ErrMessageTooLarge, limit)
	}
	return out, nil
}

func (w *Writer) maxMessageBytes() int64 {
	if w.target.MaxMessageBytes > 0 {
		return w.target.MaxMessageBytes
	}
	return DefaultMaxMessageBytes
}

// unpack checks m's size and gzip-decodes its body within the bound, once;
// it returns the bytes the body holds now (0 when it is too large).
func (w *Writer) unpack(m *Message) int64 {
	if m.unpacked {
		return int64(len(m.Body))
	}
	m.unpacked = true
	limit := w.maxMessageBytes()
	if int64(len(m.Body)) > limit {
		m.bodyErr = fmt.Errorf("%w: %d bytes, over max_message_bytes (%d bytes)", ErrMessageTooLarge, len(m.Body), limit)
		return 0
	}
	if !bytes.HasPrefix(m.Body, gzipMagic) {
		return int64(len(m.Body))
	}
	b, err := gunzip(m.Body, limit)
	if err != nil {
		m.bodyErr = err
		return 0
	}
	m.Body = b
	return int64(len(b))
}

// WriteBounded is Write for a batch of any size: it unpacks the messages
// (size bounds, gzip), and writes them in consecutive runs of at most
// max(max_message_bytes, DefaultMaxMessageBytes) decoded bytes, each run
// committed with the positions positions(last message of the run) gives.
// A run is atomic with its positions as a Write is; runs only bound how
// many decoded rows are in memory at once. stored is called after each
// run is committed. On error, the runs before the failing one are stored
// (stored was called for them): the caller retries from there.
func (w *Writer) WriteBounded(ctx context.Context, msgs []Message, positions func(last *Message) []Position, stored func(last *Message, res Result)) error {
	budget := max(w.maxMessageBytes(), DefaultMaxMessageBytes)
	for start := 0; start < len(msgs); {
		end, size := start, int64(0)
		for end < len(msgs) {
			n := w.unpack(&msgs[end])
			if end > start && size+n > budget {
				break
			}
			size += n
			end++
		}
		res, err := w.Write(ctx, msgs[start:end], positions(&msgs[end-1]))
		if err != nil {
			return err
		}
		stored(&msgs[end-1], res)
		start = end
	}
	return nil
}

// decode decodes every message. NDJSON messages are joined into one input
// (one decoder pass for the batch; a message's rows are found by line
// number); other formats are decoded message by message.
func (w *Writer) decode(msgs []Message) decoded {
	d := decoded{poison: map[int]error{}, bad: map[int]error{}}
	if w.format == ingest.NDJSON && w.decodeJoined(msgs, &d) {
		w.addMeta(msgs, &d)
		return d
	}
	d = decoded{poison: map[int]error{}, bad: map[int]error{}}
	for i := range msgs {
		b, err := body(&msgs[i])
		if err != nil {
			d.poison[i] = err
			continue
		}
		var rows []ingest.Row
		res, err := ingest.Decode(bytes.NewReader(b), ingest.DecodeOptions{Format: w.format, Policy: ingest.Skip, Schema: w.target.Schema},
			func(r []ingest.Row, _ []int) error { rows = append(rows, r...); return nil })
		if err == nil && res.BadCount > 0 {
			err = res.BadLines[0]
			if w.target.Policy == ingest.Skip {
				d.bad[i] = fmt.Errorf("%d bad lines skipped, the first: %w", res.BadCount, err)
				d.badLines += res.BadCount
				err = nil
			}
		}
		if err != nil {
			d.poison[i] = err
			continue
		}
		for _, r := range rows {
			d.rows = append(d.rows, r)
			d.msgOf = append(d.msgOf, int32(i))
		}
	}
	w.addMeta(msgs, &d)
	return d
}

// decodeRegistry decodes each message with w.registry: one row a message,
// or the message is poison. It fails, storing nothing, when the registry
// cannot be reached.
func (w *Writer) decodeRegistry(ctx context.Context, msgs []Message) (decoded, error) {
	d := decoded{poison: map[int]error{}, bad: map[int]error{}}
	for i := range msgs {
		if row := msgs[i].change.row; row != nil {
			d.rows = append(d.rows, row)
			d.msgOf = append(d.msgOf, int32(i))
			continue
		}
		b, err := body(&msgs[i])
		if err != nil {
			d.poison[i] = err
			continue
		}
		row, err := w.registry.Decode(ctx, b)
		if errors.Is(err, schemaformat.ErrUnavailable) {
			return decoded{}, fmt.Errorf("stream: decoding the message at %s: %w", w.origin(&msgs[i]), err)
		}
		if err != nil {
			d.poison[i] = err
			continue
		}
		d.rows = append(d.rows, row)
		d.msgOf = append(d.msgOf, int32(i))
	}
	w.addMeta(msgs, &d)
	return d, nil
}

// joined is NDJSON messages as one input.
type joined struct {
	buf []byte
	// size is the bodies' bytes as received, plus one per message.
	size int
	// Message i's lines are firstLine[i]..lastLine[i] of the input (from 1).
	firstLine, lastLine []int
}

// join joins the bodies of msgs into one NDJSON input; the messages whose
// body cannot be stored go to poison (nil: the first such message makes
// join return false).
func join(msgs []Message, poison map[int]error) (joined, bool) {
	return joinInto(nil, msgs, poison)
}

// joinInto is join into buf's memory when it is large enough.
func joinInto(buf []byte, msgs []Message, poison map[int]error) (joined, bool) {
	size := 0
	for i := range msgs {
		size += len(msgs[i].Body) + 1
	}
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	j := joined{buf: buf[:0], size: size, firstLine: make([]int, len(msgs)), lastLine: make([]int, len(msgs))}
	line := 0
	for i := range msgs {
		j.firstLine[i] = line + 1
		b, err := body(&msgs[i])
		if err != nil {
			if poison == nil {
				return j, false
			}
			poison[i] = err
			j.lastLine[i] = line
			continue
		}
		j.buf = append(j.buf, b...)
		line += bytes.Count(b, []byte{'\n'})
		if len(b) == 0 || b[len(b)-1] != '\n' {
			j.buf = append(j.buf, '\n')
			line++
		}
		j.lastLine[i] = line
	}
	return j, true
}

// joinPool reuses the joined inputs of the by-column path: a batch's
// bodies are copied into one buffer, garbage once decoded (the decoder
// copies the strings it keeps), and at bulk rates it was a large
// allocation per batch.
var joinPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledJoin bounds the joined inputs kept for reuse.
const maxPooledJoin = 4 << 20

func putJoined(p *[]byte, buf []byte) {
	if cap(buf) > maxPooledJoin {
		return
	}
	*p = buf[:0]
	joinPool.Put(p)
}

// decodeJoined decodes NDJSON messages as one input; false means a bad line
// could not be placed (more than ingest.MaxReported bad lines) and the
// caller decodes message by message.
func (w *Writer) decodeJoined(msgs []Message, d *decoded) bool {
	j, _ := join(msgs, d.poison)
	buf, firstLine, lastLine := j.buf, j.firstLine, j.lastLine
	size := j.size
	msgAt := func(l int) int { return sort.SearchInts(lastLine, l) }
	var rows []ingest.Row
	var lines []int
	res, err := ingest.Decode(bytes.NewReader(buf), ingest.DecodeOptions{Format: ingest.NDJSON, Policy: ingest.Skip, Schema: w.target.Schema, MaxLine: max(size, 1)},
		func(r []ingest.Row, l []int) error { rows, lines = r, l; return nil })
	if err != nil || res.BadCount > len(res.BadLines) {
		return false
	}
	badCount := map[int]int{}
	for _, le := range res.BadLines {
		m := msgAt(le.Line)
		lineErr := fmt.Errorf("line %d: %w", le.Line-firstLine[m]+1, le.Err)
		if w.target.Policy == ingest.Reject {
			if _, seen := d.poison[m]; !seen {
				d.poison[m] = lineErr
			}
			continue
		}
		d.badLines++
		if _, seen := d.bad[m]; !seen {
			d.bad[m] = lineErr
		}
		badCount[m]++
	}
	for m, n := range badCount {
		d.bad[m] = fmt.Errorf("%d bad lines skipped, the first: %w", n, d.bad[m])
	}
	d.rows = rows
	d.msgOf = make([]int32, len(rows))
	for i, l := range lines {
		d.msgOf[i] = int32(msgAt(l))
	}
	if len(d.poison) > 0 {
		// Rows of a message rejected as a whole go too.
		k := 0
		for i, r := range d.rows {
			if _, p := d.poison[int(d.msgOf[i])]; !p {
				d.rows[k], d.msgOf[k] = r, d.msgOf[i]
				k++
			}
		}
		d.rows, d.msgOf = d.rows[:k], d.msgOf[:k]
	}
	return true
}

func (w *Writer) addMeta(msgs []Message, d *decoded) {
	if len(w.meta) == 0 {
		return
	}
	for i, r := range d.rows {
		m := &msgs[d.msgOf[i]]
		for _, f := range w.meta {
			if v := f.value(m); v != nil {
				r[f.column] = v
			}
		}
	}
}

// addSource adds the hidden source columns to the rows of msgs (one Write,
// stored in one batch): the batch's source and offsets [first, last+1),
// and each row's message offset. The cold tier claims the batch's range
// once it commits its rows, and skips a row whose offset another store
// claimed (coldtier/claims.go).
func (w *Writer) addSource(msgs []Message, d *decoded) {
	if !w.target.SourceColumns || len(msgs) == 0 || msgs[0].Source == "" {
		return
	}
	batch := sourceBatch(msgs)
	for i, r := range d.rows {
		r[table.SourceBatchColumn] = batch
		r[table.SourceOffsetColumn] = msgs[d.msgOf[i]].Offset
	}
}

// columnar reports whether batches take the by-column path (writeColumns):
// NDJSON or a Schema Registry format into a table whose computed columns and filters, if any, run on
// columns (compute.Processor.Columnar), the condition of HTTP ingest's
// (ingest.Pipeline.Columnar).
func (w *Writer) columnar() bool {
	return !w.mapsOnly && (w.target.Compute == nil || w.target.Compute.Columnar()) && w.format == ingest.NDJSON && w.changesByColumn()
}

// writeColumns is Write without a map per row (docs/server.md, "Scaling
// with cores"): the messages are decoded by column (ingest.DecodeColumns;
// the Schema Registry formats by their schemas' decoders,
// writeRegistryColumns), their metadata and source columns added by column, and the rows staged
// with table.Batch.AppendColumns in the batch that stores the positions.
// It takes the common case only: done is false, and nothing was stored,
// when anything is unusual (a message too large or not gunzippable, a bad
// line, rows the table refuses: a widening past the column limit, a value
// that does not fit the schema, a store error while staging, a function
// with the reject policy failing), and Write then takes the map path,
// which decides and names it as before (running the functions again). A
// commit error is returned (done) as the map path returns it.
func (w *Writer) writeColumns(ctx context.Context, msgs []Message, positions []Position) (res Result, done bool, err error) {
	if w.registry != nil {
		return w.writeRegistryColumns(ctx, msgs, positions)
	}
	buf := joinPool.Get().(*[]byte)
	j, ok := joinInto(*buf, msgs, nil)
	defer putJoined(buf, j.buf) // DecodeColumns copies what it keeps
	if !ok {
		return res, false, nil
	}
	batch, err := w.target.Store.NewBatch()
	if err != nil {
		return res, false, nil
	}
	defer batch.Close()
	var st staged
	// Reject: the first bad line ends the decoding (and the map path takes
	// the batch), before any row is staged: emit is called once, at the end.
	_, err = ingest.DecodeColumns(bytes.NewReader(j.buf), ingest.DecodeOptions{Format: ingest.NDJSON, Policy: ingest.Reject, Schema: w.target.Schema, MaxLine: max(j.size, 1)},
		func(cb *colbatch.Batch) error {
			var err error
			st, err = w.stageColumns(ctx, batch, msgs, j.lastLine, cb)
			return err
		})
	if err != nil {
		return res, false, nil
	}
	return w.commitColumns(ctx, batch, msgs, positions, st)
}

// staged counts the rows stageColumns staged.
type staged struct{ rows, kept, dead int }

// stageColumns adds the metadata and source columns to cb (the rows of
// msgs, lastLine their lines as join gives them), runs the target's
// computed columns and filters, and stages the kept rows and the dead
// letters in batch.
func (w *Writer) stageColumns(ctx context.Context, batch *table.Batch, msgs []Message, lastLine []int, cb *colbatch.Batch) (staged, error) {
	st := staged{rows: cb.Len}
	msgOf := w.addColumnsMeta(msgs, lastLine, cb)
	w.addColumnsChanges(msgs, msgOf, cb)
	var deadRows []table.Row
	if w.target.Compute != nil && cb.Len > 0 {
		var err error
		if deadRows, err = w.computeColumns(ctx, msgs, msgOf, cb); err != nil {
			return st, err
		}
	}
	st.kept, st.dead = cb.Len, len(deadRows)
	if err := batch.AppendColumns(w.target.Table, cb); err != nil {
		return st, err
	}
	return st, w.appendDead(batch, deadRows)
}

// commitColumns stores positions in batch and commits it: done unless a
// position cannot be staged (the map path then takes the messages).
func (w *Writer) commitColumns(ctx context.Context, batch *table.Batch, msgs []Message, positions []Position, st staged) (res Result, done bool, err error) {
	for _, p := range positions {
		if err := batch.SetPosition(p.Name, p.Value); err != nil {
			return res, false, nil
		}
	}
	res.Messages, res.Rows = len(msgs), st.rows
	if err := batch.Commit(ctx); err != nil {
		return res, true, err
	}
	res.Accepted, res.Filtered, res.DeadLetters = st.kept, st.rows-st.kept-st.dead, st.dead
	w.byColumn.Add(1)
	return res, true, nil
}

// computeColumns runs the target's filters and computed columns on cb (the
// rows of msgs, msgOf[r] the message of row r) as attempt does on maps,
// leaving the kept rows in cb, without the metadata columns the schema
// lacks, and returning the dead-letter rows with their origins.
func (w *Writer) computeColumns(ctx context.Context, msgs []Message, msgOf []int32, cb *colbatch.Batch) ([]table.Row, error) {
	out, err := w.target.Compute.ProcessColumns(compute.WithRowSource(ctx, messageSource(msgs, msgOf)), cb)
	if err != nil {
		return nil, err
	}
	for _, c := range w.unstored {
		// Scripts saw them; the table does not store them (attempt deletes
		// them from the kept rows).
		if i := cb.Find(c); i >= 0 {
			clear(cb.Cols[i].Cells)
		}
	}
	if len(out.DeadLetters) == 0 {
		return nil, nil
	}
	letters := make([]ingest.DeadLetter, len(out.DeadLetters))
	for i, dl := range out.DeadLetters {
		letters[i] = ingest.DeadLetter{DeadLetter: dl, Origin: w.origin(&msgs[msgOf[out.DeadLetterRows[i]]])}
	}
	dead := ingest.DeadLetterRows(letters, w.now())
	for i, r := range dead {
		w.sourceOfDead(r, msgs, int(msgOf[out.DeadLetterRows[i]]))
	}
	return dead, nil
}

// appendDead stages dead-letter rows in batch, as attempt does.
func (w *Writer) appendDead(batch *table.Batch, dead []table.Row) error {
	if len(dead) == 0 {
		return nil
	}
	if w.target.DeadLetters != nil {
		if err := batch.Append(w.target.DeadLetters, dead); err != nil {
			return fmt.Errorf("stream: dead letters: %w", err)
		}
		return nil
	}
	for _, r := range dead {
		w.target.Log.Warn("dead letter dropped (the table has no dead-letter table)", "origin", r["origin"], "error", r["error"])
	}
	return nil
}

// addColumnsMeta adds to cb (the rows of msgs, lastLine their lines as
// join gives them) the metadata columns the table stores and the hidden
// source columns, as addMeta and addSource do to rows as maps, and returns
// the message of each row. With computed columns or filters, the metadata
// columns the table does not store are added too, for the scripts to see
// (computeColumns clears them after).
func (w *Writer) addColumnsMeta(msgs []Message, lastLine []int, cb *colbatch.Batch) (msgOf []int32) {
	if cb.Len == 0 {
		return nil
	}
	// msgOf[r] is the message of row r: rows come in line order.
	msgOf = make([]int32, cb.Len)
	m := 0
	for r, l := range cb.Lines {
		for lastLine[m] < l {
			m++
		}
		msgOf[r] = int32(m)
	}
	for _, f := range w.meta {
		if w.target.Compute == nil && slices.Contains(w.unstored, f.column) {
			// The map path deletes the column from the rows, a body's
			// value of that name too.
			if c := cb.Find(f.column); c >= 0 {
				clear(cb.Cols[c].Cells)
			}
			continue
		}
		c := cb.ColumnOf(f.column)
		cells := cb.Cols[c].Cells
		prev := int32(-1)
		var cell colbatch.Cell
		var set bool
		for r, m := range msgOf {
			if m != prev { // one value per message
				prev = m
				v := f.value(&msgs[m])
				if set = v != nil; set {
					cell = cb.CellOf(v)
				}
			}
			if set {
				cells[r] = cell
			}
		}
	}
	if !w.target.SourceColumns || msgs[0].Source == "" {
		return msgOf
	}
	tag := colbatch.Cell{Kind: colbatch.String, S: sourceBatch(msgs)}
	bc := cb.Cols[cb.ColumnOf(table.SourceBatchColumn)].Cells
	oc := cb.Cols[cb.ColumnOf(table.SourceOffsetColumn)].Cells
	for r, m := range msgOf {
		bc[r] = tag
		oc[r] = colbatch.Cell{Kind: colbatch.Int, I: msgs[m].Offset}
	}
	return msgOf
}

// sourceBatch is the table.SourceBatchColumn value of the rows of msgs:
// their source and offsets [first, last+1).
func sourceBatch(msgs []Message) string {
	return msgs[0].Source + "@" + strconv.FormatInt(msgs[0].Offset, 10) + "-" + strconv.FormatInt(msgs[len(msgs)-1].Offset+1, 10)
}

// messageSource says which message row i came from (msgOf[i] of msgs),
// for the log lines scripts write about it.
func messageSource(msgs []Message, msgOf []int32) func(int) []slog.Attr {
	return func(i int) []slog.Attr {
		if i < 0 || i >= len(msgOf) || int(msgOf[i]) >= len(msgs) {
			return nil
		}
		m := &msgs[msgOf[i]]
		return []slog.Attr{slog.String("topic", m.Topic), slog.Int("partition", int(m.Partition)), slog.Int64("offset", m.Offset)}
	}
}
