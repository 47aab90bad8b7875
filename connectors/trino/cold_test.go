package trino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/sluicedb/sluice/coldtier" // registers the cold tier (coldapi)
	"github.com/sluicedb/sluice/config"
	_ "github.com/sluicedb/sluice/internal/arrowformat" // registers format=arrow, the connector's default
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/server"
)

// The Trino test with a cold tier: three sluice nodes commit continuously
// into one Iceberg table (Iceberg's REST catalog server, files on the
// test's versitygw), and Trino has two catalogs over it: sluice (the
// connector, every node's fresh rows and the table, under a read lease)
// and iceberg (Trino's own connector, the table alone).

// icebergCatalogMarker is the Iceberg catalog file docs/cluster.md shows
// beside the sluice one; the test runs it as it is written.
const icebergCatalogMarker = "<!-- trino-catalog: iceberg, read by connectors/trino/cold_test.go -->"

var (
	s3     *coldtest.S3
	s3Err  error
	s3Once sync.Once
	s3Dir  string
)

func TestMain(m *testing.M) {
	testnode.Child() // the overlap test's node processes
	code := m.Run()
	if s3 != nil {
		s3.Stop()
		os.RemoveAll(s3Dir)
	}
	stopKafka()
	stopTrino()
	os.Exit(code)
}

// sharedS3 starts the package's S3 server once, on first use.
func sharedS3(t testing.TB) *coldtest.S3 {
	s3Once.Do(func() {
		if s3Dir, s3Err = os.MkdirTemp("", "trino-s3-"); s3Err == nil {
			s3, s3Err = coldtest.StartS3(s3Dir)
		}
	})
	coldtest.Require(t, s3Err)
	return s3
}

