package stream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicedb/sluice/internal/testregistry"
)

// natsRegistryConfig is a server config with one table consuming a
// JetStream stream in format, its schemas in the registry at url; auth is
// a YAML flow mapping's extra entries of schema_registry.
func natsRegistryConfig(streamName, subject, format, url, auth string) string {
	return fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - nats:
          url: %q
          stream: %s
          subject: %q
          durable: sluice
          format: %s
          metadata: [headers]
          schema_registry: {urls: [%s]%s}
`, natsURL, streamName, subject, format, url, auth)
}

// publishNATS publishes bodies to a new stream of this run (its subject
// <stream lowercased>.events), each with a header naming its index, and
// returns the stream and the subject.
func publishNATS(t *testing.T, ctx context.Context, base string, bodies [][]byte) (string, string) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := uniqueName(base)
	subject := strings.ToLower(name) + ".events"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
		t.Fatal(err)
	}
	for i, b := range bodies {
		m := nats.NewMsg(subject)
		m.Data = b
		m.Header.Set("n", fmt.Sprint(i))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return name, subject
}

// TestNATSAvroFromRegistry: Avro messages written by Confluent's
// serializer, their schema in Apicurio Registry, published to a JetStream
// stream: every value is read back as the Kafka source reads it (the same
// decoder), a second schema version adds a column, the message headers
// are kept, and a message that is not in the wire format or names an
// unknown schema is a dead letter naming the stream and its sequence.
func TestNATSAvroFromRegistry(t *testing.T) {
	t.Parallel()
	py := testregistry.RequirePython(t)
	reg := apicurio.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	subjectName := uniqueName("natsavro")
	po := testregistry.ProduceOptions{Topic: subjectName, Registry: reg.URL}
	v1 := testregistry.Batch{Format: "avro", Schema: avroV1}
	for id := range 3 {
		v1.Records = append(v1.Records, avroRecord(id, ""))
	}
	v2 := testregistry.Batch{Format: "avro", Schema: avroV2, Records: []string{avroRecord(3, "note 3")}}
	corrupt := testregistry.Batch{Raw: [][]byte{{1, 0, 0, 0, 1, 2}, {0, 0, 0, 0x27, 0x0f, 2, 4}}}
	bodies, err := testregistry.Serialize(ctx, py, po, v1, v2, corrupt)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 6 {
		t.Fatalf("the serializer gave %d messages, want 6", len(bodies))
	}
	streamName, subject := publishNATS(t, ctx, "NATSAVRO", bodies)
	nd := startNode(t, natsRegistryConfig(streamName, subject, "avro", reg.URL, ""), filepath.Join(t.TempDir(), "node"))
	waitRows(t, nd, "events", 4, time.Minute)
	waitDeadLetters(t, nd, 2, time.Minute)
	rows := queryRows(t, nd, "events")
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4: %v", len(rows), rows)
	}
	for id := range 4 {
		note := ""
		if id == 3 {
			note = "note 3"
		}
		want, got := wantAvro(id, note), rows[id]
		want["_headers"] = map[string]any{"n": fmt.Sprint(id)}
		for k, w := range want {
			if !jsonEqual(got[k], w) {
				t.Errorf("id %d: %s = %#v, want %#v", id, k, got[k], w)
			}
		}
	}
	var reasons []string
	for _, d := range queryRows(t, nd, "events_deadletter") {
		reasons = append(reasons, fmt.Sprint(d["error"]))
		if f, _ := d["format"].(string); !strings.HasPrefix(f, "avro") {
			t.Errorf("dead letter %v: format %q, want avro (replay decodes it with the registry)", d, f)
		}
		if o, _ := d["origin"].(string); !strings.HasPrefix(o, fmt.Sprintf("nats %s %s#", streamName, subject)) {
			t.Errorf("dead letter %v: origin %q does not name the stream and its sequence", d, o)
		}
	}
	joined := strings.Join(reasons, "\n")
	for _, want := range []string{"not in the schema registry wire format: magic byte 0x1", "unknown schema: schema id 9999"} {
		if !strings.Contains(joined, want) {
			t.Errorf("dead letters' reasons %q: want one containing %q", reasons, want)
		}
	}
}

// TestNATSRegistryDownPauses: while the registry answers 503 a NATS source
// stores nothing and makes no dead letter; /readyz and the log name the
// registry; once it is back every message is stored. The registry is the
// Go one (its down switch), with basic auth.
func TestNATSRegistryDownPauses(t *testing.T) {
	t.Parallel()
	py := testregistry.RequirePython(t)
	reg := startRegistry(t, testregistry.Options{Username: "sr-user", Password: "sr-pass"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	po := testregistry.ProduceOptions{Topic: uniqueName("natsdown"), Registry: reg.URL, Username: "sr-user", Password: "sr-pass"}
	b := testregistry.Batch{Format: "avro", Schema: avroV1}
	for id := range 10 {
		b.Records = append(b.Records, avroRecord(id, ""))
	}
	bodies, err := testregistry.Serialize(ctx, py, po, b)
	if err != nil {
		t.Fatal(err)
	}
	streamName, subject := publishNATS(t, ctx, "NATSDOWN", bodies)
	reg.SetDown(true)
	nd := startNode(t, natsRegistryConfig(streamName, subject, "avro", reg.URL, ", username: sr-user, password: sr-pass"), filepath.Join(t.TempDir(), "node"))
	waitNotReady(t, nd, "schema registry unavailable", time.Minute)
	if n := countRows(nd, "events"); n > 0 {
		t.Fatalf("%d rows stored while the registry was down", n)
	}
	if logCount(t, nd, "schema registry unavailable") == 0 {
		t.Errorf("the log does not name the registry: %s", nd.Tail())
	}
	reg.SetDown(false)
	waitRows(t, nd, "events", 10, time.Minute)
	if n := countDeadLetters(nd); n > 0 {
		t.Errorf("%d dead letters: a registry that was down must not drop messages", n)
	}
}
