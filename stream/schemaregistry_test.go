package stream_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testregistry"
)

// avroV1 and avroV2 are two versions of a topic's value schema: v2 adds a
// field. Together they hold every Avro type and the logical types.
const avroV1 = `{"type":"record","name":"Event","namespace":"sluice.test","fields":[
 {"name":"id","type":"long"},
 {"name":"user","type":"string"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tu","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"n32","type":"int"},
 {"name":"f32","type":"float"},
 {"name":"f64","type":"double"},
 {"name":"ok","type":"boolean"},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CLICK","VIEW"]}},
 {"name":"raw","type":"bytes"},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"tod","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"opt","type":["null","string"],"default":null},
 {"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":"int"},
   {"name":"since","type":{"type":"long","logicalType":"timestamp-millis"}}]}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"long"}}
]}`

var avroV2 = strings.Replace(avroV1, `{"name":"user","type":"string"},`,
	`{"name":"user","type":"string"},{"name":"note","type":["null","string"],"default":null},`, 1)

// avroRecord is a record of both versions (v2 with note) as the Python
// serializer takes it.
func avroRecord(id int, note string) string {
	r := fmt.Sprintf(`{"id": %d, "user": "u%d", "ts": datetime(2026, 3, 1, 10, 0, %d, 123000, tzinfo=timezone.utc),
 "tu": datetime(2026, 3, 1, 10, 0, 0, %d, tzinfo=timezone.utc), "n32": -%d, "f32": 0.1, "f64": %d.25, "ok": %s,
 "kind": "VIEW", "raw": b"\x00\xffhi", "day": date(2026, 2, %d), "tod": time(13, 14, 15, 678000),
 "price": Decimal("1234567.%02d"), "uid": UUID("123e4567-e89b-12d3-a456-4266141740%02d"), "opt": %s,
 "addr": {"city": "Zürich", "zip": 8000, "since": datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc)},
 "tags": ["a", "b%d"], "attrs": {"k": %d}`,
		id, id%3, id, 100+id, id, id, map[bool]string{true: "True", false: "False"}[id%2 == 0], 1+id,
		id, id, map[bool]string{true: `"set"`, false: "None"}[id%2 == 1], id, 1<<40+id)
	if note != "" {
		r += fmt.Sprintf(`, "note": %q`, note)
	}
	return r + "}"
}

// wantAvro is the row of avroRecord(id, note) as the query answers it
// (NDJSON): docs/streams.md's type mapping.
func wantAvro(id int, note string) map[string]any {
	want := map[string]any{
		"id": float64(id), "user": fmt.Sprintf("u%d", id%3),
		"ts":  fmt.Sprintf("2026-03-01T10:00:%02d.123Z", id),
		"tu":  time.Date(2026, 3, 1, 10, 0, 0, (100+id)*1000, time.UTC).Format(time.RFC3339Nano),
		"n32": float64(-id), "f32": 0.1, "f64": float64(id) + 0.25, "ok": id%2 == 0,
		"kind": "VIEW", "raw": "AP9oaQ==", "day": fmt.Sprintf("2026-02-%02d", 1+id),
		"tod":   "13:14:15.678000",
		"price": 1234567 + float64(id)/100, "uid": fmt.Sprintf("123e4567-e89b-12d3-a456-4266141740%02d", id),
		"opt":  nil,
		"addr": map[string]any{"city": "Zürich", "zip": float64(8000), "since": "2020-01-02T03:04:05Z"},
		"tags": []any{"a", fmt.Sprintf("b%d", id)}, "attrs": map[string]any{"k": float64(1<<40 + id)},
	}
	if id%2 == 1 {
		want["opt"] = "set"
	}
	if note != "" {
		want["note"] = note
	}
	return want
}

