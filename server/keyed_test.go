package server

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/rdbfixture"
	"github.com/sluicedb/sluice/table"
)

// TestKeyedTableOverHTTP ingests updates of a keyed table over HTTP and
// reads it back through /v1/tables/{table}/query: one row per key, the
// latest, and no deleted key (the delete goes through the table API: an
// HTTP delete body is the change-stream decoders' part).
func TestKeyedTableOverHTTP(t *testing.T) {
	s := startServer(t, `
tables:
  - name: accounts
    hashBy: region
    sortBy: ts
    primary_key: [id]
`, "")
	post1 := `{"id":"a","region":"eu","ts":"2024-05-01T10:00:00Z","balance":1}
{"id":"b","region":"us","ts":"2024-05-01T10:00:00Z","balance":1}
{"id":"c","region":"us","ts":"2024-05-01T10:00:00Z","balance":1}
`
	post2 := `{"id":"a","region":"eu","ts":"2024-05-01T12:00:00Z","balance":2}
{"id":"b","region":"us","ts":"2024-05-01T12:00:00Z","balance":5}
{"id":"b","region":"us","ts":"2024-05-01T12:01:00Z","balance":6}
`
	for _, nd := range []string{post1, post2} {
		if code, res, _ := post(t, s.url+"/v1/tables/accounts/rows", "application/x-ndjson", strings.NewReader(nd)); code != 200 {
			t.Fatalf("ingest: %d %v", code, res)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.tables["accounts"].table.Append(ctx, []table.Row{{"id": "c", table.OperationColumn: table.OperationDelete}}); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, s.url+"/v1/tables/accounts/query?columns=id,balance")
	if code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	got := map[string]float64{}
	for _, r := range lines(body) {
		id := r["id"].(string)
		if _, ok := got[id]; ok {
			t.Fatalf("key %s twice: %s", id, body)
		}
		got[id] = r["balance"].(float64)
	}
	if len(got) != 2 || got["a"] != 2 || got["b"] != 6 {
		t.Fatalf("state %v, want a=2 b=6 (c deleted): %s", got, body)
	}
	// A filtered query counts keys, not versions.
	if code, body := get(t, s.url+"/v1/tables/accounts/query?where=region=us"); code != 200 || len(lines(body)) != 1 {
		t.Fatalf("region us: %d %s, want b's one row", code, body)
	}
}

// TestKeyedTableRDB: an atomic RDB ingest into a keyed table is refused
// with a 400 that says why and what works; mode=stream upserts the
// snapshot's keys, and sending it again leaves one row per (db, key).
func TestKeyedTableRDB(t *testing.T) {
	s := startServer(t, `
tables:
  - name: keys
    hashBy: db
    primary_key: [db, key]
`, "")
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	code, res := postRDB(t, s.url+"/v1/tables/keys/rows?db=0", bytes.NewReader(data))
	if msg, _ := res["error"].(string); code != 400 || !strings.Contains(msg, "primary key") || !strings.Contains(msg, "stream") {
		t.Fatalf("atomic RDB ingest into a keyed table: %d %v, want a 400 naming the primary key and mode stream", code, res)
	}
	for range 2 {
		if code, res := postRDB(t, s.url+"/v1/tables/keys/rows?db=0&mode=stream", bytes.NewReader(data)); code != 200 {
			t.Fatalf("stream RDB ingest: %d %v", code, res)
		}
	}
	fx, err := rdbfixture.Load(rdbFixtureName)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, k := range fx.Keys {
		if k.DB == 0 {
			want[k.Key] = true
		}
	}
	seen := map[string]bool{}
	for _, r := range queryAll(t, s, "keys", "columns=db,key") {
		k := r["key"].(string)
		if seen[k] {
			t.Fatalf("key %q twice after the snapshot was sent twice", k)
		}
		seen[k] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("%d keys stored, want %d", len(seen), len(want))
	}
}
