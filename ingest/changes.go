package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/jsonw"
)

// Change streams (docs/changes.md): a message that says what happens to a
// key, not only what a row holds. The decoders here read the operation, the
// columns of the row (or of the key a delete names) and the source position
// of a change event; the stream source adds the operation to the row as the
// table's hidden operation column.

// The errors of a change event that cannot be applied. Each makes its
// message a dead letter, the reason named.
var (
	// ErrNotChange: the message is not a change event of its format (no
	// op, an op sluice does not know, no row where the op needs one).
	ErrNotChange = errors.New("not a change event")
	// ErrNoKey: a delete names no key (no before image and no message
	// key, or a tombstone without a key).
	ErrNoKey = errors.New("no key to delete")
	// ErrTruncate: Debezium's truncate (op "t") empties a whole source
	// table; a keyed table has no operation that deletes every key, so the
	// event is refused loudly rather than dropped in silence.
	ErrTruncate = errors.New("truncate events are not applied")
)

// ChangePosition is where a change event comes from in its database's log,
// as Debezium's source block says: the commit time in milliseconds since
// the epoch (source.ts_ms, else the envelope's ts_ms) and, for PostgreSQL,
// the log sequence number (source.lsn). They order one key's changes across
// topics or partitions, where the Kafka offset cannot.
type ChangePosition struct {
	TimeMillis int64
	LSN        int64
	HasTime    bool
	HasLSN     bool
}

// Change is what one change event does.
type Change struct {
	// Delete: the event deletes the key its row names (only the key's
	// columns matter); otherwise the row is the key's latest state.
	Delete   bool
	Position ChangePosition
}

// DebeziumJSON reads a Debezium change event written by the JSON converter
// (with or without the schema/payload wrapper of its schemas.enable). It
// returns the JSON object of the row: after's columns for c (create), r
// (snapshot read) and u (update); for d (delete) before's columns, or the
// message key's when the event has no before image (keyColumn names the
// column a scalar key fills, see KeyObject). The row is a slice of body.
//
// The envelope is scanned, not decoded: its members are skipped over by
// their brackets and quotes (scanObject), and only op, the source position
// and the row's object are looked at; the row's object is then decoded as
// any NDJSON row, which checks it. encoding/json's decode of the envelope
// cost 30 times the row's own decode (docs/perf/upserts-decode.md).
func DebeziumJSON(body, key []byte, keyColumn string) (row []byte, c Change, err error) {
	env, err := scanEnvelope(body)
	if err != nil {
		return nil, c, fmt.Errorf("%w: %w", ErrNotChange, err)
	}
	if env.op == nil && isObject(env.payload) {
		// The JSON converter with schemas on: the event is the payload.
		if env, err = scanEnvelope(env.payload); err != nil {
			return nil, c, fmt.Errorf("%w: payload: %w", ErrNotChange, err)
		}
	}
	if env.op == nil {
		return nil, c, fmt.Errorf("%w: no op field", ErrNotChange)
	}
	op, err := jsonString(env.op)
	if err != nil {
		return nil, c, fmt.Errorf("%w: op: %w", ErrNotChange, err)
	}
	if c.Position, err = jsonPosition(env.source, env.tsMs); err != nil {
		return nil, c, err
	}
	switch op {
	case "c", "r", "u":
		if !isObject(env.after) {
			return nil, c, fmt.Errorf("%w: op %q without an after object", ErrNotChange, op)
		}
		return env.after, c, nil
	case "d":
		c.Delete = true
		if isObject(env.before) && !isEmptyObject(env.before) {
			return env.before, c, nil
		}
		row, err := KeyObject(key, keyColumn)
		if err != nil {
			return nil, c, fmt.Errorf("op d without a before object: %w", err)
		}
		return row, c, nil
	case "t":
		return nil, c, ErrTruncate
	}
	return nil, c, fmt.Errorf("%w: unknown op %q (want c, r, u or d)", ErrNotChange, op)
}

// envelope are the members of a Debezium event sluice reads, as slices of
// the event's text (nil: absent).
type envelope struct {
	before, after, op, source, tsMs, payload []byte
}

func scanEnvelope(b []byte) (envelope, error) {
	var env envelope
	err := scanObject(b, func(key, value []byte) {
		switch string(key) {
		case "before":
			env.before = value
		case "after":
			env.after = value
		case "op":
			env.op = value
		case "source":
			env.source = value
		case "ts_ms":
			env.tsMs = value
		case "payload":
			env.payload = value
		}
	})
	return env, err
}

