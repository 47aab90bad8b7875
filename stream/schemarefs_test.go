package stream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testregistry"
)

// checkRows compares every wanted value of each id's row with the query's,
// and fails on a row missing or a column the message did not have.
func checkRows(t *testing.T, rows map[int]map[string]any, want map[int]map[string]any) {
	t.Helper()
	if len(rows) != len(want) {
		t.Errorf("%d rows, want %d: %v", len(rows), len(want), rows)
	}
	for id, w := range want {
		got, ok := rows[id]
		if !ok {
			t.Errorf("id %d: no row", id)
			continue
		}
		for k, wv := range w {
			if !jsonEqual(got[k], wv) {
				t.Errorf("id %d: %s = %#v, want %#v", id, k, got[k], wv)
			}
		}
		for k, v := range got {
			if _, ok := w[k]; !ok && v != nil {
				t.Errorf("id %d: column %s = %#v, not in the message", id, k, v)
			}
		}
	}
}

// TestKafkaAvroSchemaReferences: an Avro schema whose fields are of a
// record and an enum defined in another subject, registered with a
// Confluent reference in Apicurio Registry; Confluent's serializer writes
// with that registered version. Every value is read back by the query,
// the referenced subject asked for once.
func TestKafkaAvroSchemaReferences(t *testing.T) {
	t.Parallel()
	broker(t)
	py := testregistry.RequirePython(t)
	reg := apicurio.Require(t)
	topic := uniqueName("avroref")
	createTopic(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addrSubject := topic + "-addr"
	b := testregistry.Batch{Format: "avro",
		Schema: `{"type":"record","name":"Event","namespace":"sluice.test","fields":[
 {"name":"id","type":"long"},{"name":"user","type":"string"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"home","type":"sluice.ref.Addr"},
 {"name":"work","type":["null","sluice.ref.Addr"],"default":null},
 {"name":"kind","type":"sluice.ref.Kind"}]}`,
		References: []testregistry.Reference{{Name: "sluice.ref.Addr", Subject: addrSubject,
			Schema: `{"type":"record","name":"Addr","namespace":"sluice.ref","fields":[
 {"name":"city","type":"string"},{"name":"zip","type":"int"},
 {"name":"since","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["HOME","WORK"]}}]}`}}}
	want := map[int]map[string]any{}
	for id := range 4 {
		work, wantWork := "None", any(nil)
		if id%2 == 1 {
			work = fmt.Sprintf(`{"city": "Bern", "zip": %d, "since": datetime(2021, 5, 6, 7, 8, 9, tzinfo=timezone.utc), "kind": "WORK"}`, 3000+id)
			wantWork = map[string]any{"city": "Bern", "zip": float64(3000 + id), "since": "2021-05-06T07:08:09Z", "kind": "WORK"}
		}
		b.Records = append(b.Records, fmt.Sprintf(`{"id": %d, "user": "u%d", "ts": datetime(2026, 3, 1, 10, 0, %d, tzinfo=timezone.utc),
 "home": {"city": "Zürich", "zip": 8000, "since": datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "kind": "HOME"},
 "work": %s, "kind": "WORK"}`, id, id, id, work))
		want[id] = map[string]any{"id": float64(id), "user": fmt.Sprintf("u%d", id),
			"ts":   fmt.Sprintf("2026-03-01T10:00:%02dZ", id),
			"home": map[string]any{"city": "Zürich", "zip": float64(8000), "since": "2020-01-02T03:04:05Z", "kind": "HOME"},
			"work": wantWork, "kind": "WORK"}
	}
	po := testregistry.ProduceOptions{Brokers: kafkaAddr, Topic: topic, Registry: reg.URL}
	if err := testregistry.Produce(ctx, py, po, b); err != nil {
		t.Fatal(err)
	}
	mark := reg.LogSize()
	nd := startNode(t, registryConfig(topic, "avro", reg.URL, ""), filepath.Join(t.TempDir(), "node"))
	waitRows(t, nd, "events", 4, time.Minute)
	checkRows(t, queryRows(t, nd, "events"), want)
	if n := countDeadLetters(nd); n > 0 {
		t.Errorf("%d dead letters, want none: %v", n, queryRows(t, nd, "events_deadletter"))
	}
	if n := reg.Requests(mark, "/subjects/"+addrSubject+"/versions/1"); n != 1 {
		t.Errorf("the referenced subject was asked for %d times, want 1 (kept once fetched)", n)
	}
}

// TestKafkaProtobufSchemaReferences: a .proto that imports another file;
// Confluent's serializer registers the imported file under its own subject
// and the schema with a reference to it (both as descriptors). Every
// value, the imported message and enum types included, is read back.
func TestKafkaProtobufSchemaReferences(t *testing.T) {
	t.Parallel()
	broker(t)
	py := testregistry.RequirePython(t)
	reg := apicurio.Require(t)
	topic := uniqueName("protoref")
	createTopic(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addrSubject := topic + "-addr"
	b := testregistry.Batch{Format: "protobuf", Message: "Event",
		Schema: `syntax = "proto3";
package sluice.test;
import "google/protobuf/timestamp.proto";
import "sluiceref/addr.proto";
message Event {
  int64 id = 1;
  string user = 2;
  google.protobuf.Timestamp ts = 3;
  sluice.ref.Addr home = 4;
  repeated sluice.ref.Addr past = 5;
  sluice.ref.Kind kind = 6;
}
`,
		References: []testregistry.Reference{{Name: "sluiceref/addr.proto", Subject: addrSubject, Schema: `syntax = "proto3";
package sluice.ref;
import "google/protobuf/timestamp.proto";
enum Kind { HOME = 0; WORK = 1; }
message Addr { string city = 1; int32 zip = 2; Kind kind = 3; google.protobuf.Timestamp since = 4; }
`}}}
	want := map[int]map[string]any{}
	for id := range 3 {
		b.Records = append(b.Records, fmt.Sprintf(`Event(id=%d, user="u%d", ts=Timestamp(seconds=%d, nanos=123000000),
 home=Addr(city="Zürich", zip=8000, kind=WORK, since=Timestamp(seconds=1577934245)),
 past=[Addr(city="Bern", zip=%d, kind=WORK)], kind=WORK)`, id, id, t0.Unix()+int64(id), 3000+id))
		want[id] = map[string]any{"id": float64(id), "user": fmt.Sprintf("u%d", id),
			"ts":   t0.Add(time.Duration(id)*time.Second + 123*time.Millisecond).Format(time.RFC3339Nano),
			"home": map[string]any{"city": "Zürich", "zip": float64(8000), "kind": "WORK", "since": "2020-01-02T03:04:05Z"},
			"past": []any{map[string]any{"city": "Bern", "zip": float64(3000 + id), "kind": "WORK"}},
			"kind": "WORK"}
	}
	po := testregistry.ProduceOptions{Brokers: kafkaAddr, Topic: topic, Registry: reg.URL}
	if err := testregistry.Produce(ctx, py, po, b); err != nil {
		t.Fatal(err)
	}
	mark := reg.LogSize()
	nd := startNode(t, registryConfig(topic, "protobuf", reg.URL, ""), filepath.Join(t.TempDir(), "node"))
	waitRows(t, nd, "events", 3, time.Minute)
	checkRows(t, queryRows(t, nd, "events"), want)
	if n := countDeadLetters(nd); n > 0 {
		t.Errorf("%d dead letters, want none: %v", n, queryRows(t, nd, "events_deadletter"))
	}
	if n := reg.Requests(mark, "/subjects/"+addrSubject+"/versions/1"); n != 1 {
		t.Errorf("the referenced subject was asked for %d times, want 1 (kept once fetched)", n)
	}
}
