package trino_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/internal/testnode"
)

// overlapPartitions is the partition count of the overlap test's topic.
const overlapPartitions = 6

// The package's Kafka broker, started on first use (one test needs it)
// and stopped by TestMain.
var kafka struct {
	once sync.Once
	b    *testkafka.Broker
	err  error
	dir  string
}

func sharedKafka(t testing.TB) *testkafka.Broker {
	t.Helper()
	kafka.once.Do(func() {
		if kafka.dir, kafka.err = os.MkdirTemp("", "trino-kafka-"); kafka.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		kafka.b, kafka.err = testkafka.StartWith(ctx, kafka.dir, testkafka.Options{Partitions: overlapPartitions})
	})
	if kafka.err != nil {
		testenv.Missing(t, "a Kafka broker is needed and could not start: %v", kafka.err)
	}
	return kafka.b
}

func stopKafka() {
	if kafka.b != nil {
		kafka.b.Kill()
	}
	if kafka.dir != "" {
		os.RemoveAll(kafka.dir)
	}
}

// overlapNodes makes n node processes (not started) consuming topic in
// group into one Iceberg table (a local warehouse and SQLite catalog they
// share), each committing only on demand.
func overlapNodes(t *testing.T, n int, broker, topic, group string) []*testnode.Node {
	dir := t.TempDir()
	warehouse, catalog := filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db")
	nodes := make([]*testnode.Node, n)
	var members []string
	for i := range nodes {
		port, err := freeport.Port()
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &testnode.Node{Name: fmt.Sprintf("node%d", i), URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
		members = append(members, strconv.Quote(nodes[i].URL))
	}
	for _, nd := range nodes {
		nd.Config, nd.Log = filepath.Join(dir, nd.Name+".yaml"), filepath.Join(dir, nd.Name+".log")
		cfg := fmt.Sprintf(`
storage: {dir: %q}
listen: {http: %q}
cluster: {members: [%s], node_timeout: 5s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: id, type: int64}
      - {name: user, type: string}
      - {name: ts, type: timestamp}
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: %s
          session_timeout: 6s
    compact:
      after: 1h
      remove: true
      iceberg:
        warehouse: %s
        catalog: {uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, filepath.Join(dir, nd.Name), strings.TrimPrefix(nd.URL, "http://"), strings.Join(members, ", "),
			broker, topic, group, warehouse, catalog, nd.Name)
		if err := os.WriteFile(nd.Config, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.Kill)
	}
	return nodes
}

// storedIDs is how many rows node's own query (its store and the table)
// returns.
func storedIDs(node string) (int, error) {
	resp, err := http.Get(node + "/v1/tables/events/query?columns=id")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || resp.Trailer.Get("Sluice-Error") != "" {
		return 0, fmt.Errorf("status %d, %v, trailer %q: %.200s", resp.StatusCode, err, resp.Trailer.Get("Sluice-Error"), b)
	}
	return strings.Count(string(b), "\n"), nil
}

func waitStored(t *testing.T, nd *testnode.Node, want int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, err := storedIDs(nd.URL)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d rows within 90s (%v): %s", nd.Name, got, want, err, nd.Tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestTrinoFailoverOverlap is the failover overlap of the cluster e2e test
// (TestClusterQueryFailoverOverlap) read through a real Trino: node0 stores
// every message of a six-partition topic and is killed with SIGKILL before
// its offsets are committed (the group's offsets are reset to the start),
// node1 reads every message again, and node0 restarts on its store, so both
// stores hold every message. Trino, with a sluice catalog on each node,
// counts each id once before any commit, after node1 commits them, and
// after node0's commit skips them.
func TestTrinoFailoverOverlap(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	const topic, group, n = "overlap", "overlap-group", 3000
	broker := sharedKafka(t).Addr
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	admin := kadm.NewClient(adm)
	if resp, err := admin.CreateTopic(context.Background(), overlapPartitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var recs []*kgo.Record
	for id := range n {
		u := fmt.Sprintf("u%d", id%30)
		ts := base.Add(time.Duration(id) * time.Second).Format(time.RFC3339)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(u), Value: fmt.Appendf(nil, `{"id":%d,"user":%q,"ts":%q}`, id, u, ts)})
	}
	if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	nodes := overlapNodes(t, 2, broker, topic, group)
	nodes[0].Start(t)
	waitStored(t, nodes[0], n)
	nodes[0].Kill()
	// The dead node's offset commits are lost: the group's offsets go back
	// to the start (the broker takes the reset once the group is empty,
	// after the dead member's session timeout).
	reset := kadm.Offsets{}
	for p := range int32(overlapPartitions) {
		reset.AddOffset(topic, p, 0, -1)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := admin.CommitOffsets(context.Background(), group, reset)
		if err == nil && resp.Error() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reset the group's offsets: %v %v", err, resp.Error())
		}
		time.Sleep(500 * time.Millisecond)
	}
	nodes[1].Start(t)
	waitStored(t, nodes[1], n)
	nodes[0].Start(t)
	waitStored(t, nodes[0], n)

	trino := sharedTrino(t)
	catalogs := []string{newCatalog(t, trino, "sluice", catalogFile(t, nodes[0].URL)), newCatalog(t, trino, "sluice", catalogFile(t, nodes[1].URL))}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// onceEach asks through each catalog (each node the coordinator of its
	// read lease) for the rows, the distinct ids and their range.
	onceEach := func(when string) {
		t.Helper()
		for _, catalog := range catalogs {
			sql := "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM " + catalog + ".cluster.events"
			_, rows, err := trino.Query(ctx, sql)
			if err != nil {
				log, _ := os.ReadFile(trino.Log)
				t.Fatalf("%s: %s: %v\nTrino log (end): %s", when, sql, err, log[max(0, len(log)-3000):])
			}
			if len(rows) != 1 || len(rows[0]) != 4 {
				t.Fatalf("%s: %s: %v, want one row of four values", when, sql, rows)
			}
			got := fmt.Sprintf("%v %v %v %v", rows[0]...)
			if want := fmt.Sprintf("%d %d %d %d", n, n, 0, n-1); got != want {
				t.Fatalf("%s: %s = %s, want %s: each of the %d ids once", when, sql, got, want, n)
			}
		}
	}
	onceEach("before any commit")
	for _, nd := range []*testnode.Node{nodes[1], nodes[0]} {
		resp, err := http.Post(nd.URL+"/v1/tables/events/compact", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("compact %s: %d %s", nd.Name, resp.StatusCode, b)
		}
		onceEach("after " + nd.Name + " committed")
	}
}
