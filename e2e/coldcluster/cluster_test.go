// Package coldcluster tests the cold tier of a cluster: three server child
// processes (this test binary re-executed, as `sluice-full serve`) in one
// Kafka consumer group on a multi-partition topic, each with its own store,
// all committing continuously into one Iceberg table (one SQLite catalog,
// versitygw); nodes killed with SIGKILL at random moments, restarted on
// their old store, one wiped and rejoining; then pyiceberg and DuckDB's
// iceberg_scan count every id exactly once (docs/cold-tier.md, "Each row
// once across nodes"). faults_test.go adds a broker restart and two tables
// fed by one topic; evolution_test.go an Avro topic whose schema changes
// in a real Schema Registry while it is consumed.
package coldcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	_ "github.com/sluicedb/sluice/coldtier" // the cold tier of the server children
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// partitions of the test topic.
const partitions = 6

var (
	s3     *coldtest.S3
	s3Err  error
	python string
	pyErr  error
	// apicurio is the package's Schema Registry, started by the first
	// test that asks for it.
	apicurio testregistry.SharedApicurio
)

func TestMain(m *testing.M) {
	testnode.Child()
	dir, err := os.MkdirTemp("", "coldtier-cluster-")
	if err != nil {
		panic(err)
	}
	s3, s3Err = coldtest.StartS3(dir)
	python, pyErr = readersPython()
	pyPool = coldtest.NewPythonPool(python)
	code := testkafka.Main(m, partitions)
	pyPool.Close()
	apicurio.Close()
	sharedTrino.Close()
	sharedSpark.Close()
	s3.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The package's one Trino and one Spark JVM, started by the first test
// that needs them: a JVM start costs tens of CPU-seconds, so each test
// adds a Trino catalog of its own and sends its statements to the Spark
// server.
var (
	sharedTrino coldtest.SharedTrino
	sharedSpark coldtest.SharedSpark
	// pyPool runs the readers' checks in interpreters that keep pyiceberg,
	// pyarrow and DuckDB loaded (a second of CPU an import).
	pyPool *coldtest.PythonPool
)

// dropCatalog drops a catalog a test added to the package's Trino.
func dropCatalog(tr *coldtest.Trino, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr.DropCatalog(ctx, name)
}

// readersPython is the interpreter with pyiceberg and DuckDB's iceberg
// extension: SLUICE_DUCKDB_ICEBERG_PYTHON, or the readers' venv.
func readersPython() (string, error) {
	if py := os.Getenv("SLUICE_DUCKDB_ICEBERG_PYTHON"); py != "" {
		return py, nil
	}
	return coldtest.Python()
}

// node is one server child (testnode.Node starts it, again on its store
// after a kill, kills it with SIGKILL and tails its log) and its directory.
type node struct {
	testnode.Node
	dir string
}

// tableSpec is one more table of a node's config, fed by the same topic
// as events through its own consumer group, into its own Iceberg table.
type tableSpec struct {
	name, group string
	// filters is the YAML of the table's filters: list ("" for none).
	filters string
}

func newNode(t testing.TB, dir, name, broker, topic, group, catalog, prefix string, more ...tableSpec) *node {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{Node: testnode.Node{Name: name, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}, dir: filepath.Join(dir, name)}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.Config = filepath.Join(dir, name+".yaml")
	cfg := fmt.Sprintf(`
storage: {dir: %q}
listen: {http: "127.0.0.1:%d"}
tables:
`, filepath.Join(n.dir, "data"), port)
	for _, tb := range append([]tableSpec{{name: "events", group: group}}, more...) {
		filters := ""
		if tb.filters != "" {
			filters = "    filters:\n" + tb.filters
		}
		cfg += fmt.Sprintf(`  - name: %s
    hashBy: user
    sortBy: ts
    schema:
      - {name: id, type: int64}
      - {name: user, type: string}
      - {name: ts, type: timestamp}
%s    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: %s
          session_timeout: 6s
    compact:
      interval: 1s
      after: 2s
      remove: true
      iceberg:
        warehouse: s3://%s/%s
        s3: {endpoint: %q, region: us-east-1, path_style: true}
        catalog: {uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
`, tb.name, filters, broker, topic, tb.group, coldtest.Bucket, prefix, s3.Endpoint, catalog, name)
	}
	if err := os.WriteFile(n.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Log = filepath.Join(dir, name+".log")
	t.Cleanup(n.Kill)
	return n
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// produce sends ids [from, to) keyed by user, about rate a second.
func produce(t *testing.T, cl *kgo.Client, topic string, from, to, rate int) {
	t.Helper()
	const batch = 50
	tick := time.NewTicker(time.Second * batch / time.Duration(rate))
	defer tick.Stop()
	for i := from; i < to; i += batch {
		<-tick.C
		var recs []*kgo.Record
		for id := i; id < min(i+batch, to); id++ {
			user := "u" + strconv.Itoa(id%20)
			// Event times over several hours: the hot store's retention
			// deletes the committed blocks of the older hours.
			ts := t0.Add(time.Duration(id) * 500 * time.Millisecond).Format(time.RFC3339Nano)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(user),
				Value: fmt.Appendf(nil, `{"id":%d,"user":%q,"ts":%q}`, id, user, ts)})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// ids asks a node for every id (cold and hot tiers) and fails on an id
// returned twice: the two-tier query is exact at every moment.
func ids(t *testing.T, n *node) (map[int64]bool, error) { return tableIDs(t, n, "events") }

// tableIDs is ids of one table.
func tableIDs(t *testing.T, n *node, table string) (map[int64]bool, error) {
	resp, err := http.Get(n.URL + "/v1/tables/" + table + "/query?columns=id")
	if err != nil {
		return nil, err // the node may be down (killed)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: query: %s: %s", n.Name, resp.Status, b)
	}
	seen := map[int64]bool{}
	var twice []int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			ID    *int64 `json:"id"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.ID == nil {
			return nil, fmt.Errorf("%s: query line %q: %v %s", n.Name, sc.Bytes(), err, row.Error)
		}
		if seen[*row.ID] {
			twice = append(twice, *row.ID)
		}
		seen[*row.ID] = true
	}
	if len(twice) > 0 {
		t.Errorf("%s: %s: the two-tier query returned %d ids twice, e.g. %v", n.Name, table, len(twice), twice[:min(len(twice), 10)])
	}
	return seen, nil
}

type counts struct {
	Rows, Distinct, Dups int
	DupSample            []int64 `json:"dup_sample"`
	Min, Max             *int64
}

type readers struct {
	PyIceberg   counts            `json:"pyiceberg"`
	DuckDB      *counts           `json:"duckdb"`
	DuckDBError string            `json:"duckdb_error"`
	Snapshots   int               `json:"snapshots"`
	Claims      map[string]string `json:"claims"`
}

func TestClusterEachRowOnce(t *testing.T) {
	coldtest.Require(t, s3Err)
	coldtest.Require(t, pyErr)
	broker := testkafka.Require(t)
	dir := t.TempDir()
	topic := fmt.Sprintf("events_%d_%d", os.Getpid(), time.Now().UnixNano())
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if resp, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	catalog := filepath.Join(dir, "catalog.db")
	prefix := "cluster-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var nodes []*node
	for i := range 3 {
		n := newNode(t, dir, fmt.Sprintf("node-%d", i), broker.Addr, topic, topic, catalog, prefix)
		n.Start(t)
		nodes = append(nodes, n)
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)

	// Every second, each live node's two-tier query must hold no id twice.
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	var live sync.Map
	for _, n := range nodes {
		live.Store(n, true)
	}
	watch.Go(func() {
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(time.Second):
			}
			for _, n := range nodes {
				if up, _ := live.Load(n); up == true {
					ids(t, n) // errors: the node is being killed
				}
			}
		}
	})

	// Phase 1: 24000 ids at 2000/s; three times a random node is killed
	// with SIGKILL at a random moment and restarted on its store 7 s
	// later, after its partitions moved to the others (session timeout
	// 6 s), which start at the group's committed offset: both stores then
	// hold the messages it stored after its last offset commit.
	const phase = 24000
	produced := make(chan struct{})
	go func() { defer close(produced); produce(t, producer, topic, 0, phase, 2000) }()
	for round := range 3 {
		time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
		n := nodes[rng.IntN(len(nodes))]
		live.Store(n, false)
		n.Kill()
		t.Logf("round %d: killed %s", round, n.Name)
		time.Sleep(7 * time.Second)
		n.Start(t)
		live.Store(n, true)
	}
	<-produced
	waitAll(t, nodes[0], phase) // fails the test unless node-0 sees every id

	// Phase 2: a node's store is wiped (after its rows are committed: a
	// wiped store loses what it had not committed) and it rejoins as a
	// new writer, resuming at the group's committed offsets: it stores
	// again the messages it had stored after its last offset commit,
	// which its old writer id claimed.
	wiped := nodes[rng.IntN(len(nodes))]
	post(t, wiped.URL+"/v1/tables/events/compact")
	live.Store(wiped, false)
	wiped.Kill()
	if err := os.RemoveAll(filepath.Join(wiped.dir, "data")); err != nil {
		t.Fatal(err)
	}
	wiped.Start(t)
	live.Store(wiped, true)
	t.Logf("wiped %s", wiped.Name)
	produced = make(chan struct{})
	go func() { defer close(produced); produce(t, producer, topic, phase, 2*phase, 2000) }()
	time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
	n := nodes[rng.IntN(len(nodes))]
	live.Store(n, false)
	n.Kill()
	t.Logf("phase 2: killed %s", n.Name)
	time.Sleep(7 * time.Second)
	n.Start(t)
	live.Store(n, true)
	<-produced
	total := waitAll(t, nodes[0], 2*phase)
	close(stopWatch)
	watch.Wait()
	if total != 2*phase {
		t.Fatalf("node-0 sees %d ids, want %d", total, 2*phase)
	}

	skipped := 0.0
	for _, n := range nodes {
		skipped += metric(n, "sluice_coldtier_rows_skipped_total")
	}
	r := count(t, catalog)
	t.Logf("snapshots %d; rows skipped (committed by another store) by the nodes' current processes: %.0f; claims %v", r.Snapshots, skipped, r.Claims)
	check := func(reader string, c counts) {
		if c.Rows != 2*phase || c.Distinct != 2*phase || c.Dups != 0 || *c.Min != 0 || *c.Max != 2*phase-1 {
			t.Errorf("%s: %d rows, %d distinct ids (%d twice, e.g. %v), ids %v..%v; want each of 0..%d once",
				reader, c.Rows, c.Distinct, c.Dups, c.DupSample, *c.Min, *c.Max, 2*phase-1)
		}
	}
	check("pyiceberg", r.PyIceberg)
	if r.DuckDB == nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("DuckDB iceberg_scan: %s", r.DuckDBError)
		}
		t.Logf("DuckDB iceberg_scan not checked: %s", r.DuckDBError)
	} else {
		check("duckdb", *r.DuckDB)
	}
}

// waitAll waits until n's two-tier query returns want ids (every node has
// consumed and committed everything) and returns how many it saw last.
func waitAll(t *testing.T, n *node, want int) int {
	t.Helper()
	return waitTable(t, n, "events", want)
}

// waitTable is waitAll for one table.
func waitTable(t *testing.T, n *node, table string, want int) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	got := 0
	for time.Now().Before(deadline) {
		seen, err := tableIDs(t, n, table)
		if err == nil {
			got = len(seen)
			if got == want {
				return got
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s sees %d of %d ids of %s after 60 s", n.Name, got, want, table)
	return got
}

func post(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", url, resp.Status, b)
	}
}

func count(t testing.TB, catalog string) readers { return countTable(t, catalog, "events") }

// countTable is count for one table of the cluster.
func countTable(t testing.TB, catalog, table string) readers {
	t.Helper()
	script, err := os.ReadFile("testdata/count.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := pyPool.Run(ctx, string(script), catalog, "sluice."+table, s3.Endpoint,
		coldtest.AccessKey, coldtest.SecretKey, "id")
	if err != nil {
		t.Fatal(err)
	}
	var r readers
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("count.py: %v: %s", err, out)
	}
	return r
}
