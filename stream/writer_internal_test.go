package stream

import (
	"bytes"
	"compress/gzip"
	"context"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/table"
)

// TestWriterJoinedDecodeSkip: NDJSON messages decoded as one input under
// on_bad_line skip keep their good lines, and each message with a bad line
// gets one dead letter naming its own line number and origin; metadata a
// static schema lacks reaches no stored row.
func TestWriterJoinedDecodeSkip(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", Columns: []table.Column{{Name: "ts", Type: table.Timestamp}, {Name: "id", Type: table.Int64}}})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	target := Target{Store: s, Table: tb, DeadLetters: dl, Policy: ingest.Skip,
		Schema: map[string]compute.Type{"ts": compute.Timestamp, "id": compute.Int64}}
	w, err := newWriter(target, "ndjson", []string{"key", "offset"}, kafkaFields, func(m *Message) string { return "m" + m.Topic })
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{
		{Topic: "0", Key: []byte("k"), Body: []byte(`{"ts":"2026-01-01T00:00:00Z","id":1}` + "\n" + `{"ts":"2026-01-01T00:00:00Z","id":2}`)},
		{Topic: "1", Body: []byte(`{"ts":"2026-01-01T00:00:00Z","id":3}` + "\n" + `{broken` + "\n" + `{"ts":"2026-01-01T00:00:00Z","id":4}` + "\n")},
		{Topic: "2", Body: []byte(`{"ts":"2026-01-01T00:00:00Z","id":5}`)},
	}
	res, err := w.Write(ctx, msgs, []Position{{Name: "p", Value: []byte{7}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 5 || res.BadLines != 1 || res.DeadLetters != 1 || res.Poison != 0 {
		t.Fatalf("result %+v: want 5 accepted, 1 bad line, 1 dead letter, no poison", res)
	}
	var ids []int64
	if err := tb.Query(ctx, table.Query{}, func(r table.Row) error {
		if _, ok := r["_key"]; ok {
			t.Errorf("row %v has _key, which the static schema lacks", r)
		}
		ids = append(ids, r["id"].(int64))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 5 {
		t.Fatalf("stored ids %v", ids)
	}
	var dead []table.Row
	if err := dl.Query(ctx, table.Query{}, func(r table.Row) error { dead = append(dead, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0]["origin"] != "m1" || !strings.HasPrefix(dead[0]["error"].(string), "1 bad lines skipped, the first: line 2:") {
		t.Fatalf("dead letters %v: want one from message 1 naming its line 2", dead)
	}
	if pos, _ := s.Position("p"); len(pos) != 1 || pos[0] != 7 {
		t.Fatalf("position %v", pos)
	}
}

// TestWriterFormats: json-array, CSV and gzip-compressed message bodies are
// decoded message by message; a message that does not decode is poison
// under on_bad_line reject and the others are stored.
func TestWriterFormats(t *testing.T) {
	ctx := context.Background()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`[{"ts":"2026-01-01T00:00:00Z","id":3}]`))
	zw.Close()
	for _, c := range []struct {
		format string
		bodies []string
		want   int
		poison int
	}{
		{"json", []string{`[{"ts":"2026-01-01T00:00:00Z","id":1},{"ts":"2026-01-01T00:00:00Z","id":2}]`, gz.String(), `[{"ts":`}, 3, 1},
		{"csv", []string{"ts,id\n2026-01-01T00:00:00Z,1\n2026-01-01T00:00:00Z,2\n", "ts,id\n2026-01-01T00:00:00Z,x\n"}, 2, 1},
	} {
		t.Run(c.format, func(t *testing.T) {
			s, err := table.Open(t.TempDir(), table.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", Columns: []table.Column{{Name: "ts", Type: table.Timestamp}, {Name: "id", Type: table.Int64}}})
			if err != nil {
				t.Fatal(err)
			}
			target := Target{Store: s, Table: tb, Policy: ingest.Reject, Schema: map[string]compute.Type{"ts": compute.Timestamp, "id": compute.Int64}}
			w, err := newWriter(target, c.format, nil, kafkaFields, func(m *Message) string { return "m" })
			if err != nil {
				t.Fatal(err)
			}
			var msgs []Message
			for _, b := range c.bodies {
				msgs = append(msgs, Message{Body: []byte(b)})
			}
			res, err := w.Write(ctx, msgs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Accepted != c.want || res.Poison != c.poison {
				t.Fatalf("result %+v: want %d accepted, %d poison", res, c.want, c.poison)
			}
		})
	}
}

// gzipOf compresses size bytes of fill (a gzip bomb when size is large).
func gzipOf(t *testing.T, fill byte, size int) []byte {
	t.Helper()
	// One member of at most 1 MiB, repeated, and one for the rest: a
	// gzip file's members decode one after the other (RFC 1952), so it is
	// the same bomb to a reader, and compressing the whole size at once
	// cost tens of CPU-seconds under the race detector.
	member := func(n int) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if _, err := zw.Write(bytes.Repeat([]byte{fill}, n)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	const chunk = 1 << 20
	out := bytes.Repeat(member(min(chunk, size)), size/chunk)
	if rest := size % chunk; rest > 0 {
		out = append(out, member(rest)...)
	}
	return out
}

// TestWriterBoundsMessages: a message over max_message_bytes (as received)
// and a gzip bomb (small, decoding past the bound) are dead letters naming
// the bound, decoded no further than the bound (the bomb's 64 MiB are never
// held), and the messages around them are stored; a batch larger than the
// bound is stored in several runs, each with the position of its last
// message.
func TestWriterBoundsMessages(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "events", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	target := Target{Store: s, Table: tb, DeadLetters: dl, Policy: ingest.Reject, MaxMessageBytes: limit}
	w, err := newWriter(target, "ndjson", nil, kafkaFields, func(m *Message) string { return "m" + m.Topic })
	if err != nil {
		t.Fatal(err)
	}
	line := func(id int) string { return `{"ts":"2026-01-01T00:00:00Z","id":` + strconv.Itoa(id) + "}\n" }
	// A big valid message: 2 MiB of rows, over the 1 MiB bound.
	var big strings.Builder
	for i := 0; big.Len() < 2<<20; i++ {
		big.WriteString(line(1000000 + i))
	}
	bomb := gzipOf(t, '0', 64<<20)
	// Messages of 600 KiB of rows: the run budget is
	// max(bound, DefaultMaxMessageBytes) = 8 MiB, so 20 make two runs.
	var filler strings.Builder
	for filler.Len() < 600<<10 {
		filler.WriteString(line(7))
	}
	msgs := []Message{{Topic: "0", Offset: 0, Body: []byte(line(1))}, {Topic: "big", Offset: 1, Body: []byte(big.String())},
		{Topic: "bomb", Offset: 2, Body: bomb}, {Topic: "3", Offset: 3, Body: []byte(line(2))}}
	fillerRows := 0
	for i := range 20 {
		msgs = append(msgs, Message{Topic: "f", Offset: int64(4 + i), Body: []byte(filler.String())})
		fillerRows += strings.Count(filler.String(), "\n")
	}
	// Unpacking the bomb costs its bound (1 MiB, read in doubling
	// buffers) and the gzip reader; reading it whole, over 64 MiB.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w.unpack(&msgs[2])
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("unpacking the bomb allocated %d MiB: decoded past its bound", alloc>>20)
	}
	var runs []int64
	err = w.WriteBounded(ctx, msgs, func(m *Message) []Position {
		return []Position{{Name: "p", Value: []byte(strconv.FormatInt(m.Offset, 10))}}
	}, func(m *Message, res Result) { runs = append(runs, m.Offset) })
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) < 2 || runs[len(runs)-1] != 23 {
		t.Errorf("runs ended at offsets %v: want at least two runs, the last at offset 23", runs)
	}
	if pos, _ := s.Position("p"); string(pos) != "23" {
		t.Errorf("position %q, want 23", pos)
	}
	n := 0
	if err := tb.Query(ctx, table.Query{}, func(r table.Row) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := 2 + fillerRows; n != want {
		t.Errorf("%d rows stored, want %d (none of the big message's)", n, want)
	}
	var dead []table.Row
	if err := dl.Query(ctx, table.Query{}, func(r table.Row) error { dead = append(dead, maps.Clone(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, d := range dead {
		reasons[d["origin"].(string)] = d["error"].(string)
		// At most maxDeadLetterBody bytes of the body, quoted when not
		// UTF-8 (4 bytes a byte at most).
		if len(d["row"].(string)) > 4*maxDeadLetterBody+2 {
			t.Errorf("dead letter %s keeps %d bytes of the message", d["origin"], len(d["row"].(string)))
		}
	}
	if len(dead) != 2 || !strings.Contains(reasons["mbig"], "2097") || !strings.Contains(reasons["mbig"], "over max_message_bytes (1048576 bytes)") ||
		!strings.Contains(reasons["mbomb"], "gzip-decoded body over max_message_bytes (1048576 bytes)") {
		t.Errorf("dead letters %v: want the big message and the bomb, each naming the bound", reasons)
	}
}

// TestWriterDeadLetterIdentity: a dead letter of a stream carries an id
// that names its message (the same message gives the same id, another
// incarnation of the topic another), its origin, its format and, for a
// table committed to Iceberg, its message's source columns (so that two
// stores holding the message commit its dead letter once).
func TestWriterDeadLetterIdentity(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "events", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWriter(Target{Store: s, Table: tb, DeadLetters: dl, SourceColumns: true}, "ndjson", nil, kafkaFields,
		func(m *Message) string { return "kafka " + m.Topic + "@" + strconv.FormatInt(m.Offset, 10) })
	if err != nil {
		t.Fatal(err)
	}
	write := func(source string, offset int64) {
		t.Helper()
		msgs := []Message{{Topic: "t", Offset: offset, Source: source, Body: []byte("{broken\xff")}}
		if res, err := w.Write(ctx, msgs, nil); err != nil || res.DeadLetters != 1 {
			t.Fatalf("write: %+v %v", res, err)
		}
	}
	write("kafka/t/0/aaa", 7)
	write("kafka/t/0/aaa", 7) // the same message again (another store would do the same)
	write("kafka/t/0/bbb", 7) // the topic recreated: the same offset, another message
	var rows []table.Row
	if err := dl.Query(ctx, table.Query{Columns: []string{"id", "origin", "format", "row", table.SourceBatchColumn, table.SourceOffsetColumn}},
		func(r table.Row) error { rows = append(rows, maps.Clone(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d dead letters, want 3", len(rows))
	}
	if rows[0]["id"] != rows[1]["id"] || rows[0]["id"] == rows[2]["id"] || rows[0]["id"] == "" {
		t.Fatalf("ids %v %v %v: want the same message's equal, the other incarnation's different", rows[0]["id"], rows[1]["id"], rows[2]["id"])
	}
	for _, r := range rows {
		if r["origin"] != "kafka t@7" || r["format"] != "ndjson"+FormatQuoted || r["row"] != strconv.Quote("{broken\xff") {
			t.Fatalf("dead letter %v: want its origin, its format (quoted) and its body", r)
		}
		if r[table.SourceOffsetColumn] != int64(7) || !strings.HasPrefix(r[table.SourceBatchColumn].(string), "kafka/t/0/") {
			t.Fatalf("dead letter %v: want its message's source columns", r)
		}
	}
}
