package server

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/coldtest"
)

// keepNodeConfig is a node of a cluster whose continuous cold tier keeps
// the committed rows in its store (remove false), on versitygw with one
// SQLite catalog; the schema is inferred, so a column is in the stores
// that stored it only. Commits run on demand.
func keepNodeConfig(members []string, node, endpoint, prefix, catalog string) string {
	return fmt.Sprintf(`
listen: {http: "127.0.0.1:0"}
cluster: {members: [%s], node_timeout: 10s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    compact:
      after: 1h
      iceberg:
        warehouse: s3://%s/%s
        s3: {endpoint: %q, region: %s, path_style: true}
        catalog: {uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, strings.Join(members, ", "), coldtest.Bucket, prefix, endpoint, coldtest.Region, catalog, node)
}

// keepCluster starts count nodes of keepNodeConfig on a versitygw of
// their own; dirs are their storage directories.
func keepCluster(t *testing.T, count int) (nodes []*testServer, dirs []string) {
	t.Helper()
	s3, err := coldtest.StartS3(t.TempDir())
	coldtest.Require(t, err)
	t.Cleanup(s3.Stop)
	var lns []net.Listener
	var members []string
	for range count {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		members = append(members, fmt.Sprintf("%q", "http://"+ln.Addr().String()))
	}
	catalog := filepath.Join(t.TempDir(), "catalog.db")
	for i, ln := range lns {
		dir := t.TempDir()
		dirs = append(dirs, dir)
		nodes = append(nodes, serveConfigOn(t, keepNodeConfig(members, fmt.Sprintf("node%d", i), s3.Endpoint, t.Name(), catalog), dir, ln))
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	return nodes, dirs
}

// ingestLines posts NDJSON rows to a node.
func ingestLines(t *testing.T, s *testServer, rows []string) {
	t.Helper()
	code, m, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(strings.Join(rows, "\n")+"\n"))
	if code != 200 {
		t.Fatalf("ingest: %d %v", code, m)
	}
}

// keepRows are rows n = first..first+count-1; withID adds the column id
// (= 10n), which the other rows never have.
func keepRows(first, count int, withID bool) []string {
	var rows []string
	for n := first; n < first+count; n++ {
		if withID {
			rows = append(rows, fmt.Sprintf(`{"user":"u%d","ts":"2024-05-01T10:00:00Z","n":%d,"id":%d}`, n%50, n, 10*n))
		} else {
			rows = append(rows, fmt.Sprintf(`{"user":"u%d","ts":"2024-05-01T10:00:00Z","n":%d}`, n%50, n))
		}
	}
	return rows
}

func commitNow(t *testing.T, s *testServer) int64 {
	t.Helper()
	resp, err := http.Post(s.url+"/v1/tables/events/compact", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Rows int64 `json:"rows"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, &res) != nil {
		t.Fatalf("compact: %d %s", resp.StatusCode, b)
	}
	return res.Rows
}

