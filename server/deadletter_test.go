package server

import (
	"strings"
	"testing"
)

// TestDeadLetterTable: rows a deadletter policy routes away are stored in
// <table>_deadletter, annotated with column, loader and error, and can be
// queried back; the good rows of the same batch are stored as usual.
func TestDeadLetterTable(t *testing.T) {
	const cfg = `
listen: {http: "127.0.0.1:0"}
tables:
  - name: orders
    sortBy: ts
    computed:
      - name: unit
        type: float64
        on_error: deadletter
        func: |
          function main(row)
            if row.qty == 0 then error("qty is zero") end
            return row.total / row.qty
          end
`
	s := startServer(t, cfg, "")
	body := `{"id":"a","ts":"2024-05-01T10:00:00Z","total":10,"qty":2}
{"id":"b","ts":"2024-05-01T10:01:00Z","total":5,"qty":0}
{"id":"c","ts":"2024-05-01T10:02:00Z","total":9,"qty":3}
`
	code, res, _ := post(t, s.url+"/v1/tables/orders/rows", "application/x-ndjson", strings.NewReader(body))
	if code != 200 || res["accepted"] != 2.0 || res["failed"] != 1.0 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	code, out := get(t, s.url+"/v1/tables/orders/query?from=2024-05-01T00:00:00Z&to=2024-05-02T00:00:00Z")
	if code != 200 || len(lines(out)) != 2 {
		t.Fatalf("orders: %d\n%s", code, out)
	}
	code, out = get(t, s.url+"/v1/tables/orders_deadletter/query?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z")
	if code != 200 {
		t.Fatalf("dead-letter query: %d %s", code, out)
	}
	dl := lines(out)
	if len(dl) != 1 {
		t.Fatalf("want 1 dead letter, got %d:\n%s", len(dl), out)
	}
	d := dl[0]
	if d["column"] != "unit" || d["loader"] != "lua" || !strings.Contains(d["error"].(string), "qty is zero") {
		t.Errorf("dead letter does not name column, loader and error: %v", d)
	}
	if row, _ := d["row"].(string); !strings.Contains(row, `"id":"b"`) {
		t.Errorf("dead letter does not carry the failing row: %v", d["row"])
	}
	if code, out := get(t, s.url+"/v1/tables"); code != 200 || !strings.Contains(out, "orders_deadletter") {
		t.Errorf("GET /v1/tables does not list the dead-letter table: %d %s", code, out)
	}
}
