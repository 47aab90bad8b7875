package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// framedSchema is the Avro schema of the framed-body tests; framedSchema2
// is a second version (a field added with a default).
const framedSchema = `{"type":"record","name":"Event","namespace":"sluice.test","fields":[
 {"name":"id","type":"long"},
 {"name":"user","type":"string"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"tags","type":{"type":"array","items":"string"}}
]}`

var framedSchema2 = strings.Replace(framedSchema, `{"name":"user","type":"string"},`,
	`{"name":"user","type":"string"},{"name":"note","type":["null","string"],"default":null},`, 1)

// framedRecord is record id as Confluent's Python serializer takes it.
func framedRecord(id int) string {
	return fmt.Sprintf(`{"id": %d, "user": "u%d", "ts": datetime(2026, 3, 1, 10, 0, %d, tzinfo=timezone.utc), "price": Decimal("%d.25"), "tags": ["a", "t%d"]}`,
		id, id, id, id, id)
}

// frame is msgs as a framed body: each a 4-byte big-endian length and its
// bytes.
func frame(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
		b = append(b, m...)
	}
	return b
}

// framedRows are the rows of a table by id, as the query answers them.
func framedRows(t *testing.T, url, table string) map[int]map[string]any {
	t.Helper()
	code, out := get(t, url+"/v1/tables/"+table+"/query?format=ndjson")
	if code != http.StatusOK {
		t.Fatalf("query %s: %d %s", table, code, out)
	}
	rows := map[int]map[string]any{}
	for _, r := range lines(out) {
		id, _ := r["id"].(float64)
		rows[int(id)] = r
	}
	return rows
}

// checkFramedRow checks row against framedRecord(id).
func checkFramedRow(t *testing.T, row map[string]any, id int) {
	t.Helper()
	tags := row["tags"]
	if s, ok := tags.(string); ok {
		_ = json.Unmarshal([]byte(s), &tags)
	}
	want := map[string]any{"user": fmt.Sprintf("u%d", id), "ts": fmt.Sprintf("2026-03-01T10:00:%02dZ", id),
		// A decimal is a native decimal(10,2) column: an exact JSON number.
		"price": json.RawMessage(fmt.Sprintf("%d.25", id)), "tags": []any{"a", fmt.Sprintf("t%d", id)}}
	got := map[string]any{"user": row["user"], "ts": row["ts"], "price": row["price"], "tags": tags}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("row %d: %s, want %s", id, g, w)
	}
}

// TestHTTPFramedAvroFromRegistry: a body of framed Avro messages written by
// Confluent's serializer, their schema in Apicurio Registry, sent to a
// table that names the registry: every message is a row with its values;
// under on_bad_line skip a message that is not in the wire format or names
// a schema the registry does not have is a dead letter naming the
// request, its frame and why; a frame cut short refuses the body (400
// naming the frame); a table that names no registry answers 415.
func TestHTTPFramedAvroFromRegistry(t *testing.T) {
	py := testregistry.RequirePython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := testregistry.StartApicurio(ctx, t.TempDir())
	if errors.Is(err, testregistry.ErrNoApicurio) {
		testenv.Require(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	b := testregistry.Batch{Format: "avro", Schema: framedSchema}
	for id := 1; id <= 3; id++ {
		b.Records = append(b.Records, framedRecord(id))
	}
	msgs, err := testregistry.Serialize(ctx, py, testregistry.ProduceOptions{Topic: "framed", Registry: reg.URL}, b)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fmt.Sprintf(`
tables:
  - name: events
    sortBy: ts
    on_bad_line: skip
    schema_registry: {urls: [%s]}
    computed:
      - {name: cents, type: int64, func: "function main(row) return row.id * 100 end"}
  - name: plain
    sortBy: ts
`, reg.URL), "")
	body := frame(msgs[0], msgs[1], []byte{1, 0, 0, 0, 1, 2}, msgs[2], []byte{0, 0, 0, 0x27, 0x0f, 2, 4})
	code, res, hdr := post(t, s.url+"/v1/tables/events/rows", ContentTypeAvroFramed, bytes.NewReader(body))
	if code != http.StatusOK || res["accepted"] != 3.0 {
		t.Fatalf("framed body: %d %v", code, res)
	}
	rows := framedRows(t, s.url, "events")
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %v", len(rows), rows)
	}
	for id := 1; id <= 3; id++ {
		checkFramedRow(t, rows[id], id)
		if rows[id]["cents"] != float64(id*100) {
			t.Errorf("row %d: cents %v, want %d (the computed columns run on framed rows)", id, rows[id]["cents"], id*100)
		}
	}
	_, out := get(t, s.url+"/v1/tables/events_deadletter/query?columns=origin,line,format,error,row&format=ndjson")
	dead := map[float64]map[string]any{}
	for _, d := range lines(out) {
		dead[d["line"].(float64)] = d
	}
	origin := "http request=" + hdr.Get(requestIDHeader)
	for line, why := range map[float64]string{3: "magic byte 0x1", 5: "unknown schema: schema id 9999"} {
		d := dead[line]
		if d == nil || d["origin"] != origin || d["format"] != "avro" || !strings.Contains(fmt.Sprint(d["error"]), why) {
			t.Errorf("dead letter of frame %v: %v, want origin %q, format avro, error containing %q (all: %v)", line, d, origin, why, dead)
		}
	}
	if len(dead) != 2 {
		t.Errorf("%d dead letters, want 2: %v", len(dead), dead)
	}

	// A frame whose length runs past the body: refused whole.
	cut := append(frame(msgs[0]), 0, 0, 0, 100, 1, 2, 3)
	code, res, _ = post(t, s.url+"/v1/tables/events/rows", ContentTypeAvroFramed, bytes.NewReader(cut))
	if code != http.StatusBadRequest || res["line"] != 2.0 {
		t.Errorf("a frame cut short: %d %v, want 400 naming line 2", code, res)
	}
	if n := len(framedRows(t, s.url, "events")); n != 3 {
		t.Errorf("%d rows after a refused body, want 3", n)
	}
	code, res, _ = post(t, s.url+"/v1/tables/plain/rows", ContentTypeAvroFramed, bytes.NewReader(frame(msgs[0])))
	if code != http.StatusUnsupportedMediaType || !strings.Contains(fmt.Sprint(res["error"]), "schema_registry") {
		t.Errorf("a table without a registry: %d %v, want 415 naming schema_registry", code, res)
	}
}