// coldNodeYAML is a node of the cold cluster: continuous commits every
// 50 ms, each deleting its rows from the store (the rows are from 2024,
// past the hot retention), into the REST catalog's table.
func coldNodeYAML(members []string, node, restURI, s3Endpoint string) string {
	return fmt.Sprintf(`
cluster: {members: [%s], node_timeout: 20s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: score, type: float64}
      - {name: ok, type: bool}
    compact:
      interval: 50ms
      after: 1h
      remove: true
      iceberg:
        warehouse: s3://%s/cluster
        s3: {endpoint: %q, region: %s, path_style: true}
        catalog: {type: rest, uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, strings.Join(members, ", "), coldtest.Bucket, s3Endpoint, coldtest.Region, restURI, node)
}

// Rows of the cold test: the steady rows (n < steadyRows, one a minute
// from coldBase), committed before Trino starts and then fixed; and the
// live rows node i keeps producing during the queries (n = (i+1)*1e6 + j,
// a month later).
var coldBase = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

const steadyPerNode = 1000

func coldRow(n int) string {
	at := coldBase.Add(time.Duration(n) * time.Minute)
	if n >= 1e6 {
		at = coldBase.Add(30*24*time.Hour + time.Duration(n%1e6)*time.Second)
	}
	return fmt.Sprintf(`{"user":"u%d","ts":%q,"n":%d,"score":%g,"ok":%t}`, n%50, at.Format(time.RFC3339Nano), n, float64(n)/4, n%3 == 0)
}

func postRows(node string, ns []int) error {
	var b strings.Builder
	for _, n := range ns {
		b.WriteString(coldRow(n) + "\n")
	}
	resp, err := http.Post(node+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("ingest into %s: status %d", node, resp.StatusCode)
	}
	return nil
}

// startColdNodes starts the REST catalog and three nodes committing into
// it, and returns the nodes' URLs and the catalog's URI.
func startColdNodes(t *testing.T) ([]string, string) {
	return startColdNodesWith(t, 3, coldNodeYAML)
}

// startColdNodesWith starts the REST catalog and count nodes, each
// configured by nodeYAML, and returns the nodes' URLs and the catalog's
// URI.
func startColdNodesWith(t *testing.T, count int, nodeYAML func(members []string, node, restURI, s3Endpoint string) string) ([]string, string) {
	s3 := sharedS3(t)
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir,
		// A file, not the fixture's in-memory SQLite, serves concurrent commits.
		"CATALOG_URI=jdbc:sqlite:file:"+filepath.Join(dir, "rest-catalog.db"),
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO", "CATALOG_S3_ENDPOINT="+s3.Endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true", "CATALOG_CLIENT_REGION="+coldtest.Region)
	coldtest.Require(t, err)
	t.Cleanup(rest.Stop)

	lns := make([]net.Listener, count)
	urls := make([]string, len(lns))
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], urls[i] = ln, "http://"+ln.Addr().String()
	}
	for i, ln := range lns {
		yaml := nodeYAML(urls, fmt.Sprintf("node%d", i), rest.URI, s3.Endpoint)
		cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		logs, err := os.Create(filepath.Join(dir, fmt.Sprintf("node%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := server.New(context.Background(), cfg, server.Options{StorageDir: t.TempDir(), Logger: slogTo(logs)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln) }()
		t.Cleanup(func() { cancel(); <-done; logs.Close() })
	}
	return urls, rest.URI
}

// hotRows is how many rows of node's store the Iceberg table lacks.
func hotRows(t testing.TB, node string) int {
	t.Helper()
	return hotRowsOf(t, node, "events")
}

// hotRowsOf is how many rows of table in node's store the Iceberg table
// lacks.
func hotRowsOf(t testing.TB, node, table string) int {
	t.Helper()
	resp, err := http.Get(node + "/v1/tables/" + table + "/query?tier=hot&columns=n")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var row map[string]any
		if err := dec.Decode(&row); err != nil {
			t.Fatal(err)
		}
		if e, ok := row["error"]; ok {
			t.Fatalf("hot rows of %s: %v", node, e)
		}
		n++
	}
	return n
}

// liveLoad keeps rows coming to every node (batches of 20, in n order, so
// what a node acknowledged is a prefix) and every node committing on
// demand in a loop beside its 50 ms schedule.
type liveLoad struct {
	stored  [3]atomic.Int64
	commits atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startLiveLoad(t *testing.T, nodes []string) *liveLoad {
	const batch = 20
	l := &liveLoad{stop: make(chan struct{})}
	for i, node := range nodes {
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			for k := 0; ; k += batch {
				select {
				case <-l.stop:
					return
				default:
				}
				ns := make([]int, batch)
				for j := range ns {
					ns[j] = (i+1)*1e6 + k + j
				}
				if err := postRows(node, ns); err != nil {
					t.Error(err)
					return
				}
				l.stored[i].Store(int64(k + batch))
				time.Sleep(10 * time.Millisecond)
			}
		}()
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				resp, err := http.Post(node+"/v1/tables/events/compact", "application/json", nil)
				if err != nil {
					t.Errorf("compact: %v", err)
					return
				}
				var res struct {
					Rows int64 `json:"rows"`
				}
				json.NewDecoder(resp.Body).Decode(&res)
				resp.Body.Close()
				if resp.StatusCode == 200 && res.Rows > 0 {
					l.commits.Add(1)
				}
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

func (l *liveLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// TestTrinoExactDuringCommits: Trino reads the cluster through the
// connector while three nodes keep storing rows and committing them into
// Iceberg (each commit deleting its rows from the store). Every answer
// holds each node's rows as a prefix of what it acknowledged, each once,
// and at least what it had acknowledged before the statement: the splits,
// read at different moments, all read under one lease. Trino's Iceberg
// catalog reads the same table: a time range and a key over the steady
// rows, and a join of the two catalogs, equal what was produced.
func TestTrinoExactDuringCommits(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	nodes, restURI := startColdNodes(t)
	for i, node := range nodes {
		ns := make([]int, steadyPerNode)
		for j := range ns {
			ns[j] = i*steadyPerNode + j
		}
		if err := postRows(node, ns); err != nil {
			t.Fatal(err)
		}
	}
	const steady = 3 * steadyPerNode
	// Every steady row committed (no node's store holds a row the table
	// lacks) before Trino starts.
	deadline := time.Now().Add(2 * time.Minute)
	for _, node := range nodes {
		for hotRows(t, node) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("node %s: steady rows not committed after 2 minutes", node)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	trino := sharedTrino(t)
	sluiceCat := newCatalog(t, trino, "sluice", catalogFile(t, nodes[1]))
	icebergCat := newCatalog(t, trino, "iceberg", icebergCatalogFile(t, restURI, sharedS3(t).Endpoint))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	query := func(sql string) [][]any {
		t.Helper()
		began := time.Now()
		_, rows, err := trino.Query(ctx, sql)
		if testing.Verbose() {
			t.Logf("%v: %.80s", time.Since(began).Round(time.Millisecond), sql)
		}
		if err != nil {
			log, _ := os.ReadFile(trino.Log)
			t.Fatalf("%s: %v\nTrino log (end): %s", sql, err, log[max(0, len(log)-3000):])
		}
		return rows
	}
	one := func(sql string) int64 {
		t.Helper()
		rows := query(sql)
		if len(rows) != 1 || len(rows[0]) != 1 {
			t.Fatalf("%s: %v, want one value", sql, rows)
		}
		v, err := strconv.ParseInt(fmt.Sprint(rows[0][0]), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return v
	}

	// What the steady rows hold, row by row.
	from, to := coldBase.Add(500*time.Minute), coldBase.Add(2100*time.Minute)
	var inRange, ofUser7 int64
	for n := range steady {
		if at := coldBase.Add(time.Duration(n) * time.Minute); !at.Before(from) && at.Before(to) {
			inRange++
		}
		if n%50 == 7 {
			ofUser7++
		}
	}
	ts := func(at time.Time) string { return fmt.Sprintf("from_iso8601_timestamp('%s')", at.Format(time.RFC3339)) }
	steadyEnd := coldBase.Add(steady * time.Minute)
	checks := []struct {
		sql  string
		want int64
	}{
		{fmt.Sprintf("SELECT count(*) FROM "+sluiceCat+".cluster.events WHERE ts >= %s AND ts < %s", ts(from), ts(to)), inRange},
		{fmt.Sprintf("SELECT count(*) FROM "+icebergCat+".sluice.events WHERE ts >= %s AND ts < %s", ts(from), ts(to)), inRange},
		{fmt.Sprintf("SELECT count(*) FROM "+sluiceCat+".cluster.events WHERE \"user\" = 'u7' AND ts < %s", ts(steadyEnd)), ofUser7},
		{fmt.Sprintf("SELECT count(*) FROM "+sluiceCat+".cluster.events s JOIN "+icebergCat+".sluice.events i ON s.n = i.n AND s.ts = i.ts WHERE i.ts < %s", ts(steadyEnd)), steady},
		{fmt.Sprintf("SELECT count(DISTINCT s.n) FROM "+sluiceCat+".cluster.events s JOIN "+icebergCat+".sluice.events i ON s.n = i.n WHERE s.\"user\" = 'u7' AND i.ts < %s", ts(steadyEnd)), ofUser7},
	}

	load := startLiveLoad(t, nodes)
	started := time.Now()
	statements := 0
	for ; time.Since(started) < 20*time.Second || statements < 6; statements++ {
		var before [3]int64
		for i := range before {
			before[i] = load.stored[i].Load()
		}
		rows := query("SELECT n / 1000000 AS part, count(*), count(DISTINCT n), min(n), max(n) FROM " + sluiceCat + ".cluster.events GROUP BY 1 ORDER BY 1")
		var after [3]int64
		for i := range after {
			after[i] = load.stored[i].Load()
		}
		if len(rows) != 4 {
			t.Fatalf("statement %d: %d groups (%v), want the steady rows and three nodes' live rows", statements, len(rows), rows)
		}
		for _, r := range rows {
			var part, count, distinct, lo, hi int64
			for i, p := range []*int64{&part, &count, &distinct, &lo, &hi} {
				*p, _ = strconv.ParseInt(fmt.Sprint(r[i]), 10, 64)
			}
			wantLo, wantMin, wantMax := int64(0), int64(steady), int64(steady)
			if part > 0 {
				wantLo = part * 1e6
				wantMin, wantMax = before[part-1], after[part-1]
			}
			produced := hi - lo + 1
			if count != distinct || lo != wantLo || count != produced || produced < wantMin || produced > wantMax {
				t.Fatalf("statement %d (%d commits so far), rows of part %d: count %d, distinct %d, n in [%d, %d]: "+
					"want each of the first k rows once, %d <= k <= %d",
					statements, load.commits.Load(), part, count, distinct, lo, hi, wantMin, wantMax)
			}
		}
		c := checks[statements%len(checks)]
		if got := one(c.sql); got != c.want {
			t.Fatalf("statement %d: %s = %d, want %d", statements, c.sql, got, c.want)
		}
	}
	load.end()
	if load.commits.Load() < 10 {
		t.Errorf("%d commits with rows during %d statements: the test did not race them", load.commits.Load(), statements)
	}
	t.Logf("%d statements (and as many checks of %d kinds) in %v, %d on-demand commits with rows",
		statements, len(checks), time.Since(started).Round(time.Millisecond), load.commits.Load())
}

// icebergCatalogFile is docs/cluster.md's Iceberg catalog file with the
// test's catalog and S3 server.
func icebergCatalogFile(t testing.TB, restURI, s3Endpoint string) string {
	t.Helper()
	block := docBlock(t, icebergCatalogMarker)
	for _, r := range [][2]string{{"http://catalog:8181", restURI}, {"http://s3:9000", s3Endpoint}} {
		if !strings.Contains(block, r[0]) {
			t.Fatalf("docs/cluster.md's Iceberg catalog no longer names %s; update the test", r[0])
		}
		block = strings.ReplaceAll(block, r[0], r[1])
	}
	return block + "\n"
}