// registryConfig is a server config with one table consuming topic in
// format, its schemas in the registry at url; auth is a YAML flow
// mapping's extra entries of schema_registry.
func registryConfig(topic, format, url, auth string) string {
	return fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: g-%s
          session_timeout: 6s
          format: %s
          schema_registry: {urls: [%s]%s}
`, kafkaAddr, topic, topic, format, url, auth)
}

// queryRows is every row of a node's table by its query API (NDJSON),
// decoded as JSON, by id.
func queryRows(t *testing.T, nd *node, tableName string) map[int]map[string]any {
	t.Helper()
	resp, err := http.Get(nd.URL + "/v1/tables/" + tableName + "/query?format=ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query %s: %s", tableName, resp.Status)
	}
	rows := map[int]map[string]any{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	i := 0
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("row %s: %v", sc.Bytes(), err)
		}
		id, ok := r["id"].(float64)
		if !ok {
			id = float64(-1 - i) // dead letters have no id
		}
		rows[int(id)] = r
		i++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// jsonEqual compares a query's value with a wanted one; JSON columns come
// back as the JSON text the column holds or as the value itself.
func jsonEqual(got, want any) bool {
	if s, ok := got.(string); ok {
		if _, wantText := want.(string); !wantText {
			var v any
			if json.Unmarshal([]byte(s), &v) == nil {
				got = v
			}
		}
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return string(g) == string(w)
}

// countDeadLetters counts the rows of a node's events_deadletter table
// (-1: the query failed).
func countDeadLetters(nd *node) int {
	resp, err := http.Get(nd.URL + "/v1/tables/events_deadletter/query?columns=origin&format=ndjson")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	n := 0
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if len(sc.Bytes()) > 0 {
			n++
		}
	}
	return n
}

func waitDeadLetters(t *testing.T, nd *node, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for countDeadLetters(nd) < want {
		if time.Now().After(deadline) {
			t.Fatalf("events_deadletter holds %d rows, want %d after %v: %s", countDeadLetters(nd), want, timeout, nd.Tail())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func startRegistry(t *testing.T, o testregistry.Options) *testregistry.Registry {
	t.Helper()
	reg, err := testregistry.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

// TestKafkaAvroFromRegistry: Avro messages written by Confluent's
// serializer through Apicurio Registry (a real registry server), two
// schema versions (the second adds a field) and corrupt
// messages (a bad magic byte, an unknown schema id, a truncated body):
// every value of every good message is read back by the query with its
// documented type, the added field becomes a column without a restart,
// and each corrupt message is a dead letter naming why.
func TestKafkaAvroFromRegistry(t *testing.T) {
	t.Parallel()
	broker(t)
	py := testregistry.RequirePython(t)
	reg := apicurio.Require(t)
	topic := uniqueName("avro")
	createTopic(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	po := testregistry.ProduceOptions{Brokers: kafkaAddr, Topic: topic, Registry: reg.URL}
	v1 := testregistry.Batch{Format: "avro", Schema: avroV1}
	for id := range 4 {
		v1.Records = append(v1.Records, avroRecord(id, ""))
	}
	if err := testregistry.Produce(ctx, py, po, v1); err != nil {
		t.Fatal(err)
	}
	id1, err := reg.SchemaID(ctx, topic+"-value", 1)
	if err != nil {
		t.Fatal(err)
	}
	mark := reg.LogSize()
	nd := startNode(t, registryConfig(topic, "avro", reg.URL, ""), filepath.Join(t.TempDir(), "node"))
	waitRows(t, nd, "events", 4, time.Minute)

	// A second version adds note while the node runs; then corrupt
	// messages: framing, an id the registry never gave, a body of v1 cut
	// short.
	v2 := testregistry.Batch{Format: "avro", Schema: avroV2}
	for id := 4; id < 6; id++ {
		v2.Records = append(v2.Records, avroRecord(id, fmt.Sprintf("note %d", id)))
	}
	corrupt := testregistry.Batch{Raw: [][]byte{
		{1, 0, 0, 0, 1, 2},
		{0, 0, 0, 0x27, 0x0f, 2, 4},
		append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id1)), 2),
	}}
	if err := testregistry.Produce(ctx, py, po, v2, corrupt); err != nil {
		t.Fatal(err)
	}
	id2, err := reg.SchemaID(ctx, topic+"-value", 2)
	if err != nil {
		t.Fatal(err)
	}
	waitRows(t, nd, "events", 6, time.Minute)
	waitDeadLetters(t, nd, 3, time.Minute)

	rows := queryRows(t, nd, "events")
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6: %v", len(rows), rows)
	}
	for id := range 6 {
		note := ""
		if id >= 4 {
			note = fmt.Sprintf("note %d", id)
		}
		want, got := wantAvro(id, note), rows[id]
		for k, w := range want {
			if !jsonEqual(got[k], w) {
				t.Errorf("id %d: %s = %#v, want %#v", id, k, got[k], w)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok && v != nil {
				t.Errorf("id %d: column %s = %#v, not in the message", id, k, v)
			}
		}
	}
	// The logical types land as native columns (a new table), each shown
	// in NDJSON as its text (a decimal as an exact JSON number).
	wantTypes := map[string]string{"raw": "bytes", "day": "date", "tod": "time_of_day", "price": "decimal(18,2)", "uid": "uuid"}
	if got := columnTypes(t, nd, "events"); !mapsHave(got, wantTypes) {
		t.Errorf("column types %v, want %v among them", got, wantTypes)
	}
	dead := queryRows(t, nd, "events_deadletter")
	var reasons []string
	for _, d := range dead {
		reasons = append(reasons, fmt.Sprint(d["error"]))
		if o, _ := d["origin"].(string); !strings.HasPrefix(o, "kafka "+topic+"/") {
			t.Errorf("dead letter %v: origin %q is not the message's topic/partition@offset", d, o)
		}
	}
	slices.Sort(reasons)
	for i, want := range []string{"body does not match its schema", "not in the schema registry wire format: magic byte 0x1", "unknown schema: schema id 9999"} {
		if i >= len(reasons) || !strings.Contains(reasons[i], want) {
			t.Errorf("dead letters' reasons %q: want one containing %q", reasons, want)
		}
	}
	if n := reg.Requests(mark, fmt.Sprintf("/schemas/ids/%d", id1)) + reg.Requests(mark, fmt.Sprintf("/schemas/ids/%d", id2)); n != 2 {
		t.Errorf("the registry was asked for schemas %d and %d %d times, want 2 (cached by id)", id1, id2, n)
	}
}

// TestKafkaJSONSchemaFromRegistry: JSON Schema messages by Confluent's
// serializer: a number property stays float64 when a value has no
// fraction, an integer one is int64, a date-time string a timestamp, an
// object a JSON column.
func TestKafkaJSONSchemaFromRegistry(t *testing.T) {
	t.Parallel()
	broker(t)
	py := testregistry.RequirePython(t)
	reg := startRegistry(t, testregistry.Options{Username: "sr-user", Password: "sr-pass"})
	topic := uniqueName("jsonschema")
	createTopic(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	schema := `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Event","type":"object","properties":{
 "id":{"type":"integer"},"user":{"type":"string"},"amount":{"type":"number"},"at":{"type":"string","format":"date-time"},
 "ok":{"type":["boolean","null"]},"meta":{"type":"object"}},"required":["id","user"]}`
	b := testregistry.Batch{Format: "json_schema", Schema: schema}
	for id := range 3 {
		b.Records = append(b.Records, fmt.Sprintf(`{"id": %d, "user": "u%d", "amount": %d, "at": "2026-03-01T10:00:0%d.5Z", "ok": %s, "meta": {"a": [1, {"b": "c"}]}}`,
			id, id, 10+id, id, map[bool]string{true: "True", false: "None"}[id == 0]))
	}
	po := testregistry.ProduceOptions{Brokers: kafkaAddr, Topic: topic, Registry: reg.URL, Username: "sr-user", Password: "sr-pass"}
	if err := testregistry.Produce(ctx, py, po, b); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pw := filepath.Join(dir, "registry-password")
	if err := os.WriteFile(pw, []byte("sr-pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nd := startNode(t, registryConfig(topic, "json_schema", reg.URL, fmt.Sprintf(", username: sr-user, password: {file: %q}", pw)), filepath.Join(dir, "node"))
	waitRows(t, nd, "events", 3, time.Minute)
	rows := queryRows(t, nd, "events")
	for id := range 3 {
		var ok any
		if id == 0 {
			ok = true
		}
		want := map[string]any{"id": float64(id), "user": fmt.Sprintf("u%d", id), "amount": float64(10 + id),
			"at": fmt.Sprintf("2026-03-01T10:00:0%d.5Z", id), "ok": ok, "meta": map[string]any{"a": []any{1, map[string]any{"b": "c"}}}}
		for k, w := range want {
			if !jsonEqual(rows[id][k], w) {
				t.Errorf("id %d: %s = %#v, want %#v", id, k, rows[id][k], w)
			}
		}
	}
	// The column types the schema gave: amount's values have no fraction.
	resp, err := http.Get(nd.URL + "/v1/tables/events/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct{ Columns []struct{ Name, Type string } }
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, c := range s.Columns {
		types[c.Name] = c.Type
	}
	for col, want := range map[string]string{"id": "int64", "amount": "float64", "at": "timestamp", "ok": "bool", "meta": "json", "user": "string"} {
		if types[col] != want {
			t.Errorf("column %s is %q, want %s (all: %v)", col, types[col], want, types)
		}
	}
}

// TestKafkaRegistryDownPauses: while the registry answers 503 nothing is
// stored and nothing is a dead letter; /readyz and the log name the
// registry; once it is back every message is stored. The registry is the
// Go one (its down switch), with a bearer token read from the environment.
func TestKafkaRegistryDownPauses(t *testing.T) {
	t.Parallel()
	broker(t)
	py := testregistry.RequirePython(t)
	reg := startRegistry(t, testregistry.Options{Token: "reg-token-for-tests"})
	topic := uniqueName("regdown")
	createTopic(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := testregistry.Batch{Format: "avro", Schema: avroV1}
	for id := range 20 {
		b.Records = append(b.Records, avroRecord(id%10, ""))
	}
	po := testregistry.ProduceOptions{Brokers: kafkaAddr, Topic: topic, Registry: reg.URL, Token: "reg-token-for-tests"}
	if err := testregistry.Produce(ctx, py, po, b); err != nil {
		t.Fatal(err)
	}
	reg.SetDown(true)
	nd := startNodeEnv(t, registryConfig(topic, "avro", reg.URL, ", token: {env: SLUICE_TEST_REGISTRY_TOKEN}"), filepath.Join(t.TempDir(), "node"),
		[]string{"SLUICE_TEST_REGISTRY_TOKEN=reg-token-for-tests"})
	waitNotReady(t, nd, "schema registry unavailable", time.Minute)
	if n := countRows(nd, "events"); n > 0 {
		t.Fatalf("%d rows stored while the registry was down", n)
	}
	if logCount(t, nd, "schema registry unavailable") == 0 {
		t.Errorf("the log does not name the registry: %s", nd.Tail())
	}
	reg.SetDown(false)
	waitRows(t, nd, "events", 20, time.Minute)
	if n := countDeadLetters(nd); n > 0 {
		t.Errorf("%d dead letters: a registry that was down must not drop messages", n)
	}
}

// protoSchema's Order is the file's second message (message index [1]), with
// a nested message, an enum, well-known types, google.type's Date and
// TimeOfDay (the registry never holds their files), optional, repeated and
// map fields.
const protoSchema = `syntax = "proto3";
package sluice.test;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/type/date.proto";
import "google/type/timeofday.proto";
message Other { string x = 1; }
message Order {
  int64 id = 1;
  string user = 2;
  google.protobuf.Timestamp ts = 3;
  int32 n32 = 4;
  uint64 u64 = 5;
  float f32 = 6;
  double f64 = 7;
  bool ok = 8;
  Kind kind = 9;
  bytes raw = 10;
  optional string opt = 11;
  google.protobuf.StringValue wrapped = 12;
  Addr addr = 13;
  repeated string tags = 14;
  map<string, int64> attrs = 15;
  google.type.Date day = 16;
  google.type.TimeOfDay tod = 17;
  google.type.Date birthday = 18;
  message Addr { string city = 1; int32 zip = 2; google.protobuf.Timestamp since = 3; google.type.Date opened = 4; google.type.TimeOfDay opens = 5; }
  enum Kind { CLICK = 0; VIEW = 1; }
}
`

// TestKafkaProtobufFromRegistry: Protobuf messages by Confluent's
// serializer through Apicurio Registry (message indexes, the schema registered as a descriptor):
// every field's value is read back with its documented type, google.type's
// Date and TimeOfDay as date and time_of_day columns (text inside a nested
// message, a partial date its fields) both in messages dynamicpb decodes
// and in one read from the wire; a message whose indexes name no message
// type is a dead letter.
func TestKafkaProtobufFromRegistry(t *testing.T) {
	t.Parallel()
	broker(t)
	py := testregistry.RequirePython(t)
	reg := apicurio.Require(t)
	topic := uniqueName("protobuf")
	createTopic(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := testregistry.Batch{Format: "protobuf", Schema: protoSchema, Message: "Order"}
	for id := range 3 {
		opt, wrapped := "", ""
		if id == 1 {
			opt, wrapped = `, opt="set"`, `, wrapped=StringValue(value="w")`
		}
		b.Records = append(b.Records, fmt.Sprintf(`Order(id=%d, user="u%d", ts=Timestamp(seconds=%d, nanos=123000000), n32=-%d, u64=%d,
 f32=0.1, f64=%d.25, ok=%s, kind=Order.VIEW, raw=b"\x00\xffhi"%s%s,
 addr=Order.Addr(city="Zürich", zip=8000, since=Timestamp(seconds=1577934245), opened=Date(year=2020, month=1, day=2), opens=TimeOfDay(hours=9)),
 tags=["a", "b%d"], attrs={"k": %d}, day=Date(year=2026, month=2, day=%d), tod=TimeOfDay(hours=13, minutes=14, seconds=15, nanos=%d),
 birthday=Date(month=12, day=%d))`,
			id, id, t0.Unix()+int64(id), id, uint64(1)<<62+uint64(id), id, map[bool]string{true: "True", false: "False"}[id%2 == 0], opt, wrapped, id, 1<<40+id,
			1+id, 678000000+id*1000, 20+id))
	}
	// Scalars, a Date and a TimeOfDay only: decoded from the wire (the
	// messages above, with nested, repeated and map fields, go through
	// dynamicpb).
	b.Records = append(b.Records, fmt.Sprintf(`Order(id=3, user="u3", ts=Timestamp(seconds=%d, nanos=123000000),
 day=Date(year=1969, month=12, day=31), tod=TimeOfDay(hours=23, minutes=59, seconds=59, nanos=999999000))`, t0.Unix()+3))
	po := testregistry.ProduceOptions{Brokers: kafkaAddr, Topic: topic, Registry: reg.URL}
	if err := testregistry.Produce(ctx, py, po, b); err != nil {
		t.Fatal(err)
	}
	// A frame of the schema whose message indexes [5] name no message.
	id, err := reg.SchemaID(ctx, topic+"-value", 1)
	if err != nil {
		t.Fatal(err)
	}
	frame := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), 2, 10, 8, 1)
	if err := testregistry.Produce(ctx, py, po, testregistry.Batch{Raw: [][]byte{frame}}); err != nil {
		t.Fatal(err)
	}
	nd := startNode(t, registryConfig(topic, "protobuf", reg.URL, ""), filepath.Join(t.TempDir(), "node"))
	waitRows(t, nd, "events", 4, time.Minute)
	waitDeadLetters(t, nd, 1, time.Minute)
	rows := queryRows(t, nd, "events")
	for id := range 4 {
		want := map[string]any{
			"id": float64(id), "user": fmt.Sprintf("u%d", id),
			"ts":  t0.Add(time.Duration(id)*time.Second + 123*time.Millisecond).Format(time.RFC3339Nano),
			"n32": float64(-id), "u64": float64(uint64(1)<<62 + uint64(id)), "f32": 0.1, "f64": float64(id) + 0.25, "ok": id%2 == 0,
			"kind": "VIEW", "raw": "AP9oaQ==", "opt": nil, "wrapped": nil,
			"addr": map[string]any{"city": "Zürich", "zip": float64(8000), "since": "2020-01-02T03:04:05Z", "opened": "2020-01-02", "opens": "09:00:00.000000"},
			"tags": []any{"a", fmt.Sprintf("b%d", id)}, "attrs": map[string]any{"k": float64(1<<40 + id)},
			// A partial date (no year) keeps its fields.
			"day": fmt.Sprintf("2026-02-%02d", 1+id), "tod": fmt.Sprintf("13:14:15.678%03d", id), "birthday": map[string]any{"month": 12, "day": 20 + id},
		}
		switch id {
		case 1:
			want["opt"], want["wrapped"] = "set", "w"
		case 3: // proto3's zero values where the message sets nothing
			want = map[string]any{"id": float64(3), "user": "u3", "ts": want["ts"], "n32": 0, "u64": 0, "f32": 0, "f64": 0, "ok": false,
				"kind": "CLICK", "raw": "", "opt": nil, "wrapped": nil, "addr": nil, "tags": []any{}, "attrs": map[string]any{},
				"day": "1969-12-31", "tod": "23:59:59.999999", "birthday": nil}
		}
		for k, w := range want {
			if !jsonEqual(rows[id][k], w) {
				t.Errorf("id %d: %s = %#v, want %#v", id, k, rows[id][k], w)
			}
		}
	}
	for _, d := range queryRows(t, nd, "events_deadletter") {
		if e := fmt.Sprint(d["error"]); !strings.Contains(e, "body does not match its schema") || !strings.Contains(e, "message index") {
			t.Errorf("dead letter reason %q: want the bad message index", e)
		}
	}
	wantTypes := map[string]string{"day": "date", "tod": "time_of_day", "birthday": "json", "addr": "json"}
	if got := columnTypes(t, nd, "events"); !mapsHave(got, wantTypes) {
		t.Errorf("column types %v, want %v among them", got, wantTypes)
	}
}

// columnTypes is a table's column types as GET /v1/tables/{table} gives
// them.
func columnTypes(t *testing.T, nd *node, tableName string) map[string]string {
	t.Helper()
	resp, err := http.Get(nd.URL + "/v1/tables/" + tableName)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct {
		Schema []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"schema"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, c := range d.Schema {
		types[c.Name] = c.Type
	}
	return types
}

// mapsHave reports whether every key of want is in got with its value.
func mapsHave(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
