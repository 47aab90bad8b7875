package server

import (
	"fmt"
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

// TestColumnLimit: a row that would widen an inferred schema past the
// table's max_columns goes to the dead-letter table with the reason and its
// line, adds no column, and the batch's other rows are stored; without a
// dead-letter table the batch is refused with a 400 naming the line. Before,
// one 100k-field row widened the schema to 100k columns, which compaction
// could not write any more.
func TestColumnLimit(t *testing.T) {
	const cfg = `
tables:
  - name: wide
    sortBy: ts
    max_columns: 20
    computed:
      - {name: n2, type: int64, on_error: deadletter, func: "function main(row) return (row.n or 0) * 2 end"}
  - name: plain
    max_columns: 20
`
	s := startServer(t, cfg, "")
	wideRow := func(fields int) string {
		var b strings.Builder
		b.WriteString(`{"ts":"2024-05-01T10:00:00Z","n":1`)
		for i := 0; i < fields; i++ {
			fmt.Fprintf(&b, `,"f%05d":%d`, i, i)
		}
		b.WriteString("}\n")
		return b.String()
	}
	body := `{"ts":"2024-05-01T10:00:00Z","n":1,"a":"x"}` + "\n" + wideRow(100) + `{"ts":"2024-05-01T10:01:00Z","n":2,"b":"y"}` + "\n"
	code, res, _ := post(t, s.url+"/v1/tables/wide/rows", "application/x-ndjson", strings.NewReader(body))
	if code != 200 || res["accepted"] != 2.0 || res["failed"] != 1.0 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	_, schema := get(t, s.url+"/v1/tables/wide/schema")
	if strings.Contains(schema, "f00000") || !strings.Contains(schema, `"b"`) {
		t.Fatalf("the wide row widened the schema, or the row after it was lost: %s", schema)
	}
	code, out := get(t, s.url+"/v1/tables/wide_deadletter/query")
	dl := lines(out)
	if code != 200 || len(dl) != 1 {
		t.Fatalf("want 1 dead letter: %d %s", code, out)
	}
	if e, _ := dl[0]["error"].(string); dl[0]["loader"] != "schema" || dl[0]["line"] != 2.0 || !strings.Contains(e, "over the table's limit of 20 (max_columns)") {
		t.Fatalf("the dead letter does not say why, or which line: %v", dl[0])
	}
	if row, _ := dl[0]["row"].(string); !strings.Contains(row, `"f00099":99`) {
		t.Fatalf("the dead letter does not carry the row: %.200s", row)
	}
	// Rows up to the limit still widen the schema.
	if code, res, _ := post(t, s.url+"/v1/tables/wide/rows", "application/x-ndjson", strings.NewReader(wideRow(10))); code != 200 || res["accepted"] != 1.0 {
		t.Fatalf("a row within the limit: %d %v", code, res)
	}
	// Without a dead-letter table: the batch is refused, naming the line.
	code, res, _ = post(t, s.url+"/v1/tables/plain/rows", "application/x-ndjson", strings.NewReader(`{"a":1}`+"\n"+wideRow(30)))
	if e, _ := res["error"].(string); code != 400 || res["line"] != 2.0 || !strings.Contains(e, "max_columns") {
		t.Fatalf("too wide a row without a dead-letter table: %d %v", code, res)
	}
}
