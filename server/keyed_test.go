package server

import (
	"context"
	"strings"
	"testing"
	"time"

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