// errNotObject: the text is not one JSON object.
var errNotObject = errors.New("not a JSON object")

// scanObject calls member with each member of the JSON object b (its key's
// text between the quotes, escapes left as they are, and its value's
// text). It checks the brackets and quotes it skips over, not the values:
// the values sluice uses are decoded, and checked, by their reader.
func scanObject(b []byte, member func(key, value []byte)) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if skipSpace(b, i+1) != len(b) {
			return errors.New("text after the object")
		}
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return fmt.Errorf("offset %d: want a member's key", i)
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return fmt.Errorf("offset %d: want ':'", i)
		}
		i = skipSpace(b, i+1)
		end, err = skipValue(b, i)
		if err != nil {
			return err
		}
		member(key, b[i:end])
		i = skipSpace(b, end)
		if i >= len(b) {
			return errors.New("unexpected end of the object")
		}
		if b[i] == '}' {
			if skipSpace(b, i+1) != len(b) {
				return errors.New("text after the object")
			}
			return nil
		}
		if b[i] != ',' {
			return fmt.Errorf("offset %d: want ',' or '}'", i)
		}
		i = skipSpace(b, i+1)
	}
}

// skipString returns the offset after the string that starts at b[i].
func skipString(b []byte, i int) (int, error) {
	end, _, ok := jsonw.SkipString(b, i)
	if !ok {
		return 0, fmt.Errorf("offset %d: unterminated string", i)
	}
	return end, nil
}

// skipValue returns the offset after the value that starts at b[i].
func skipValue(b []byte, i int) (int, error) {
	end, ok := jsonw.SkipValue(b, i)
	if !ok {
		if i >= len(b) {
			return 0, errors.New("unexpected end: want a value")
		}
		return 0, fmt.Errorf("offset %d: want a closed value", i)
	}
	return end, nil
}

// jsonString is the string a JSON string's text holds.
func jsonString(v []byte) (string, error) {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", err
	}
	return s, nil
}

func jsonPosition(source, tsMs []byte) (ChangePosition, error) {
	var p ChangePosition
	if isObject(source) {
		var sourceMs, lsn []byte
		if err := scanObject(source, func(key, value []byte) {
			switch string(key) {
			case "ts_ms":
				sourceMs = value
			case "lsn":
				lsn = value
			}
		}); err != nil {
			return p, fmt.Errorf("%w: source: %w", ErrNotChange, err)
		}
		if n, err := strconv.ParseInt(string(sourceMs), 10, 64); err == nil {
			p.TimeMillis, p.HasTime = n, true
		}
		if n, err := strconv.ParseInt(string(lsn), 10, 64); err == nil {
			p.LSN, p.HasLSN = n, true
		}
	}
	if n, err := strconv.ParseInt(string(tsMs), 10, 64); err == nil && !p.HasTime {
		p.TimeMillis, p.HasTime = n, true
	}
	return p, nil
}

