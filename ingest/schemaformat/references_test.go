package schemaformat

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicedb/sluice/internal/testregistry"
)

// apicurio is one Apicurio Registry for the package's tests that ask for
// it (a JVM start costs seconds).
var apicurio testregistry.SharedApicurio

func TestMain(m *testing.M) {
	code := m.Run()
	apicurio.Close()
	os.Exit(code)
}

var testSeq atomic.Int64

// uniqueSubject is a subject no other test (or earlier run against the
// same registry) registers under.
func uniqueSubject(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, time.Now().UnixNano(), testSeq.Add(1))
}

// register registers s under subject and returns its id and version.
func register(ctx context.Context, t *testing.T, cl *sr.Client, subject string, s sr.Schema) sr.SubjectSchema {
	t.Helper()
	// A registry whose JVM has just started may refuse the first writes
	// for a moment under load: a few tries, each a second apart.
	var err error
	for attempt := range 5 {
		var ss sr.SubjectSchema
		if ss, err = cl.CreateSchema(ctx, subject, s); err == nil {
			return ss
		}
		t.Logf("registering %s (attempt %d): %v", subject, attempt+1, err)
		select {
		case <-ctx.Done():
			t.Fatalf("registering %s: %v", subject, err)
		case <-time.After(time.Second):
		}
	}
	t.Fatalf("registering %s: %v", subject, err)
	return sr.SubjectSchema{}
}

// TestAvroReferences: an Avro schema whose field types are records of
// other subjects (one referencing a third: a chain), registered with
// Confluent references in Apicurio Registry, decodes by both paths (the
// columns and the map reference) with every nested value; the referenced
// subjects are fetched once each, and a second schema id sharing them
// fetches none again.
func TestAvroReferences(t *testing.T) {
	reg := apicurio.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := sr.NewClient(sr.URLs(reg.URL))
	if err != nil {
		t.Fatal(err)
	}
	geoSubject, addrSubject := uniqueSubject("geo"), uniqueSubject("addr")
	geo := register(ctx, t, cl, geoSubject, sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"Geo","namespace":"sluice.ref","fields":[{"name":"lat","type":"double"},{"name":"lon","type":"double"}]}`})
	addr := register(ctx, t, cl, addrSubject, sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"Addr","namespace":"sluice.ref","fields":[{"name":"city","type":"string"},
 {"name":"where","type":"sluice.ref.Geo"},{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["HOME","WORK"]}}]}`,
		References: []sr.SchemaReference{{Name: "sluice.ref.Geo", Subject: geoSubject, Version: geo.Version}}})
	refs := []sr.SchemaReference{{Name: "sluice.ref.Addr", Subject: addrSubject, Version: addr.Version}}
	main := `{"type":"record","name":"Order","namespace":"sluice.test","fields":[{"name":"id","type":"long"},
 {"name":"home","type":"sluice.ref.Addr"},{"name":"work","type":["null","sluice.ref.Addr"],"default":null},
 {"name":"kind","type":"sluice.ref.Kind"}]}`
	order := register(ctx, t, cl, uniqueSubject("order"), sr.Schema{Type: sr.TypeAvro, Schema: main, References: refs})
	// A second version of another subject with the same references.
	other := register(ctx, t, cl, uniqueSubject("other"), sr.Schema{Type: sr.TypeAvro, References: refs,
		Schema: `{"type":"record","name":"Other","namespace":"sluice.test","fields":[{"name":"at","type":"sluice.ref.Addr"}]}`})

	// The writer encodes with the definitions inlined: the same bytes.
	inlined := `{"type":"record","name":"Order","namespace":"sluice.test","fields":[{"name":"id","type":"long"},
 {"name":"home","type":{"type":"record","name":"Addr","namespace":"sluice.ref","fields":[{"name":"city","type":"string"},
  {"name":"where","type":{"type":"record","name":"Geo","namespace":"sluice.ref","fields":[{"name":"lat","type":"double"},{"name":"lon","type":"double"}]}},
  {"name":"kind","type":{"type":"enum","name":"Kind","namespace":"sluice.ref","symbols":["HOME","WORK"]}}]}},
 {"name":"work","type":["null","sluice.ref.Addr"],"default":null},{"name":"kind","type":"sluice.ref.Kind"}]}`
	body := encode(t, inlined, map[string]any{"id": int64(7),
		"home": map[string]any{"city": "Zürich", "where": map[string]any{"lat": 47.5, "lon": 8.5}, "kind": "HOME"},
		"work": map[string]any{"city": "Bern", "where": map[string]any{"lat": 46.9, "lon": 7.4}, "kind": "WORK"},
		"kind": "WORK"})
	msg := frame(order.ID, body)

	d := newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}, Timeout: 10 * time.Second})
	want := map[string]any{"id": int64(7),
		"home": map[string]any{"city": "Zürich", "kind": "HOME", "where": map[string]any{"lat": 47.5, "lon": 8.5}},
		"work": map[string]any{"city": "Bern", "kind": "WORK", "where": map[string]any{"lat": 46.9, "lon": 7.4}},
		"kind": "WORK"}
	row, err := d.Decode(ctx, msg)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	m, err := d.decodeMap(ctx, msg)
	if err != nil {
		t.Fatalf("decodeMap: %v", err)
	}
	for k, w := range want {
		if got := normal(t, row[k]); !reflect.DeepEqual(got, normal(t, w)) {
			t.Errorf("Decode: %s = %#v, want %#v", k, row[k], w)
		}
		if got := normal(t, m[k]); !reflect.DeepEqual(got, normal(t, w)) {
			t.Errorf("decodeMap: %s = %#v, want %#v", k, m[k], w)
		}
	}
	// One by id, one per referenced subject version.
	if n := d.Lookups(); n != 3 {
		t.Errorf("%d registry lookups for a schema with two references, want 3", n)
	}
	otherBody := encode(t, `{"type":"record","name":"Other","namespace":"sluice.test","fields":[{"name":"at","type":
 {"type":"record","name":"Addr","namespace":"sluice.ref","fields":[{"name":"city","type":"string"},
  {"name":"where","type":{"type":"record","name":"Geo","fields":[{"name":"lat","type":"double"},{"name":"lon","type":"double"}]}},
  {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["HOME","WORK"]}}]}}]}`,
		map[string]any{"at": map[string]any{"city": "Genf", "where": map[string]any{"lat": 46.2, "lon": 6.1}, "kind": "HOME"}})
	if _, err := d.Decode(ctx, frame(other.ID, otherBody)); err != nil {
		t.Fatalf("Decode of a second schema with the same references: %v", err)
	}
	if n := d.Lookups(); n != 4 {
		t.Errorf("%d registry lookups after a second schema sharing the references, want 4 (its id only)", n)
	}
}

