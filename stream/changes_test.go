package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/testregistry"
	"github.com/sluicedb/sluice/stream"
	"github.com/sluicedb/sluice/table"
)

// changesConfig is a server config with table events consuming topic as
// a change stream; source is the YAML of the kafka section's extra keys.
func changesConfig(topic, source string) string {
	return fmt.Sprintf(`tables:
  - name: events
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: g-%s
          session_timeout: 6s
%s`, kafkaAddr, topic, topic, source)
}

// wantChange is what one produced message must become: a row of key id
// (name set for an upsert) carrying its operation and Debezium time.
type wantChange struct {
	id       int
	name     string
	delete   bool
	changeMS int64
}

// changeRows are the rows of a node's events table with the operation and
// position columns, by "partition@offset" of their message.
func changeRows(t *testing.T, nd *node, debezium bool) map[string]map[string]any {
	t.Helper()
	cols := []string{"id", "name", table.OperationColumn, table.SourceBatchColumn, table.SourceOffsetColumn}
	if debezium {
		cols = append(cols, stream.ChangeTimeColumn)
	}
	resp, err := http.Get(nd.URL + "/v1/tables/events/query?format=ndjson&columns=" + strings.Join(cols, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query: %s", resp.Status)
	}
	rows := map[string]map[string]any{}
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		// The batch tag is "kafka/<topic>/<partition>/<topic id>@<first>-<end>".
		batch, _ := r[table.SourceBatchColumn].(string)
		parts := strings.Split(batch, "/")
		off, _ := r[table.SourceOffsetColumn].(float64)
		if len(parts) < 4 {
			t.Fatalf("row %v: no source batch", r)
		}
		rows[fmt.Sprintf("%s@%d", parts[2], int64(off))] = r
	}
	return rows
}

// checkChanges compares the rows of the node with what each produced
// record (its partition and offset set by the broker) must have become.
func checkChanges(t *testing.T, nd *node, recs []*kgo.Record, want []wantChange, debezium bool) {
	t.Helper()
	rows := changeRows(t, nd, debezium)
	if len(rows) != len(want) {
		t.Errorf("%d rows, want %d: %v", len(rows), len(want), rows)
	}
	for i, w := range want {
		at := fmt.Sprintf("%d@%d", recs[i].Partition, recs[i].Offset)
		r, ok := rows[at]
		if !ok {
			t.Errorf("message %s (%+v): no row", at, w)
			continue
		}
		op, _ := r[table.OperationColumn].(string)
		if r["id"] != float64(w.id) || (op == table.OperationDelete) != w.delete || (!w.delete && r["name"] != w.name) {
			t.Errorf("message %s: row %v, want %+v", at, r, w)
		}
		if w.changeMS != 0 && r[stream.ChangeTimeColumn] != float64(w.changeMS) {
			t.Errorf("message %s: %s = %v, want %d", at, stream.ChangeTimeColumn, r[stream.ChangeTimeColumn], w.changeMS)
		}
	}
}

// deadReasons are the events_deadletter rows' errors by origin.
func deadReasons(t *testing.T, nd *node) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range queryRows(t, nd, "events_deadletter") {
		out[fmt.Sprint(d["origin"])] = fmt.Sprint(d["error"])
	}
	return out
}

