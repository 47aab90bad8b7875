package stream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/testregistry"
)

// formatsSchema is a JSON Schema with the string formats sluice reads as
// native columns, and one inside an object (a JSON column).
const formatsSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Visit","type":"object","properties":{
 "id":{"type":"integer"},"user":{"type":"string"},
 "day":{"type":"string","format":"date"},"at":{"type":["string","null"],"format":"time"},"uid":{"type":"string","format":"uuid"},
 "meta":{"type":"object","properties":{"since":{"type":"string","format":"date"}}}},"required":["id","user"]}`

// TestKafkaJSONSchemaFormatsFromRegistry: JSON Schema messages by
// Confluent's serializer through Apicurio Registry with the string formats
// date, time and uuid: each value is read back by the query from a date,
// time_of_day or uuid column (a time with an offset as the time of day in
// UTC, an upper-case uuid as its value); a formatted string inside an
// object stays text in its JSON column; a message whose value is not of
// its property's format is a dead letter naming the property.
func TestKafkaJSONSchemaFormatsFromRegistry(t *testing.T) {
	t.Parallel()
	broker(t)
	py := testregistry.RequirePython(t)
	reg := apicurio.Require(t)
	topic := uniqueName("formats")
	createTopic(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := testregistry.Batch{Format: "json_schema", Schema: formatsSchema, Records: []string{
		`{"id": 0, "user": "u0", "day": "2026-11-29", "at": "13:45:01.000123Z", "uid": "123e4567-e89b-12d3-a456-426614174000", "meta": {"since": "2020-01-02"}}`,
		`{"id": 1, "user": "u1", "day": "1969-12-31", "at": "01:00:00+02:00", "uid": "123E4567-E89B-12D3-A456-426614174001"}`,
		`{"id": 2, "user": "u2", "day": "2024-02-29", "at": None, "uid": "00000000-0000-0000-0000-000000000000"}`,
	}}
	po := testregistry.ProduceOptions{Brokers: kafkaAddr, Topic: topic, Registry: reg.URL}
	if err := testregistry.Produce(ctx, py, po, b); err != nil {
		t.Fatal(err)
	}
	// Bodies the serializer would refuse, framed with the registered
	// schema's id as a producer that does not validate writes them.
	id, err := reg.SchemaID(ctx, topic+"-value", 1)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"day": `{"id":10,"user":"u0","day":"2026-02-30"}`,
		"at":  `{"id":11,"user":"u0","at":"24:00:00"}`,
		"uid": `{"id":12,"user":"u0","uid":"123e4567-e89b-12d3-a456"}`,
	}
	var recs []*kgo.Record
	for _, body := range bad {
		recs = append(recs, &kgo.Record{Topic: topic, Value: append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), body...)})
	}
	produceAll(ctx, t, newProducer(t), recs)

	nd := startNode(t, registryConfig(topic, "json_schema", reg.URL, ""), filepath.Join(t.TempDir(), "node"))
	waitRows(t, nd, "events", 3, time.Minute)
	waitDeadLetters(t, nd, len(bad), time.Minute)
	rows := queryRows(t, nd, "events")
	for id, want := range []map[string]any{
		{"day": "2026-11-29", "at": "13:45:01.000123", "uid": "123e4567-e89b-12d3-a456-426614174000", "meta": map[string]any{"since": "2020-01-02"}},
		{"day": "1969-12-31", "at": "23:00:00.000000", "uid": "123e4567-e89b-12d3-a456-426614174001", "meta": nil},
		{"day": "2024-02-29", "at": nil, "uid": "00000000-0000-0000-0000-000000000000", "meta": nil},
	} {
		for k, w := range want {
			if !jsonEqual(rows[id][k], w) {
				t.Errorf("id %d: %s = %#v, want %#v", id, k, rows[id][k], w)
			}
		}
	}
	wantTypes := map[string]string{"day": "date", "at": "time_of_day", "uid": "uuid", "meta": "json"}
	if got := columnTypes(t, nd, "events"); !mapsHave(got, wantTypes) {
		t.Errorf("column types %v, want %v among them", got, wantTypes)
	}
	var reasons []string
	for _, d := range queryRows(t, nd, "events_deadletter") {
		reasons = append(reasons, fmt.Sprint(d["error"]))
	}
	slices.Sort(reasons)
	for prop := range bad {
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, `"`+prop+`"`) }) {
			t.Errorf("dead letters' reasons %q: none names %q", reasons, prop)
		}
	}
}