// TestHTTPFramedRegistryDownAndReplay: with the registry down a framed
// body whose schema is not cached is refused with 503 and a Retry-After,
// nothing stored; once it is back the same body is stored. A message whose
// schema id the registry did not know is a dead letter in its format;
// once the registry has that id, replay decodes it with the registry and
// stores its row, once. The registry is the Go one (its down switch and
// Register).
func TestHTTPFramedRegistryDownAndReplay(t *testing.T) {
	py := testregistry.RequirePython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := testregistry.Start(testregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	po := testregistry.ProduceOptions{Topic: "framed", Registry: reg.URL}
	v1 := testregistry.Batch{Format: "avro", Schema: framedSchema, Records: []string{framedRecord(1), framedRecord(2)}}
	v2 := testregistry.Batch{Format: "avro", Schema: framedSchema2, Records: []string{framedRecord(3)}}
	msgs, err := testregistry.Serialize(ctx, py, po, v1, v2)
	if err != nil {
		t.Fatal(err)
	}
	id2 := binary.BigEndian.Uint32(msgs[2][1:5])
	// Message 1's body under an id the registry has not given yet.
	forged := append(binary.BigEndian.AppendUint32([]byte{0}, id2+1), msgs[1][5:]...)
	s := startServer(t, fmt.Sprintf(`
tables:
  - name: events
    sortBy: ts
    on_bad_line: skip
    schema_registry: {urls: [%s], timeout: 2s}
  - name: files
    sortBy: ts
    on_bad_line: skip
    schema_registry: {urls: [%s]}
`, reg.URL, reg.URL), "")
	// Two rows, and the forged message a dead letter; id 2 is not cached.
	code, res, _ := post(t, s.url+"/v1/tables/events/rows", ContentTypeAvroFramed, bytes.NewReader(frame(msgs[0], forged)))
	if code != http.StatusOK || res["accepted"] != 1.0 {
		t.Fatalf("framed body: %d %v", code, res)
	}
	reg.SetDown(true)
	req, _ := http.NewRequest("POST", s.url+"/v1/tables/events/rows", bytes.NewReader(frame(msgs[2])))
	req.Header.Set("Content-Type", ContentTypeAvroFramed)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("registry down: %s, Retry-After %q; want 503 with a Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if n := len(framedRows(t, s.url, "events")); n != 1 {
		t.Fatalf("%d rows after a refused body, want 1", n)
	}
	reg.SetDown(false)
	code, res, _ = post(t, s.url+"/v1/tables/events/rows", ContentTypeAvroFramed, bytes.NewReader(frame(msgs[2])))
	if code != http.StatusOK || res["accepted"] != 1.0 {
		t.Fatalf("registry back: %d %v", code, res)
	}

	// The registry learns the forged id: the same layout under another
	// name (the registry gives a new id only to a new text).
	if got := reg.Register("late-value", testregistry.Schema{Schema: strings.Replace(framedSchema, `"name":"Event"`, `"name":"Late"`, 1)}); got != int(id2+1) {
		t.Fatalf("the registry gave id %d, want %d", got, id2+1)
	}
	for round := range 2 {
		rr, err := s.Replay(ctx, "events", ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := (ReplayResult{Table: "events", Replayed: 1 - round, Rows: 1 - round, Done: round}); rr != want {
			t.Errorf("replay %d: %+v, want %+v", round, rr, want)
		}
	}
	rows := framedRows(t, s.url, "events")
	if len(rows) != 3 {
		t.Fatalf("%d rows after the replay, want 3: %v", len(rows), rows)
	}
	for id := 1; id <= 3; id++ {
		checkFramedRow(t, rows[id], id)
	}

	// A file of frames (sluice ingest --format avro-framed), a batch a
	// row: the good messages stored, the bad one a dead letter of the file.
	file := filepath.Join(t.TempDir(), "events.framed")
	if err := os.WriteFile(file, frame(msgs[0], []byte{0, 0, 0}, msgs[2]), 0o644); err != nil {
		t.Fatal(err)
	}
	fr, err := s.IngestFramedSource(ctx, "files", file, "avro", 1)
	if err != nil || fr.Accepted != 2 || fr.Failed != 1 {
		t.Fatalf("framed file: %+v %v; want 2 rows and 1 bad message", fr, err)
	}
	if got := framedRows(t, s.url, "files"); len(got) != 2 || got[1] == nil || got[3] == nil {
		t.Fatalf("framed file's rows: %v, want ids 1 and 3", got)
	}
	_, out := get(t, s.url+"/v1/tables/files_deadletter/query?columns=origin,line,format&format=ndjson")
	if dl := lines(out); len(dl) != 1 || dl[0]["origin"] != "file "+file || dl[0]["line"] != 2.0 {
		t.Fatalf("framed file's dead letters: %s, want frame 2 of file %s", out, file)
	}
}

// TestHTTPFramedByColumn: framed Avro messages (the Go registry, encoded
// here) go into the table by column, a bad message among them a dead
// letter, the rest stored with their values (a timestamp, a decimal, an
// array); a body of them costs well under the map path's allocations
// (a map and boxed values for every message: 23 a message for this row,
// against 9 by column, most of them the array's and the decimal's).
func TestHTTPFramedByColumn(t *testing.T) {
	reg, err := testregistry.Start(testregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	id := reg.Register("framed-value", testregistry.Schema{Schema: framedSchema})
	schema := avro.MustParse(framedSchema)
	msgOf := func(k int) []byte {
		price := new(big.Rat).SetFrac64(int64(k)*100+25, 100)
		b, err := schema.AppendEncode(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), map[string]any{"id": int64(k),
			"user": fmt.Sprintf("u%d", k%7), "ts": time.Date(2026, 3, 1, 10, 0, k%60, 0, time.UTC), "price": price, "tags": []any{"a", fmt.Sprint("t", k%3)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s := startServer(t, fmt.Sprintf(`
tables:
  - name: events
    sortBy: ts
    on_bad_line: skip
    schema_registry: {urls: [%s]}
`, reg.URL), "")
	const n = 2000
	msgs := make([][]byte, 0, n+1)
	for k := range n {
		msgs = append(msgs, msgOf(k))
		if k == n/2 {
			msgs = append(msgs, []byte{0, 0, 0, 0x27, 0x0f, 2}) // an unknown schema id
		}
	}
	body := frame(msgs...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Ingest(ctx, "events", bytes.NewReader(body), IngestOptions{Registry: "avro", Origin: "test"})
	if err != nil || res.Accepted != n || res.Failed != 1 {
		t.Fatalf("framed body: %+v %v; want %d rows and 1 bad message", res, err, n)
	}
	rows := framedRows(t, s.url, "events")
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	for _, k := range []int{0, 1, n / 2, n/2 + 1, n - 1} {
		r := rows[k]
		want := fmt.Sprintf(`{"id":%d,"price":%d.25,"tags":["a","t%d"],"ts":"2026-03-01T10:00:%02dZ","user":"u%d"}`, k, k, k%3, k%60, k%7)
		if got, _ := json.Marshal(r); string(got) != want {
			t.Errorf("row %d: %s, want %s", k, got, want)
		}
	}
	allocs := testing.AllocsPerRun(2, func() {
		if _, err := s.Ingest(ctx, "events", bytes.NewReader(body), IngestOptions{Registry: "avro", Origin: "test"}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 14*n {
		t.Errorf("%.0f allocations for a body of %d messages, want ≤ %d (by column)", allocs, n, 14*n)
	}
}
