package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/table"
)

// TestDeleteRowsAuth: DELETE /v1/tables/{table}/rows stores each row of its
// body as a delete of its key (the operation column set, read back when the
// query names it) for a principal with ingest on the table; without
// credentials it is 401, with a read-only role 403, and nothing is stored.
func TestDeleteRowsAuth(t *testing.T) {
	cfg, tok := authConfig(t, "")
	s := startServer(t, cfg, "")
	keys := `{"user":"a","ts":"2026-11-26T10:00:00Z"}` + "\n" + `{"user":"b","ts":"2026-11-26T10:00:01Z"}` + "\n"
	query := s.url + "/v1/tables/events/query?format=ndjson&columns=user," + table.OperationColumn
	for _, tc := range []struct {
		who, token string
		code       int
	}{{"no credentials", "", 401}, {"a read-only role", tok.reader, 403}} {
		code, body, _ := call(t, "DELETE", s.url+"/v1/tables/events/rows", tc.token, strings.NewReader(keys))
		if code != tc.code {
			t.Fatalf("DELETE rows with %s: %d %s, want %d", tc.who, code, body, tc.code)
		}
		if code, body, _ := call(t, "GET", s.url+"/v1/tables/events/query?format=ndjson", tok.reader, nil); code != 200 || strings.TrimSpace(body) != "" {
			t.Fatalf("after the DELETE with %s: %d %q, want nothing stored", tc.who, code, body)
		}
	}
	code, body, _ := call(t, "DELETE", s.url+"/v1/tables/events/rows", tok.loader, strings.NewReader(keys), "Content-Type", "application/x-ndjson")
	if code != 200 || !strings.Contains(body, `"accepted":2`) {
		t.Fatalf("DELETE rows by the loader: %d %s, want 200 and 2 accepted", code, body)
	}
	code, body, _ = call(t, "GET", query, tok.reader, nil)
	got := lines(body)
	if code != 200 || len(got) != 2 {
		t.Fatalf("query: %d %q, want the two deletes", code, body)
	}
	users := map[any]bool{}
	for _, r := range got {
		users[r["user"]] = true
		if r[table.OperationColumn] != table.OperationDelete {
			t.Errorf("row %v: want %s %q", r, table.OperationColumn, table.OperationDelete)
		}
	}
	if !users["a"] || !users["b"] {
		t.Errorf("rows %v: want the keys of users a and b", got)
	}
}

// TestRowsRefuseHiddenColumns: an ingested row cannot set sluice's own
// columns (its operation, its source position): the request is refused
// with 400 naming the line and the column, and nothing is stored, on both
// ingest paths (by column, and by maps for a table with a computed column),
// for POST and DELETE.
func TestRowsRefuseHiddenColumns(t *testing.T) {
	s := startServer(t, `
listen: {http: "127.0.0.1:0"}
tables:
  - name: plain
  - name: computed
    computed:
      - name: twice
        type: int64
        func: "function main(row) return (row.n or 0) * 2 end"
`, "")
	body := `{"n":1}` + "\n" + `{"n":2,"` + table.OperationColumn + `":"delete"}` + "\n"
	for _, tbl := range []string{"plain", "computed"} {
		for _, method := range []string{"POST", "DELETE"} {
			code, answer, _ := call(t, method, s.url+"/v1/tables/"+tbl+"/rows", "", strings.NewReader(body))
			if code != 400 || !strings.Contains(answer, `"line":2`) || !strings.Contains(answer, table.OperationColumn) {
				t.Errorf("%s %s with a hidden column: %d %s, want 400 naming line 2 and the column", method, tbl, code, answer)
			}
			if _, rows, _ := call(t, "GET", s.url+"/v1/tables/"+tbl+"/query?format=ndjson", "", nil); strings.TrimSpace(rows) != "" {
				t.Errorf("%s %s: %q stored, want nothing", method, tbl, rows)
			}
		}
	}
}

// TestReplayKeepsChangeEvents: a change stream's dead letter (format
// changes:<format>) is kept by a replay, never stored as a plain row: its
// operation would be lost (a delete replayed as an upsert).
func TestReplayKeepsChangeEvents(t *testing.T) {
	s := startServer(t, `
tables:
  - name: t
    on_bad_line: skip
`, "")
	ts := s.tables["t"]
	if ts.deadLetter == nil {
		t.Fatal("table t has no dead-letter table")
	}
	b, err := s.store.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	letter := table.Row{"time": time.Now(), "id": "d1", "origin": "kafka c/0@7", "format": "changes:debezium", "loader": "poison",
		"column": "", "filter": false, "source": "", "error": "change event: truncate events are not applied", "row": `{"op":"d","before":{"id":1}}`}
	if err := b.Append(ts.deadLetter.table, []table.Row{letter}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Replay(ctx, "t", ReplayOptions{})
	if err != nil || res.Kept != 1 || res.Replayed != 0 || res.Failed != 0 {
		t.Fatalf("replay: %+v %v, want the change event kept", res, err)
	}
	if _, rows, _ := call(t, "GET", s.url+"/v1/tables/t/query?format=ndjson", "", nil); strings.TrimSpace(rows) != "" {
		t.Errorf("the replay stored %q", rows)
	}
}

// TestDeleteRowsIdempotencyKey: a DELETE retried with its Idempotency-Key
// is answered from its record; the same body POSTed under that key is a
// key reused for another request (422), not a retry of the DELETE.
func TestDeleteRowsIdempotencyKey(t *testing.T) {
	s := startServer(t, `
tables:
  - name: t
`, "")
	body := `{"id":1}` + "\n"
	code, answer, _ := call(t, "DELETE", s.url+"/v1/tables/t/rows", "", strings.NewReader(body), "Idempotency-Key", "k1")
	if code != 200 {
		t.Fatalf("DELETE: %d %s", code, answer)
	}
	code, answer, hdr := call(t, "DELETE", s.url+"/v1/tables/t/rows", "", strings.NewReader(body), "Idempotency-Key", "k1")
	if code != 200 || hdr.Get(replayedHeader) != "true" {
		t.Fatalf("DELETE again: %d %s, want its recorded answer", code, answer)
	}
	code, answer, _ = call(t, "POST", s.url+"/v1/tables/t/rows", "", strings.NewReader(body), "Idempotency-Key", "k1")
	if code != 422 {
		t.Fatalf("POST under the DELETE's key: %d %s, want 422", code, answer)
	}
	if _, rows, _ := call(t, "GET", s.url+"/v1/tables/t/query?format=ndjson&columns=id,"+table.OperationColumn, "", nil); len(lines(rows)) != 1 {
		t.Errorf("rows %q: want the one delete", rows)
	}
}