// TestProtobufReferences: a .proto that imports two registered files (one
// of which imports the other), registered with Confluent references whose
// names are the import paths, decodes by both paths.
func TestProtobufReferences(t *testing.T) {
	reg := apicurio.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := sr.NewClient(sr.URLs(reg.URL))
	if err != nil {
		t.Fatal(err)
	}
	geoSubject, addrSubject := uniqueSubject("geo.proto"), uniqueSubject("addr.proto")
	geo := register(ctx, t, cl, geoSubject, sr.Schema{Type: sr.TypeProtobuf,
		Schema: "syntax = \"proto3\";\npackage sluice.geo;\nmessage Geo { double lat = 1; double lon = 2; }\n"})
	geoRef := sr.SchemaReference{Name: "sluice/geo.proto", Subject: geoSubject, Version: geo.Version}
	addr := register(ctx, t, cl, addrSubject, sr.Schema{Type: sr.TypeProtobuf, References: []sr.SchemaReference{geoRef},
		Schema: "syntax = \"proto3\";\npackage sluice.addr;\nimport \"sluice/geo.proto\";\nmessage Addr { string city = 1; sluice.geo.Geo where = 2; }\n"})
	order := register(ctx, t, cl, uniqueSubject("order"), sr.Schema{Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "sluice/addr.proto", Subject: addrSubject, Version: addr.Version}, geoRef},
		Schema: `syntax = "proto3";
package sluice.test;
import "sluice/addr.proto";
import "sluice/geo.proto";
import "google/protobuf/timestamp.proto";
message Order { int64 id = 1; sluice.addr.Addr home = 2; sluice.geo.Geo at = 3; google.protobuf.Timestamp ts = 4; }
`})
	geoBody := func(lat, lon float64) []byte {
		b := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(lat))
		b = protowire.AppendTag(b, 2, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(lon))
	}
	addrBody := protowire.AppendTag(nil, 1, protowire.BytesType)
	addrBody = protowire.AppendString(addrBody, "Zürich")
	addrBody = protowire.AppendTag(addrBody, 2, protowire.BytesType)
	addrBody = protowire.AppendBytes(addrBody, geoBody(47.5, 8.5))
	body := []byte{0} // message indexes [0]
	body = protowire.AppendTag(body, 1, protowire.VarintType)
	body = protowire.AppendVarint(body, 7)
	body = protowire.AppendTag(body, 2, protowire.BytesType)
	body = protowire.AppendBytes(body, addrBody)
	body = protowire.AppendTag(body, 3, protowire.BytesType)
	body = protowire.AppendBytes(body, geoBody(1.5, -2.5))
	ts := protowire.AppendTag(nil, 1, protowire.VarintType)
	ts = protowire.AppendVarint(ts, 1772359200)
	body = protowire.AppendTag(body, 4, protowire.BytesType)
	body = protowire.AppendBytes(body, ts)
	msg := frame(order.ID, body)

	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 10 * time.Second})
	want := map[string]any{"id": int64(7),
		"home": map[string]any{"city": "Zürich", "where": map[string]any{"lat": 47.5, "lon": 8.5}},
		"at":   map[string]any{"lat": 1.5, "lon": -2.5},
		"ts":   time.Unix(1772359200, 0).UTC()}
	row, err := d.Decode(ctx, msg)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	m, err := d.decodeMap(ctx, msg)
	if err != nil {
		t.Fatalf("decodeMap: %v", err)
	}
	for k, w := range want {
		if got := normal(t, row[k]); !reflect.DeepEqual(got, normal(t, w)) {
			t.Errorf("Decode: %s = %#v, want %#v", k, row[k], w)
		}
		if got := normal(t, m[k]); !reflect.DeepEqual(got, normal(t, w)) {
			t.Errorf("decodeMap: %s = %#v, want %#v", k, m[k], w)
		}
	}
	// The id, then addr.proto and geo.proto once each although geo.proto
	// is referenced twice.
	if n := d.Lookups(); n != 3 {
		t.Errorf("%d registry lookups, want 3", n)
	}
}

