package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/sluicedb/sluice/internal/arrowformat"
	"github.com/sluicedb/sluice/internal/coldtest"
)

// arrowRows reads an Arrow IPC stream answer: n → times seen, the user and
// ts of each n, and the schema.
type arrowAnswer struct {
	code   int
	schema *arrow.Schema
	ns     map[int]int
	users  map[int]string
	times  map[int]time.Time
	rows   int
	err    string // Sluice-Error trailer
	body   string // when not 200
}

func arrowQuery(t *testing.T, node *testServer, params url.Values) arrowAnswer {
	t.Helper()
	params.Set("format", "arrow")
	resp, err := http.Get(node.url + "/v1/tables/events/query?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := arrowAnswer{code: resp.StatusCode, ns: map[int]int{}, users: map[int]string{}, times: map[int]time.Time{}}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		a.body = string(b)
		return a
	}
	if ct := resp.Header.Get("Content-Type"); ct != arrowformat.ContentType {
		t.Errorf("Content-Type %q", ct)
	}
	rd, err := ipc.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	a.schema = rd.Schema()
	for rd.Next() {
		rec := rd.RecordBatch()
		idx := func(name string) int {
			is := rec.Schema().FieldIndices(name)
			if len(is) != 1 {
				t.Fatalf("no column %q in %s", name, rec.Schema())
			}
			return is[0]
		}
		ns := rec.Column(idx("n")).(*array.Int64)
		users := rec.Column(idx("user")).(*array.String)
		ts := rec.Column(idx("ts")).(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			n := int(ns.Value(i))
			a.ns[n]++
			a.users[n] = users.Value(i)
			a.times[n] = time.Unix(0, int64(ts.Value(i))).UTC()
			a.rows++
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	a.err = resp.Trailer.Get("Sluice-Error")
	return a
}

func TestArrowQuery(t *testing.T) {
	nodes := startCluster(t, 1)
	fillNode(t, nodes[0], 0, 100)
	a := arrowQuery(t, nodes[0], url.Values{})
	if a.code != 200 {
		t.Fatalf("%d %s", a.code, a.body)
	}
	want := "schema:\n  fields: 3\n    - user: type=utf8, nullable\n    - ts: type=timestamp[ns, tz=UTC], nullable\n    - n: type=int64, nullable"
	if got := a.schema.String(); got != want {
		t.Errorf("schema\n%s\nwant\n%s", got, want)
	}
	for n := 0; n < 100; n++ {
		if a.ns[n] != 1 || a.users[n] != fmt.Sprintf("u%d", n) || !a.times[n].Equal(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)) {
			t.Fatalf("n=%d: seen %d, user %q, ts %v", n, a.ns[n], a.users[n], a.times[n])
		}
	}
	if a.rows != 100 || a.err != "" {
		t.Errorf("%d rows, error %q", a.rows, a.err)
	}
	// More rows than one batch, and a limit that cuts one.
	fillNode(t, nodes[0], 100, arrowformat.BatchRows+50)
	a = arrowQuery(t, nodes[0], url.Values{"limit": {fmt.Sprint(arrowformat.BatchRows + 7)}})
	if a.rows != arrowformat.BatchRows+7 {
		t.Errorf("limit: %d rows, want %d", a.rows, arrowformat.BatchRows+7)
	}
}

func TestClusterQueryArrow(t *testing.T) {
	nodes := startCluster(t, 3)
	for i, s := range nodes {
		fillNode(t, s, i*1000, 1000)
	}
	for i, s := range nodes {
		a := arrowQuery(t, s, url.Values{"cluster": {"true"}})
		if a.code != 200 || a.err != "" {
			t.Fatalf("node %d: %d %s %s", i, a.code, a.body, a.err)
		}
		want := map[int]int{}
		for n := 0; n < 3000; n++ {
			want[n] = 1
		}
		if a.rows != 3000 || fmt.Sprint(a.ns) != fmt.Sprint(want) {
			t.Errorf("node %d: %d rows, want each of 0..2999 once", i, a.rows)
		}
	}
	for _, limit := range []int{1, 1000, 1001, 2500} {
		if a := arrowQuery(t, nodes[1], url.Values{"cluster": {"true"}, "limit": {fmt.Sprint(limit)}}); a.rows != limit {
			t.Errorf("limit %d: %d rows", limit, a.rows)
		}
	}
	a := arrowQuery(t, nodes[0], url.Values{"cluster": {"true"}, "where": {"n>=1500"}})
	if a.rows != 1500 || a.ns[1499] != 0 || a.ns[1500] != 1 {
		t.Errorf("where n>=1500: %d rows", a.rows)
	}
}

// duckDBMarker is the Python block of docs/cluster.md that this test runs,
// so the documented way to read a cluster into DuckDB cannot drift.
const duckDBMarker = "<!-- python: duckdb-arrow, run by server/arrow_test.go -->"

// TestClusterQueryArrowDuckDB: DuckDB (through pyarrow's stream reader)
// counts a three-node cluster's rows, each once, with the snippet the docs
// give.
func TestClusterQueryArrowDuckDB(t *testing.T) {
	py, err := coldtest.Python()
	coldtest.Require(t, err)
	nodes := startCluster(t, 3)
	for i, s := range nodes {
		fillNode(t, s, i*1000, 1000)
	}
	doc, err := os.ReadFile("../docs/cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte(duckDBMarker))
	_, after, ok2 := bytes.Cut(after, []byte("```python\n"))
	script, _, ok3 := bytes.Cut(after, []byte("\n```"))
	if !ok || !ok2 || !ok3 {
		t.Fatalf("docs/cluster.md: no python block after %q", duckDBMarker)
	}
	snippet := string(script)
	const placeholder = "http://node-a:8080"
	if !strings.Contains(snippet, placeholder) {
		t.Fatalf("the docs' snippet no longer names %s; update the test", placeholder)
	}
	snippet = strings.ReplaceAll(snippet, placeholder, nodes[2].url)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := coldtest.RunPython(ctx, py, snippet)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "(3000, 3000, 0, 2999)" {
		t.Errorf("DuckDB over the cluster: %s, want (3000, 3000, 0, 2999)", got)
	}
}

func TestArrowNotLinkedMessage(t *testing.T) {
	if err := checkFormat("arrow"); err != nil {
		t.Fatalf("arrow is linked in this test binary: %v", err)
	}
	if err := checkFormat("parquet"); err == nil || !strings.Contains(err.Error(), "arrow") {
		t.Errorf("unknown format: %v, want the list of formats", err)
	}
}
