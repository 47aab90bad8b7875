package stream

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/testregistry"
	"github.com/sluicedb/sluice/table"
)

// changeColumns are the columns a change stream test reads back: the row's,
// its operation, its source position and its Debezium position.
var changeColumns = []string{"id", "name", table.OperationColumn, table.SourceOffsetColumn, table.SourceBatchColumn, ChangeTimeColumn, ChangeLSNColumn}

// changesTarget is a store with table events and its dead-letter table.
func changesTarget(t *testing.T) (Target, *table.Table, *table.Table) {
	t.Helper()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tb, err := s.Table(table.Config{Name: "events"})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	return Target{Store: s, Table: tb, DeadLetters: dl}, tb, dl
}

// readAll is every row of tb with columns (nil: the visible ones), by
// their source offset.
func readAll(t *testing.T, tb *table.Table, columns []string) map[int64]table.Row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows := map[int64]table.Row{}
	i := int64(-1)
	if columns != nil {
		// Only the columns some row has: the query refuses others.
		have := map[string]bool{}
		for _, c := range tb.Schema() {
			have[c.Name] = true
		}
		columns = slices.DeleteFunc(slices.Clone(columns), func(c string) bool { return !have[c] })
	}
	if err := tb.Query(ctx, table.Query{Columns: columns}, func(r table.Row) error {
		off, ok := r[table.SourceOffsetColumn].(int64)
		if !ok {
			off = i
			i--
		}
		rows[off] = maps.Clone(r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// storeRecords stores records (offsets from 0) of topic t partition 0
// through k as one fetch.
func storeRecords(t *testing.T, k *Kafka, recs []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := kgo.FetchTopicPartition{Topic: "t", FetchPartition: kgo.FetchPartition{Partition: 0}}
	for i, r := range recs {
		r.Topic, r.Partition, r.Offset = "t", 0, int64(i)
		p.Records = append(p.Records, r)
	}
	if err := k.storePartition(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// TestDebeziumJSONWriter: Debezium JSON events through the Kafka source's
// writer (each path: by column, and by maps when a message is a dead
// letter) become rows with the operation, the key, the source offset and
// the Debezium position; malformed events are dead letters naming the
// message and why; a tombstone deletes its message key.
func TestDebeziumJSONWriter(t *testing.T) {
	for _, byColumn := range []bool{true, false} {
		t.Run(fmt.Sprint("byColumn=", byColumn), func(t *testing.T) {
			target, tb, dl := changesTarget(t)
			target.SourceColumns = true
			k, err := NewKafka(target, "events", KafkaOptions{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g",
				Changes: &Changes{Format: ChangesDebezium, KeyColumn: "id"}})
			if err != nil {
				t.Fatal(err)
			}
			k.w.mapsOnly = !byColumn
			good := []*kgo.Record{
				{Key: []byte(`{"id":1}`), Value: []byte(`{"schema":{"type":"struct"},"payload":{"before":null,"after":{"id":1,"name":"a"},"op":"c","source":{"ts_ms":1700000000001,"lsn":101},"ts_ms":1700000000100}}`)},
				{Key: []byte(`{"id":1}`), Value: []byte(`{"before":{"id":1,"name":"a"},"after":{"id":1,"name":"b"},"op":"u","source":{"ts_ms":1700000000002,"lsn":102}}`)},
				{Key: []byte(`{"id":2}`), Value: []byte(`{"after":{"id":2,"name":"c"},"op":"r","ts_ms":1700000000003}`)},
				{Key: []byte(`{"id":1}`), Value: []byte(`{"before":{"id":1,"name":"b"},"after":null,"op":"d","source":{"ts_ms":1700000000004,"lsn":104}}`)},
				{Key: []byte(`{"schema":{"type":"struct"},"payload":{"id":2}}`), Value: []byte(`{"before":null,"after":null,"op":"d","source":{"ts_ms":1700000000005}}`)},
				{Key: []byte(`3`), Value: nil}, // a tombstone, its scalar key the id
			}
			storeRecords(t, k, good)
			rows := readAll(t, tb, changeColumns)
			want := map[int64]table.Row{
				0: {"id": int64(1), "name": "a", ChangeTimeColumn: int64(1700000000001), ChangeLSNColumn: int64(101)},
				1: {"id": int64(1), "name": "b", ChangeTimeColumn: int64(1700000000002), ChangeLSNColumn: int64(102)},
				2: {"id": int64(2), "name": "c", ChangeTimeColumn: int64(1700000000003)},
				3: {"id": int64(1), "name": "b", table.OperationColumn: table.OperationDelete, ChangeTimeColumn: int64(1700000000004), ChangeLSNColumn: int64(104)},
				4: {"id": int64(2), table.OperationColumn: table.OperationDelete, ChangeTimeColumn: int64(1700000000005)},
				5: {"id": int64(3), table.OperationColumn: table.OperationDelete},
			}
			checkChangeRows(t, rows, want, "kafka/t/0/"+fmt.Sprintf("%x", make([]byte, 8))+"@0-6")
			if n := len(readAll(t, dl, nil)); n != 0 {
				t.Fatalf("%d dead letters, want none", n)
			}
		})
	}
}

// TestDebeziumJSONDeadLetters: events that cannot be applied are dead
// letters naming topic, partition, offset and the reason, and keep the
// body as sent; the good events of the same batch are stored.
func TestDebeziumJSONDeadLetters(t *testing.T) {
	target, tb, dl := changesTarget(t)
	target.SourceColumns = true
	k, err := NewKafka(target, "events", KafkaOptions{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g",
		Changes: &Changes{Format: ChangesDebezium}})
	if err != nil {
		t.Fatal(err)
	}
	bad := []*kgo.Record{
		{Value: []byte(`{"before":null,"after":null,"op":"d"}`)},                      // a delete without before and without key
		{Key: []byte(`{"id":9}`), Value: []byte(`{"after":{"id":9},"op":"x"}`)},       // an unknown op
		{Key: []byte(`{"id":9}`), Value: []byte(`{"op":"t","source":{"ts_ms":1}}`)},   // a truncate
		{Key: []byte(`{"id":9}`), Value: []byte(`{"id":9,"name":"not an envelope"}`)}, // no op
		{Key: []byte(`{"id":9}`), Value: []byte(`{"op":"u","after":null}`)},           // an update without after
		{Value: nil},                   // a tombstone without a key
		{Key: []byte(`7`), Value: nil}, // a scalar key and no key column
		{Key: []byte(`{"id":8}`), Value: []byte(`{"after":{"id":8,"name":"kept"},"op":"c"}`)},
	}
	storeRecords(t, k, bad)
	rows := readAll(t, tb, changeColumns)
	if len(rows) != 1 || rows[7]["name"] != "kept" {
		t.Fatalf("rows %v: want only offset 7's", rows)
	}
	var dead []table.Row
	if err := dl.Query(context.Background(), table.Query{}, func(r table.Row) error { dead = append(dead, maps.Clone(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, d := range dead {
		reasons[d["origin"].(string)] = d["error"].(string)
		if f := d["format"]; f != "changes:debezium" {
			t.Errorf("dead letter %v: format %v, want changes:debezium (not replayable as a row)", d, f)
		}
	}
	for off, want := range []string{"no key to delete", `unknown op "x"`, "truncate events are not applied", "no op field", `op "u" without an after object`,
		"tombstone: no key to delete", "no key column is set for a scalar key"} {
		origin := fmt.Sprintf("kafka t/0@%d", off)
		if got, ok := reasons[origin]; !ok || !strings.Contains(got, want) {
			t.Errorf("dead letter of %s: %q, want one containing %q (all: %v)", origin, got, want, reasons)
		}
	}
	for _, d := range dead {
		if d["origin"] == "kafka t/0@1" && d["row"] != `{"after":{"id":9},"op":"x"}` {
			t.Errorf("dead letter %v: want the body as sent", d)
		}
	}
}

// TestOperationFieldWriter: plain rows whose op column names the
// operation: the configured values delete (a number compared by its
// text), anything else or no op upserts, and the op column is not stored;
// a tombstone still deletes its key. TestTombstonesWriter below is the
// same source with format tombstones.
func TestOperationFieldWriter(t *testing.T) {
	target, tb, _ := changesTarget(t)
	target.SourceColumns = true
	k, err := NewKafka(target, "events", KafkaOptions{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g",
		Changes: &Changes{Format: ChangesField, Field: "op", Delete: []string{"D", "2"}}})
	if err != nil {
		t.Fatal(err)
	}
	storeRecords(t, k, []*kgo.Record{
		{Value: []byte(`{"id":1,"name":"a","op":"I"}`)},
		{Value: []byte(`{"id":1,"op":"D"}`)},
		{Value: []byte(`{"id":2,"name":"b"}`)},
		{Value: []byte(`{"id":2,"op":2}`)},
		{Key: []byte(`{"id":3}`), Value: nil},
	})
	rows := readAll(t, tb, append(changeColumns, "op"))
	want := map[int64]table.Row{
		0: {"id": int64(1), "name": "a"},
		1: {"id": int64(1), table.OperationColumn: table.OperationDelete},
		2: {"id": int64(2), "name": "b"},
		3: {"id": int64(2), table.OperationColumn: table.OperationDelete},
		4: {"id": int64(3), table.OperationColumn: table.OperationDelete},
	}
	checkChangeRows(t, rows, want, "")
}

// TestTombstonesWriter: format tombstones: rows are upserts (an op column
// is a column like any other), a null value deletes its key.
func TestTombstonesWriter(t *testing.T) {
	target, tb, _ := changesTarget(t)
	target.SourceColumns = true
	k, err := NewKafka(target, "events", KafkaOptions{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g",
		Changes: &Changes{Format: ChangesTombstones, KeyColumn: "name"}})
	if err != nil {
		t.Fatal(err)
	}
	storeRecords(t, k, []*kgo.Record{
		{Key: []byte("a"), Value: []byte(`{"id":1,"name":"a"}`)},
		{Key: []byte("a"), Value: nil},
		{Key: []byte(`"b"`), Value: []byte{}},
	})
	rows := readAll(t, tb, changeColumns)
	want := map[int64]table.Row{
		0: {"id": int64(1), "name": "a"},
		1: {"name": "a", table.OperationColumn: table.OperationDelete},
		2: {"name": "b", table.OperationColumn: table.OperationDelete},
	}
	checkChangeRows(t, rows, want, "")
}

// checkChangeRows compares rows (by source offset) with want, ignoring the
// source columns but for batch (when not empty) and a null cell.
func checkChangeRows(t *testing.T, rows, want map[int64]table.Row, batch string) {
	t.Helper()
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %v", len(rows), len(want), rows)
	}
	for off, w := range want {
		got := rows[off]
		if got == nil {
			t.Errorf("offset %d: no row, want %v", off, w)
			continue
		}
		if batch != "" && got[table.SourceBatchColumn] != batch {
			t.Errorf("offset %d: batch %v, want %s", off, got[table.SourceBatchColumn], batch)
		}
		for c, v := range got {
			if c == table.SourceOffsetColumn || c == table.SourceBatchColumn || v == nil {
				continue
			}
			if w[c] != v {
				t.Errorf("offset %d: %s = %#v, want %#v (row %v)", off, c, v, w[c], got)
			}
		}
		for c, v := range w {
			if got[c] != v {
				t.Errorf("offset %d: %s = %#v, want %#v (row %v)", off, c, got[c], v, got)
			}
		}
	}
}

// TestChangeDeadLetterKeepsEnvelope: a Debezium event whose row the table
// refuses (a value that does not fit the static schema) is a dead letter
// that keeps the event as the source sent it, not the row sluice took
// from it, in the change format replay keeps.
func TestChangeDeadLetterKeepsEnvelope(t *testing.T) {
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "events", Columns: []table.Column{{Name: "time", Type: table.Timestamp}, {Name: "id", Type: table.Int64}, {Name: "name", Type: table.String}}})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKafka(Target{Store: s, Table: tb, DeadLetters: dl, SourceColumns: true, Policy: ingest.Reject}, "events",
		KafkaOptions{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g", Changes: &Changes{Format: ChangesDebezium}})
	if err != nil {
		t.Fatal(err)
	}
	event := `{"before":null,"after":{"id":"not a number","name":"x"},"op":"c"}`
	storeRecords(t, k, []*kgo.Record{
		{Value: []byte(`{"after":{"id":1,"name":"a"},"op":"c"}`)},
		{Value: []byte(event)},
	})
	if rows := readAll(t, tb, changeColumns); len(rows) != 1 || rows[0]["id"] != int64(1) {
		t.Fatalf("rows %v: want offset 0's only", rows)
	}
	dead := readAll(t, dl, nil)
	if len(dead) != 1 {
		t.Fatalf("dead letters %v: want one", dead)
	}
	for _, d := range dead {
		if d["row"] != event || d["format"] != FormatChanges+ChangesDebezium || d["origin"] != "kafka t/0@1" {
			t.Errorf("dead letter %v: want row %s, format %s, origin kafka t/0@1", d, event, FormatChanges+ChangesDebezium)
		}
	}
}

// debeziumAvroEnvelope and debeziumAvroKey are a Debezium table's value and
// key schemas as its Avro converter registers them (the fields sluice
// reads).
const (
	debeziumAvroEnvelope = `{"type":"record","name":"Envelope","namespace":"db.public.t","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[{"name":"id","type":"int"},{"name":"name","type":["null","string"],"default":null}]}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"source","type":{"type":"record","name":"Source","fields":[{"name":"ts_ms","type":"long"},{"name":"lsn","type":["null","long"],"default":null}]}},
 {"name":"op","type":"string"},
 {"name":"ts_ms","type":["null","long"],"default":null}]}`
	debeziumAvroKey = `{"type":"record","name":"Key","namespace":"db.public.t","fields":[{"name":"id","type":"int"}]}`
)

// TestDebeziumAvroKeys: Avro envelopes and keys in the registry's wire
// format (encoded by twmb/avro, served by a registry over HTTP): a delete
// without before and a tombstone take their key from the Avro key record;
// a key that is not in the wire format is read as JSON.
func TestDebeziumAvroKeys(t *testing.T) {
	reg, err := testregistry.Start(testregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	valueID := reg.Register("t-value", testregistry.Schema{Schema: debeziumAvroEnvelope})
	keyID := reg.Register("t-key", testregistry.Schema{Schema: debeziumAvroKey})
	enc := func(id int, schema string, v map[string]any) []byte {
		b, err := avro.MustParse(schema).Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), b...)
	}
	key := func(id int) []byte { return enc(keyID, debeziumAvroKey, map[string]any{"id": int32(id)}) }
	event := func(op string, before, after map[string]any, ms int64) []byte {
		return enc(valueID, debeziumAvroEnvelope, map[string]any{"before": before, "after": after, "source": map[string]any{"ts_ms": ms, "lsn": ms * 10}, "op": op, "ts_ms": nil})
	}
	target, tb, dl := changesTarget(t)
	target.SourceColumns = true
	k, err := NewKafka(target, "events", KafkaOptions{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g", Format: FormatAvro,
		SchemaRegistry: schemaformat.Registry{URLs: []string{reg.URL}}, Changes: &Changes{Format: ChangesDebezium}})
	if err != nil {
		t.Fatal(err)
	}
	storeRecords(t, k, []*kgo.Record{
		{Key: key(1), Value: event("c", nil, map[string]any{"id": int32(1), "name": "a"}, 11)},
		{Key: key(1), Value: event("d", nil, nil, 12)},
		{Key: key(2), Value: nil},
		{Key: []byte(`{"id":3}`), Value: nil},
		{Value: event("d", nil, nil, 13)},
	})
	rows := readAll(t, tb, changeColumns)
	want := map[int64]table.Row{
		0: {"id": int64(1), "name": "a", ChangeTimeColumn: int64(11), ChangeLSNColumn: int64(110)},
		1: {"id": int64(1), table.OperationColumn: table.OperationDelete, ChangeTimeColumn: int64(12), ChangeLSNColumn: int64(120)},
		2: {"id": int64(2), table.OperationColumn: table.OperationDelete},
		3: {"id": int64(3), table.OperationColumn: table.OperationDelete},
	}
	checkChangeRows(t, rows, want, "")
	dead := readAll(t, dl, nil)
	if len(dead) != 1 {
		t.Fatalf("dead letters %v: want the delete without before nor key", dead)
	}
	for _, d := range dead {
		if d["origin"] != "kafka t/0@4" || !strings.Contains(d["error"].(string), "no key to delete") {
			t.Errorf("dead letter %v: want offset 4's, no key to delete", d)
		}
	}
}