// queryRows runs a query and returns its rows by n, each with the times
// it came; a non-200 answer is returned as its body.
func queryRows(t *testing.T, s *testServer, params url.Values) (rows map[int][]map[string]any, failed string) {
	t.Helper()
	resp, err := http.Get(s.url + "/v1/tables/events/query?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	rows = map[int][]map[string]any{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if e, ok := row["error"]; ok {
			t.Fatalf("query %v failed mid-stream: %v", params, e)
		}
		n, ok := row["n"].(float64)
		if !ok {
			t.Fatalf("row without n: %v", row)
		}
		rows[int(n)] = append(rows[int(n)], row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if e := resp.Trailer.Get("Sluice-Error"); e != "" {
		t.Fatalf("query %v: %s", params, e)
	}
	return rows, ""
}

// eachOnce fails unless rows holds every n of want once and nothing else.
func eachOnce(t *testing.T, when string, rows map[int][]map[string]any, want []int) {
	t.Helper()
	var missing, twice []int
	for _, n := range want {
		switch len(rows[n]) {
		case 0:
			missing = append(missing, n)
		case 1:
		default:
			twice = append(twice, n)
		}
	}
	extra := len(rows) - (len(want) - len(missing))
	if len(missing) > 0 || len(twice) > 0 || extra != 0 {
		t.Fatalf("%s: %d rows of %d missing (first %v), %d more than once (first %v), %d not stored", when,
			len(missing), len(want), head(missing), len(twice), head(twice), extra)
	}
}

func span(first, count int) []int {
	ns := make([]int, count)
	for i := range ns {
		ns[i] = first + i
	}
	return ns
}

// TestKeepQueryReadsIcebergAndStore: with remove false a node's query,
// and so a cluster query, reads the Iceberg table and the rows of its
// store no commit took, each row once, before and after commits; a node
// that committed its rows and left (its store gone) is still counted.
func TestKeepQueryReadsIcebergAndStore(t *testing.T) {
	nodes, dirs := keepCluster(t, 2)
	a, b := nodes[0], nodes[1]
	ingestLines(t, a, keepRows(0, 300, false))
	ingestLines(t, b, keepRows(1000, 330, false))
	local := url.Values{"columns": {"n"}}
	all := url.Values{"columns": {"n"}, "cluster": {"true"}}
	rows, failed := queryRows(t, a, local)
	if failed != "" {
		t.Fatal(failed)
	}
	eachOnce(t, "node a before any commit", rows, span(0, 300))
	rows, _ = queryRows(t, a, all)
	eachOnce(t, "cluster before any commit", rows, append(span(0, 300), span(1000, 330)...))

	if got := commitNow(t, a) + commitNow(t, b); got != 630 {
		t.Fatalf("committed %d rows, want 630", got)
	}
	want := append(span(0, 300), span(1000, 330)...)
	rows, _ = queryRows(t, a, local)
	eachOnce(t, "node a after both commits (its store keeps its 300)", rows, want)
	rows, _ = queryRows(t, a, all)
	eachOnce(t, "cluster after both commits", rows, want)

	ingestLines(t, a, keepRows(300, 50, false))
	want = append(want, span(300, 50)...)
	rows, _ = queryRows(t, a, local)
	eachOnce(t, "node a with 50 rows not committed", rows, want)

	// b leaves: its rows are in the Iceberg table only.
	b.stop()
	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	rows, failed = queryRows(t, a, url.Values{"columns": {"n"}, "cluster": {"true"}, "partial": {"true"}})
	if failed != "" {
		t.Fatal(failed)
	}
	eachOnce(t, "cluster after node b left", rows, want)
}

// TestClusterQueryColumnOnOneNode: a column only node a's rows have is
// null in node b's rows of a cluster query, whichever node coordinates, and
// before any commit (the Iceberg table lacks it too); a node's own query
// may name it once the Iceberg table has it. A column no one has is a 400
// naming it.
func TestClusterQueryColumnOnOneNode(t *testing.T) {
	nodes, _ := keepCluster(t, 2)
	a, b := nodes[0], nodes[1]
	ingestLines(t, a, keepRows(0, 100, true))
	ingestLines(t, b, keepRows(1000, 100, false))
	want := append(span(0, 100), span(1000, 100)...)
	checkIDs := func(when string, rows map[int][]map[string]any) {
		t.Helper()
		eachOnce(t, when, rows, want)
		for n, rs := range rows {
			id, has := rs[0]["id"]
			switch {
			case !has:
				t.Fatalf("%s: row n=%d without the id column: %v", when, n, rs[0])
			case n < 1000 && id != float64(10*n):
				t.Fatalf("%s: row n=%d: id %v, want %d", when, n, id, 10*n)
			case n >= 1000 && id != nil:
				t.Fatalf("%s: row n=%d of node b: id %v, want null", when, n, id)
			}
		}
	}
	for i, s := range nodes {
		rows, failed := queryRows(t, s, url.Values{"columns": {"n,id"}, "cluster": {"true"}})
		if failed != "" {
			t.Fatalf("cluster query from node %d before any commit: %s", i, failed)
		}
		checkIDs(fmt.Sprintf("cluster query from node %d before any commit", i), rows)
	}
	// CSV: one header, node b's rows with an empty id.
	resp, err := http.Get(b.url + "/v1/tables/events/query?" + url.Values{"columns": {"n,id"}, "cluster": {"true"}, "format": {"csv"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(recs) != len(want)+1 || strings.Join(recs[0], ",") != "n,id" {
		t.Fatalf("csv cluster query from node b: %d, %d records (want %d), header %v, %v", resp.StatusCode, len(recs), len(want)+1, recs[:min(len(recs), 1)], err)
	}
	for _, rec := range recs[1:] {
		var n int
		fmt.Sscan(rec[0], &n)
		if wantID := fmt.Sprint(10 * n); (n < 1000 && rec[1] != wantID) || (n >= 1000 && rec[1] != "") {
			t.Fatalf("csv cluster query from node b: row %v", rec)
		}
	}
	// A predicate on the column: node b's rows are null, so none passes.
	rows, failed := queryRows(t, b, url.Values{"columns": {"n"}, "cluster": {"true"}, "where": {"id>=500"}})
	if failed != "" {
		t.Fatalf("cluster query from node b with where id>=500: %s", failed)
	}
	eachOnce(t, "cluster query from node b with where id>=500", rows, span(50, 50))
	// Node b alone knows nothing of id yet.
	if _, failed := queryRows(t, b, url.Values{"columns": {"n,id"}}); !strings.HasPrefix(failed, "400") || !strings.Contains(failed, `\"id\"`) {
		t.Fatalf("node b's own query of id before a commit: %q, want a 400 naming it", failed)
	}
	for i, s := range nodes {
		if _, failed := queryRows(t, s, url.Values{"columns": {"n,nosuch"}, "cluster": {"true"}}); !strings.HasPrefix(failed, "400") || !strings.Contains(failed, `\"nosuch\"`) {
			t.Fatalf("cluster query from node %d of a column no one has: %q, want a 400 naming it", i, failed)
		}
	}

	commitNow(t, a)
	commitNow(t, b)
	rows, failed = queryRows(t, b, url.Values{"columns": {"n,id"}})
	if failed != "" {
		t.Fatalf("node b's own query of id after the commits: %s", failed)
	}
	checkIDs("node b's own query after the commits", rows)
	for i, s := range nodes {
		rows, failed := queryRows(t, s, url.Values{"columns": {"n,id"}, "cluster": {"true"}})
		if failed != "" {
			t.Fatalf("cluster query from node %d after the commits: %s", i, failed)
		}
		checkIDs(fmt.Sprintf("cluster query from node %d after the commits", i), rows)
	}
}