func isEmptyObject(b []byte) bool {
	empty := true
	_ = scanObject(b, func(_, _ []byte) { empty = false })
	return empty
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// DebeziumRow is DebeziumJSON for an event already decoded into a row (an
// Avro envelope from the Schema Registry: before, after and source are
// nested records, which the decoder gives as JSON text; a map is taken as
// well). key decodes the message key when a delete has no before image.
func DebeziumRow(env Row, key func() (Row, error)) (Row, Change, error) {
	var c Change
	op, ok := env["op"].(string)
	if !ok {
		return nil, c, fmt.Errorf("%w: no op field", ErrNotChange)
	}
	src, err := nestedRow(env["source"])
	if err != nil {
		return nil, c, fmt.Errorf("%w: source: %w", ErrNotChange, err)
	}
	if n, ok := asInt(src["ts_ms"]); ok {
		c.Position.TimeMillis, c.Position.HasTime = n, true
	}
	if n, ok := asInt(src["lsn"]); ok {
		c.Position.LSN, c.Position.HasLSN = n, true
	}
	if n, ok := asInt(env["ts_ms"]); ok && !c.Position.HasTime {
		c.Position.TimeMillis, c.Position.HasTime = n, true
	}
	switch op {
	case "c", "r", "u":
		after, err := nestedRow(env["after"])
		if err != nil {
			return nil, c, fmt.Errorf("%w: after: %w", ErrNotChange, err)
		}
		if after == nil {
			return nil, c, fmt.Errorf("%w: op %q without an after record", ErrNotChange, op)
		}
		return after, c, nil
	case "d":
		c.Delete = true
		before, err := nestedRow(env["before"])
		if err != nil {
			return nil, c, fmt.Errorf("%w: before: %w", ErrNotChange, err)
		}
		if len(before) > 0 {
			return before, c, nil
		}
		row, err := key()
		if err != nil {
			return nil, c, fmt.Errorf("op d without a before record: %w", err)
		}
		return row, c, nil
	case "t":
		return nil, c, ErrTruncate
	}
	return nil, c, fmt.Errorf("%w: unknown op %q (want c, r, u or d)", ErrNotChange, op)
}

// nestedRow is a nested record of a decoded envelope as a row (nil when
// the value is null): a map as it is, JSON text decoded as NDJSON rows are.
func nestedRow(v any) (Row, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return x, nil
	case json.RawMessage:
		return objectText(x)
	case []byte:
		return objectText(x)
	case string:
		return objectText([]byte(x))
	}
	return nil, fmt.Errorf("a %T, not a record", v)
}

func objectText(b []byte) (Row, error) {
	if t := bytes.TrimSpace(b); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	return ObjectRow(b)
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// KeyObject is a Kafka message key as the JSON object of the key columns
// it names: a JSON object as it is (a Debezium JSON key's schema/payload
// wrapper taken off); a JSON scalar, or a key that is not JSON (taken as
// text), as the value of column, the table's one key column.
func KeyObject(key []byte, column string) ([]byte, error) {
	k := bytes.TrimSpace(key)
	if len(k) == 0 || string(k) == "null" {
		return nil, ErrNoKey
	}
	if k[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(k, &m); err != nil {
			return nil, fmt.Errorf("message key: %w", err)
		}
		if p, ok := m["payload"]; ok && len(m) <= 2 {
			if _, schema := m["schema"]; schema || len(m) == 1 {
				return KeyObject(p, column)
			}
		}
		if len(m) == 0 {
			return nil, ErrNoKey
		}
		return k, nil
	}
	if column == "" {
		return nil, fmt.Errorf("message key %q is not a JSON object, and no key column is set for a scalar key", truncateKey(k))
	}
	value := k
	if !json.Valid(k) || k[0] == '[' {
		var err error
		if value, err = json.Marshal(string(key)); err != nil {
			return nil, fmt.Errorf("message key: %w", err)
		}
	}
	name, err := json.Marshal(column)
	if err != nil {
		return nil, fmt.Errorf("key column: %w", err)
	}
	return slices.Concat([]byte("{"), name, []byte(":"), value, []byte("}")), nil
}

func truncateKey(k []byte) string {
	const max = 64
	if len(k) > max {
		return string(k[:max]) + "..."
	}
	return string(k)
}

// ObjectRow decodes one JSON object into a row, with the types NDJSON
// ingest gives its columns.
func ObjectRow(obj []byte) (Row, error) {
	var row Row
	_, err := Decode(bytes.NewReader(obj), DecodeOptions{Format: NDJSON, Policy: Reject, MaxLine: len(obj) + 1},
		func(rows []Row, _ []int) error {
			if len(rows) != 1 {
				return fmt.Errorf("%d rows in one object", len(rows))
			}
			row = rows[0]
			return nil
		})
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, fmt.Errorf("%w: empty", ErrNotChange)
	}
	return row, nil
}

// OperationField reads the operation of plain rows from one of their
// columns (the 'field' change format): a value listed in Delete makes the
// row a delete of its key; any other value, or none, an upsert. The column
// is not stored.
type OperationField struct {
	Column string
	Delete []string
}

// Take removes f's column from row and reports whether its value deletes
// the row's key. A number is compared by its decimal text.
func (f OperationField) Take(row Row) (deletes bool) {
	v, ok := row[f.Column]
	if !ok {
		return false
	}
	delete(row, f.Column)
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64:
		s = strconv.FormatInt(x, 10)
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	case nil:
		return false
	default:
		s = strings.TrimSpace(fmt.Sprint(x))
	}
	return slices.Contains(f.Delete, s)
}