// TestDebeziumKafkaJSON: Debezium JSON events (with and without the
// schema/payload wrapper) keyed by their row's id, spread over four
// partitions by the real broker, and Debezium's tombstone after each
// delete: every message becomes a row with its key, its operation, its
// source partition and offset and its Debezium time; a delete without
// before takes the message key; a delete with neither, an unknown op and
// a truncate are dead letters naming topic, partition, offset and why.
func TestDebeziumKafkaJSON(t *testing.T) {
	broker(t)
	topic := uniqueName("debezium")
	createTopic(t, topic)
	nd := startNode(t, changesConfig(topic, "          changes: {format: debezium, key_column: id}\n"), filepath.Join(t.TempDir(), "node"))
	prod := newProducer(t)
	var recs []*kgo.Record
	var want []wantChange
	ms := int64(1_700_000_000_000)
	add := func(key string, value string, w wantChange) {
		var v []byte
		if value != "" {
			v = []byte(value)
		}
		var k []byte
		if key != "" {
			k = []byte(key)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: k, Value: v})
		want = append(want, w)
	}
	for id := range 12 {
		ms++
		key := fmt.Sprintf(`{"id":%d}`, id)
		if id%2 == 0 {
			key = fmt.Sprintf(`{"schema":{"type":"struct"},"payload":{"id":%d}}`, id)
		}
		add(key, fmt.Sprintf(`{"schema":{"type":"struct"},"payload":{"before":null,"after":{"id":%d,"name":"v1"},"op":"c","source":{"ts_ms":%d,"lsn":%d}}}`, id, ms, ms), wantChange{id: id, name: "v1", changeMS: ms})
		ms++
		add(key, fmt.Sprintf(`{"before":{"id":%d,"name":"v1"},"after":{"id":%d,"name":"v2"},"op":"u","source":{"ts_ms":%d}}`, id, id, ms), wantChange{id: id, name: "v2", changeMS: ms})
		if id%3 == 0 {
			ms++
			before := fmt.Sprintf(`{"id":%d,"name":"v2"}`, id)
			if id%2 == 0 {
				before = "null" // REPLICA IDENTITY without the old row: the key decides
			}
			add(key, fmt.Sprintf(`{"before":%s,"after":null,"op":"d","source":{"ts_ms":%d}}`, before, ms), wantChange{id: id, delete: true, changeMS: ms})
			add(key, "", wantChange{id: id, delete: true}) // Debezium's tombstone for compaction
		}
	}
	n := len(recs)
	add("", `{"before":null,"after":null,"op":"d","source":{"ts_ms":1}}`, wantChange{})
	add(`{"id":99}`, `{"after":{"id":99},"op":"m"}`, wantChange{})
	add(`{"id":99}`, `{"op":"t","source":{"ts_ms":1}}`, wantChange{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range recs {
		// One at a time: the broker sets each record's partition and offset.
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitRows(t, nd, "events", n, time.Minute)
	waitDeadLetters(t, nd, 3, time.Minute)
	checkChanges(t, nd, recs[:n], want[:n], true)
	reasons := deadReasons(t, nd)
	for i, reason := range []string{"op d without a before object: no key to delete", `unknown op "m"`, "truncate events are not applied"} {
		r := recs[n+i]
		origin := fmt.Sprintf("kafka %s/%d@%d", topic, r.Partition, r.Offset)
		if got := reasons[origin]; !strings.Contains(got, reason) {
			t.Errorf("dead letter of %s: %q, want one containing %q (all: %v)", origin, got, reason, reasons)
		}
	}
}

// TestOperationFieldKafka: plain JSON rows whose op column names the
// operation, through the broker: the configured values delete, others
// upsert, the op column is not stored; a tombstone deletes its key.
func TestOperationFieldKafka(t *testing.T) {
	broker(t)
	topic := uniqueName("opfield")
	createTopic(t, topic)
	nd := startNode(t, changesConfig(topic, "          changes: {format: field, field: op, delete: [D]}\n"), filepath.Join(t.TempDir(), "node"))
	prod := newProducer(t)
	var recs []*kgo.Record
	var want []wantChange
	for id := range 8 {
		op := "U"
		w := wantChange{id: id, name: "n" + strconv.Itoa(id)}
		if id%4 == 1 {
			op, w = "D", wantChange{id: id, delete: true}
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(id)), Value: fmt.Appendf(nil, `{"id":%d,"name":"n%d","op":%q}`, id, id, op)})
		want = append(want, w)
	}
	recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(`{"id":3}`)})
	want = append(want, wantChange{id: 3, delete: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range recs {
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitRows(t, nd, "events", len(recs), time.Minute)
	checkChanges(t, nd, recs, want, false)
	resp, err := http.Get(nd.URL + "/v1/tables/events/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var schema strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		schema.Write(sc.Bytes())
	}
	if strings.Contains(schema.String(), `"op"`) {
		t.Errorf("the op field was stored as a column: %s", schema.String())
	}
}

// debeziumAvro is a Debezium envelope's Avro schema as its Avro converter
// registers it (PostgreSQL's connector, the fields sluice reads).
const debeziumAvro = `{"type":"record","name":"Envelope","namespace":"dbserver1.public.customers","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[{"name":"id","type":"int"},{"name":"name","type":["null","string"],"default":null}]}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[
   {"name":"ts_ms","type":"long"},{"name":"lsn","type":["null","long"],"default":null}]}},
 {"name":"op","type":"string"},
 {"name":"ts_ms","type":["null","long"],"default":null}]}`

// TestDebeziumKafkaAvro: Debezium envelopes in Avro, written by Confluent's
// serializer through Apicurio Registry (a real registry), and tombstones
// keyed in JSON: each becomes a row with its key, operation and Debezium
// time; a delete without before and without key and an unknown op are dead
// letters.
func TestDebeziumKafkaAvro(t *testing.T) {
	broker(t)
	py := testregistry.RequirePython(t)
	reg := apicurio.Require(t)
	topic := uniqueName("dbzavro")
	createTopic(t, topic)
	// The bound of a failure, not of the speed: on a loaded machine the serializer (Python's imports, the registry's first requests, the flush) can take minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	batch := testregistry.Batch{Format: "avro", Schema: debeziumAvro}
	var want []wantChange
	ms := int64(1_700_000_000_000)
	for id := range 6 {
		ms++
		batch.Records = append(batch.Records, fmt.Sprintf(`{"before": None, "after": {"id": %d, "name": "v1"}, "source": {"ts_ms": %d, "lsn": %d}, "op": "c", "ts_ms": None}`, id, ms, ms))
		want = append(want, wantChange{id: id, name: "v1", changeMS: ms})
		if id%2 == 1 {
			ms++
			batch.Records = append(batch.Records, fmt.Sprintf(`{"before": {"id": %d, "name": None}, "after": None, "source": {"ts_ms": %d, "lsn": None}, "op": "d", "ts_ms": None}`, id, ms))
			want = append(want, wantChange{id: id, delete: true, changeMS: ms})
		}
	}
	n := len(batch.Records)
	batch.Records = append(batch.Records,
		`{"before": None, "after": None, "source": {"ts_ms": 1, "lsn": None}, "op": "d", "ts_ms": None}`,
		`{"before": None, "after": {"id": 7, "name": "x"}, "source": {"ts_ms": 1, "lsn": None}, "op": "z", "ts_ms": None}`)
	if err := testregistry.Produce(ctx, py, testregistry.ProduceOptions{Brokers: kafkaAddr, Topic: topic, Registry: reg.URL}, batch); err != nil {
		t.Fatal(err)
	}
	// A tombstone keyed as Debezium's JSON key converter writes it.
	prod := newProducer(t)
	tomb := &kgo.Record{Topic: topic, Key: []byte(`{"schema":{"type":"struct"},"payload":{"id":4}}`)}
	if err := prod.ProduceSync(ctx, tomb).FirstErr(); err != nil {
		t.Fatal(err)
	}
	nd := startNode(t, changesConfig(topic, fmt.Sprintf("          format: avro\n          schema_registry: {urls: [%s]}\n          changes: {format: debezium}\n", reg.URL)), filepath.Join(t.TempDir(), "node"))
	waitRows(t, nd, "events", n+1, time.Minute)
	waitDeadLetters(t, nd, 2, time.Minute)
	rows := changeRows(t, nd, true)
	if len(rows) != n+1 {
		t.Fatalf("%d rows, want %d: %v", len(rows), n+1, rows)
	}
	// The serializer's records have no key and spread over the partitions:
	// match each wanted change by its Debezium time (unique).
	byMS := map[float64]map[string]any{}
	for _, r := range rows {
		if m, ok := r[stream.ChangeTimeColumn].(float64); ok {
			byMS[m] = r
		}
	}
	for _, w := range want {
		r := byMS[float64(w.changeMS)]
		op, _ := r[table.OperationColumn].(string)
		if r == nil || r["id"] != float64(w.id) || (op == table.OperationDelete) != w.delete || (!w.delete && r["name"] != w.name) {
			t.Errorf("change %+v: row %v", w, r)
		}
	}
	if r := rows[fmt.Sprintf("%d@%d", tomb.Partition, tomb.Offset)]; r == nil || r["id"] != float64(4) || r[table.OperationColumn] != table.OperationDelete {
		t.Errorf("tombstone of id 4: row %v, want its delete", r)
	}
	var reasons []string
	for origin, reason := range deadReasons(t, nd) {
		if !strings.HasPrefix(origin, "kafka "+topic+"/") {
			t.Errorf("dead letter %q: origin is not the message's topic/partition@offset", origin)
		}
		reasons = append(reasons, reason)
	}
	all := strings.Join(reasons, "\n")
	for _, reason := range []string{"op d without a before record: no key to delete", `unknown op "z"`} {
		if !strings.Contains(all, reason) {
			t.Errorf("dead letters %q: none names %q", reasons, reason)
		}
	}
}