// TestReferenceErrors: a reference the registry answers 404 for is a dead
// letter naming the reference; one it cannot answer (503) pauses, and the
// same message decodes once it answers, since a failed lookup is not
// kept. The registry is Apicurio behind a proxy that fails the requests
// of one subject, as a registry that lost the subject, or is down, would.
func TestReferenceErrors(t *testing.T) {
	reg := apicurio.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := sr.NewClient(sr.URLs(reg.URL))
	if err != nil {
		t.Fatal(err)
	}
	addrSubject := uniqueSubject("addr")
	addr := register(ctx, t, cl, addrSubject, sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"Addr","namespace":"sluice.ref","fields":[{"name":"city","type":"string"}]}`})
	order := register(ctx, t, cl, uniqueSubject("order"), sr.Schema{Type: sr.TypeAvro,
		References: []sr.SchemaReference{{Name: "sluice.ref.Addr", Subject: addrSubject, Version: addr.Version}},
		Schema:     `{"type":"record","name":"Order","namespace":"sluice.test","fields":[{"name":"home","type":"sluice.ref.Addr"}]}`})
	msg := frame(order.ID, encode(t, `{"type":"record","name":"Order","fields":[{"name":"home","type":
 {"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}}]}`, map[string]any{"home": map[string]any{"city": "Bern"}}))

	target, err := url.Parse(reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	var failWith atomic.Int64 // the status the subject's requests get; 0: passed on
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := int(failWith.Load()); code != 0 && strings.Contains(r.URL.Path, "/subjects/"+addrSubject+"/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error_code":%d01,"message":"Subject '%s' not found."}`, code, addrSubject)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	d := newDecoder(t, FormatAvro, Registry{URLs: []string{srv.URL}, Timeout: 10 * time.Second})

	failWith.Store(http.StatusServiceUnavailable)
	if _, err := d.Decode(ctx, msg); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), addrSubject) {
		t.Errorf("a reference the registry cannot answer: %v, want ErrUnavailable naming the subject", err)
	}
	failWith.Store(http.StatusNotFound)
	_, err = d.Decode(ctx, msg)
	if !errors.Is(err, ErrReference) || !errors.Is(err, ErrUnknownSchema) || errors.Is(err, ErrUnavailable) {
		t.Errorf("a reference the registry does not have: %v, want ErrReference (a dead letter)", err)
	} else if !strings.Contains(err.Error(), `reference "sluice.ref.Addr"`) || !strings.Contains(err.Error(), addrSubject) {
		t.Errorf("the dead letter's reason %q does not name the reference and its subject", err)
	}
	failWith.Store(0)
	row, err := d.Decode(ctx, msg)
	if err != nil {
		t.Fatalf("once the registry answers: %v", err)
	}
	if got := normal(t, row["home"]); !reflect.DeepEqual(got, normal(t, map[string]any{"city": "Bern"})) {
		t.Errorf("home = %#v", row["home"])
	}
}

// TestJSONSchemaReferences: a property whose $ref is a reference's name
// is typed by the referenced schema: "number" makes 5 a float64, where an
// undeclared property would be inferred as int64.
func TestJSONSchemaReferences(t *testing.T) {
	reg := apicurio.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := sr.NewClient(sr.URLs(reg.URL))
	if err != nil {
		t.Fatal(err)
	}
	amountSubject := uniqueSubject("amount")
	amount := register(ctx, t, cl, amountSubject, sr.Schema{Type: sr.TypeJSON, Schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"number"}`})
	order := register(ctx, t, cl, uniqueSubject("order"), sr.Schema{Type: sr.TypeJSON,
		References: []sr.SchemaReference{{Name: "amount.json", Subject: amountSubject, Version: amount.Version}},
		Schema:     `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"integer"},"amount":{"$ref":"amount.json"}}}`})
	d := newDecoder(t, FormatJSONSchema, Registry{URLs: []string{reg.URL}, Timeout: 10 * time.Second})
	row, err := d.decodeMap(ctx, frame(order.ID, []byte(`{"id":1,"amount":5}`)))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := row["amount"].(float64); !ok || v != 5 {
		t.Errorf("amount = %#v, want float64 5 (the referenced schema's number)", row["amount"])
	}
}

// TestReferenceCycleAndDepth: a registry whose references form a cycle,
// or an endless chain, gives a dead letter saying so after a bounded
// number of requests. Apicurio refuses to register either, so a server
// answers the subjects' versions as such a registry would.
func TestReferenceCycleAndDepth(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		const record = `{"type":"record","name":"R","fields":[]}`
		switch {
		case r.URL.Path == "/schemas/ids/1": // references loop-a, which references loop-b, which references loop-a
			fmt.Fprintf(w, `{"schema":%q,"references":[{"name":"A","subject":"loop-a","version":1}]}`, record)
		case r.URL.Path == "/subjects/loop-a/versions/1":
			fmt.Fprintf(w, `{"subject":"loop-a","version":1,"id":2,"schema":%q,"references":[{"name":"B","subject":"loop-b","version":1}]}`, record)
		case r.URL.Path == "/subjects/loop-b/versions/1":
			fmt.Fprintf(w, `{"subject":"loop-b","version":1,"id":3,"schema":%q,"references":[{"name":"A","subject":"loop-a","version":1}]}`, record)
		case r.URL.Path == "/schemas/ids/4": // references chain-1, which references chain-2, ...
			fmt.Fprintf(w, `{"schema":%q,"references":[{"name":"C","subject":"chain","version":1}]}`, record)
		case strings.HasPrefix(r.URL.Path, "/subjects/chain/versions/"):
			v := 0
			fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/subjects/chain/versions/"), "%d", &v)
			fmt.Fprintf(w, `{"subject":"chain","version":%d,"id":%d,"schema":%q,"references":[{"name":"C","subject":"chain","version":%d}]}`, v, 100+v, record, v+1)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error_code":40401,"message":"not found"}`)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := newDecoder(t, FormatAvro, Registry{URLs: []string{srv.URL}, Timeout: 5 * time.Second})
	_, err := d.Decode(ctx, frame(1, []byte{0}))
	if !errors.Is(err, ErrReference) || !strings.Contains(err.Error(), "a cycle") {
		t.Errorf("references in a cycle: %v, want ErrReference saying so", err)
	}
	_, err = d.Decode(ctx, frame(4, []byte{0}))
	if !errors.Is(err, ErrReference) || !strings.Contains(err.Error(), "deeper than 16") {
		t.Errorf("an endless chain of references: %v, want ErrReference saying it is too deep", err)
	}
	if n := requests.Load(); n > 30 {
		t.Errorf("%d registry requests for a cycle and an endless chain, want them bounded", n)
	}
}
