package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testkafka"
)

// evolveConfig is two tables with inferred schemas committing continuously
// into Iceberg tables on S3 (the SQLite catalog): web fed over HTTP, feed
// from a Kafka topic.
func evolveConfig(endpoint, catalog, broker, topic string) string {
	table := func(name, sources string) string {
		return fmt.Sprintf(`
  - name: %s
    sortBy: ts%s
    compact:
      interval: 50ms
      after: 1h
      remove: true
      iceberg:
        warehouse: s3://%s/evolve
        s3: {endpoint: %q, region: %s, path_style: true}
        catalog: {uri: %q}
        node: n1
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, name, sources, coldtest.Bucket, endpoint, coldtest.Region, catalog)
	}
	return "tables:" + table("web", "") +
		table("feed", fmt.Sprintf("\n    sources:\n      - kafka: {brokers: [%q], topics: [%s], group: evolve}", broker, topic))
}

// TestEvolutionNeverStopsTable: a column first seen as an integer then
// given 1.5, and one first seen as an integer then given "abc", over HTTP
// and over Kafka, into tables with a cold tier (a new column y comes with
// the change: the Iceberg table takes it without a restart). The rows that do not fit
// are dead letters naming the column, the value and the types; the rows
// that fit (2.0 and 3 convert without loss) are stored; the Iceberg
// commits continue after the change (the committed-rows counter reaches
// every stored row), and every value is read back: the stored rows by
// sluice's query and by pyiceberg, the others from the dead-letter table.
func TestEvolutionNeverStopsTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s3, err := coldtest.StartS3(filepath.Join(dir, "s3"))
	coldtest.Require(t, err)
	t.Cleanup(s3.Stop)
	broker, err := testkafka.Start(ctx, filepath.Join(dir, "kafka"), 1)
	if err != nil {
		testkafka.Require(t) // fails under CI, skips otherwise
	}
	t.Cleanup(broker.Kill)
	catalog := filepath.Join(dir, "catalog.db")
	srv := serveConfig(t, evolveConfig(s3.Endpoint, catalog, broker.Addr, "evolve"), filepath.Join(dir, "store"))
	deadline := time.Now().Add(2 * time.Minute)
	for code, _ := get(t, srv.url+"/readyz"); code != 200; code, _ = get(t, srv.url+"/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s", srv.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	row := func(n int, fields string) string {
		return fmt.Sprintf(`{"ts":"2024-05-01T10:00:%02dZ","n":%d%s}`, n, n, fields)
	}
	first := []string{row(1, `,"x":1,"s":1`)}
	later := []string{row(2, `,"x":1.5`), row(3, `,"s":"abc"`), row(4, `,"x":2.0,"s":3,"y":"new"`)}
	send := func(tbl string, lines []string) {
		t.Helper()
		if tbl == "web" {
			code, res, _ := post(t, srv.url+"/v1/tables/web/rows", "application/x-ndjson", strings.NewReader(strings.Join(lines, "\n")))
			if code != 200 {
				t.Fatalf("POST: %d %v", code, res)
			}
			return
		}
		for _, l := range lines {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "evolve", Value: []byte(l)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tbl := range []string{"web", "feed"} {
		t.Run(tbl, func(t *testing.T) {
			send(tbl, first)
			waitCommitted(t, srv.url, tbl, 1)
			send(tbl, later)
			// The rows that fit are committed after the change: the
			// commits did not stop.
			waitCommitted(t, srv.url, tbl, 2)

			got := map[float64]map[string]any{}
			for _, r := range evolveRows(t, srv.url, tbl) {
				got[r["n"].(float64)] = r
			}
			if len(got) != 2 || got[1]["x"] != 1.0 || got[1]["s"] != 1.0 || got[4]["x"] != 2.0 || got[4]["s"] != 3.0 || got[4]["y"] != "new" {
				t.Errorf("sluice's query of %s: %v, want n 1 and 4 with x 1, 2, s 1, 3 and y \"new\" in row 4", tbl, got)
			}
			dead := evolveRows(t, srv.url, tbl+"_deadletter")
			if len(dead) != 2 {
				t.Fatalf("%d dead letters, want 2: %v", len(dead), dead)
			}
			// By column, not by position: a query answers the dead letters
			// the Iceberg table holds and those still in the store in no
			// fixed order between the two.
			byColumn := map[string]map[string]any{}
			for _, d := range dead {
				if c, ok := d["column"].(string); ok {
					byColumn[c] = d
				}
			}
			for _, want := range []struct{ column, value, row string }{{"x", "1.5 (float64)", `"x":1.5`}, {"s", `"abc" (string)`, `"s":"abc"`}} {
				d := byColumn[want.column]
				msg, _ := d["error"].(string)
				row, _ := d["row"].(string)
				if d == nil || !strings.Contains(msg, want.value) || !strings.Contains(msg, "int64") || !strings.Contains(row, want.row) {
					t.Errorf("dead letter of column %s: %v, want the value %s and the column's type int64 in the error, the row with %s (all: %v)", want.column, d, want.value, want.row, dead)
				}
			}
			py := readPyIceberg(t, ctx, catalog, s3, tbl)
			if len(py) != 2 || py[0]["n"] != 1.0 || py[0]["x"] != 1.0 || py[1]["n"] != 4.0 || py[1]["x"] != 2.0 || py[1]["s"] != 3.0 || py[0]["y"] != nil || py[1]["y"] != "new" {
				t.Errorf("pyiceberg of %s: %v", tbl, py)
			}
		})
	}
}

var coldRowsRE = regexp.MustCompile(`(?m)^sluice_coldtier_rows_total\{table="([^"]+)"\} (\d+)$`)

// waitCommitted waits until table's Iceberg commits hold n rows.
func waitCommitted(t *testing.T, url, table string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := -1
	for time.Now().Before(deadline) {
		_, body := get(t, url+"/metrics")
		for _, m := range coldRowsRE.FindAllStringSubmatch(body, -1) {
			if m[1] == table {
				last, _ = strconv.Atoi(m[2])
			}
		}
		if last >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("table %s: %d rows committed to Iceberg after a minute, want %d", table, last, n)
}

// evolveRows is every row of table by sluice's query (both tiers), in time
// order.
func evolveRows(t *testing.T, url, table string) []map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/v1/tables/" + table + "/query")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("query %s: %v: %s", table, err, sc.Bytes())
		}
		if e, ok := r["error"]; ok && len(r) == 1 {
			t.Fatalf("query %s: %v", table, e)
		}
		rows = append(rows, r)
	}
	return rows
}

// readPyIceberg is the rows of sluice.<table> as pyiceberg reads them, by n.
func readPyIceberg(t *testing.T, ctx context.Context, catalog string, s3 *coldtest.S3, table string) []map[string]any {
	t.Helper()
	py, err := coldtest.Python()
	coldtest.Require(t, err)
	const script = `
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
cat = SqlCatalog("sluice", uri="sqlite:///" + sys.argv[1], **{
    "s3.endpoint": sys.argv[2], "s3.access-key-id": sys.argv[3], "s3.secret-access-key": sys.argv[4],
    "s3.region": "us-east-1", "s3.path-style-access": "true"})
# ts too: pyiceberg projects the partition source when a file lacks a selected column (y)
rows = cat.load_table(sys.argv[5]).scan(selected_fields=("ts", "n", "x", "s", "y")).to_arrow().to_pylist()
print(json.dumps(sorted(rows, key=lambda r: r["n"]), default=str))
`
	out, err := coldtest.RunPython(ctx, py, script, catalog, s3.Endpoint, coldtest.AccessKey, coldtest.SecretKey, "sluice."+table)
	if err != nil {
		t.Fatalf("pyiceberg: %v: %s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("pyiceberg: %v: %s", err, out)
	}
	return rows
}

// TestEvolutionDeadLettersEachCause: in one batch of a table with fixed
// types (a cold tier), a row over the column limit and a row whose value
// does not fit its column are both dead letters, each with its own reason,
// and the other rows are stored: the pipeline sets aside what each append
// error lists until the rest fits.
func TestEvolutionDeadLettersEachCause(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
tables:
  - name: fixed
    sortBy: ts
    max_columns: 20
    compact:
      interval: 1h
      remove: true
      iceberg:
        warehouse: %s
        catalog: {uri: %q}
        node: n1
        orphan_interval: -1s
        maintain: {interval: -1s}
`, filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db"))
	s := startServer(t, cfg, filepath.Join(dir, "store"))
	if code, res, _ := post(t, s.url+"/v1/tables/fixed/rows", "application/x-ndjson", strings.NewReader(`{"ts":"2024-05-01T10:00:00Z","n":1}`)); code != 200 {
		t.Fatalf("first row: %d %v", code, res)
	}
	var wide strings.Builder
	wide.WriteString(`{"ts":"2024-05-01T10:00:02Z","n":3`)
	for i := range 30 {
		fmt.Fprintf(&wide, `,"f%02d":%d`, i, i)
	}
	wide.WriteString("}")
	body := strings.Join([]string{`{"ts":"2024-05-01T10:00:01Z","n":1.5}`, wide.String(), `{"ts":"2024-05-01T10:00:03Z","n":4}`}, "\n")
	code, res, _ := post(t, s.url+"/v1/tables/fixed/rows", "application/x-ndjson", strings.NewReader(body))
	if code != 200 || res["accepted"] != 1.0 || res["failed"] != 2.0 {
		t.Fatalf("ingest: %d %v, want 1 accepted and 2 dead letters", code, res)
	}
	reasons := map[float64]string{}
	for _, d := range evolveRows(t, s.url, "fixed_deadletter") {
		reasons[d["line"].(float64)], _ = d["error"].(string)
	}
	if !strings.Contains(reasons[1], "1.5 (float64)") || !strings.Contains(reasons[2], "max_columns") || len(reasons) != 2 {
		t.Errorf("dead letters by line %v: want line 1 for its value 1.5, line 2 for max_columns", reasons)
	}
	if rows := evolveRows(t, s.url, "fixed"); len(rows) != 2 || rows[1]["n"] != 4.0 {
		t.Errorf("stored rows %v, want n 1 and 4", rows)
	}
}
