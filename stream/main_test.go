package stream_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/internal/testregistry"
	"github.com/sluicedb/sluice/table"
)

// One in-process NATS server and, once a test asks for them, one Kafka
// broker (4 partitions a topic), one sluice binary and one Apicurio
// Registry per package run.
var (
	natsURL   string
	sluiceBin string
	buildOnce sync.Once
	buildErr  error
	apicurio  testregistry.SharedApicurio
)

// Tests that mostly wait on their servers and nodes (a consumer group's
// rebalance, a kill and restart, a lag refresh) call t.Parallel: each owns
// its topics, streams and groups (uniqueName), its nodes' ports and
// directories; a secret for a node goes into that node's environment
// (startNodeEnv), not the test process's. A test that restarts the
// package's broker stays sequential; Go runs the parallel tests only after
// every sequential one has returned.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "stream-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	defer apicurio.Close()
	// The sluice binary the node tests run, built by the first of them.
	sluiceBin = filepath.Join(tmp, "sluice")
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(tmp, "nats"), NoSigs: true, NoLog: true})
	if err != nil {
		panic(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		panic("nats server not ready")
	}
	natsURL = ns.ClientURL()
	return testkafka.MainWith(m, testkafka.Options{Partitions: 4, Secure: true})
}

// node is one `sluice serve` child process: the sluice binary TestMain
// builds without the race detector (the package's own code is raced
// in-process; a node's is the same code run as a user runs it), on its own
// port, config and data directory.
type node struct {
	*testnode.Node
	t    *testing.T
	data string
	cfg  string
}

// needBinary builds the sluice binary the nodes run, once, when a test
// first needs it: a run of the package's tests that starts no node (a -run
// of a few, as scripts/test's memory-bound phase makes) builds nothing.
func needBinary(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		build := exec.Command("go", "build", "-o", sluiceBin, "./cmd/sluice")
		build.Dir = filepath.Join(filepath.Dir(file), "..")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/sluice: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// startNode starts sluice serve on config text cfg and data dir data,
// waiting until /healthz answers.
func startNode(t *testing.T, cfg, data string) *node {
	t.Helper()
	return startNodeEnv(t, cfg, data, nil)
}

// startNodeEnv is startNode with env (KEY=value) added to the node's
// environment: a secret the config names ({env: ...}) is given to the node
// alone, not set in the test process (t.Setenv), so that the test can run
// in parallel with others.
func startNodeEnv(t *testing.T, cfg, data string, env []string) *node {
	t.Helper()
	n := newNode(t, cfg, data, env)
	n.StartTimeout = 30 * time.Second
	n.Start(t)
	return n
}

// newNode writes the node's config beside its data directory and returns
// it unstarted; it is killed when the test ends.
func newNode(t *testing.T, cfg, data string, env []string) *node {
	t.Helper()
	needBinary(t)
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(data)
	cfgPath := filepath.Join(dir, filepath.Base(data)+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	n := &node{t: t, data: data, cfg: cfgPath, Node: &testnode.Node{
		Name:    filepath.Base(data),
		URL:     "http://" + listen,
		Log:     filepath.Join(dir, filepath.Base(data)+".log"),
		Command: []string{sluiceBin, "serve", "--config", cfgPath, "--data", data, "--listen", listen, "--log-level", "info"},
		Env:     env,
	}}
	t.Cleanup(n.Kill)
	return n
}

// stop is a graceful stop (SIGTERM); it fails the test if the exit is not
// clean within a minute.
func (n *node) stop() {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		n.t.Error(err)
	}
}

// metric returns the sum of a metric's samples whose labels contain sub.
func (n *node) metric(name, sub string) (float64, bool) {
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if !strings.Contains(line, sub) {
			continue
		}
		var v float64
		fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
		sum += v
		found = true
	}
	return sum, found
}

// kafkaConfig is a server config with one table consuming topic.
func kafkaConfig(tableName, topic, group, instance, extraTable, extraSource string) string {
	return fmt.Sprintf(`tables:
  - name: %s
    hashBy: user
    sortBy: ts
    on_bad_line: reject
%s    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: %s
          session_timeout: 6s
          instance_id: "%s"
%s`, tableName, extraTable, kafkaAddr, topic, group, instance, extraSource)
}

// kafkaAddr is the package broker's address, set once by the first
// broker call (tests that run in parallel read it at once).
var (
	kafkaAddr     string
	kafkaAddrOnce sync.Once
)

var nameSeq atomic.Int64

// uniqueName makes a topic, stream or group name no other test and no
// earlier run of the same test (go test -count=N on the package's one
// broker and NATS server) has used.
func uniqueName(base string) string {
	return fmt.Sprintf("%s%d_%d", base, os.Getpid(), nameSeq.Add(1))
}

// broker returns the package broker (failing or skipping without one).
func broker(t *testing.T) *testkafka.Broker {
	t.Helper()
	b := testkafka.Require(t)
	kafkaAddrOnce.Do(func() { kafkaAddr = b.Addr })
	return b
}

// createTopic makes a topic of 4 partitions.
func createTopic(t *testing.T, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 4, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
	}
}

func newProducer(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(5*time.Millisecond), kgo.RecordRetries(1000), kgo.ProduceRequestTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func event(id, users int) (key string, value []byte) {
	user := fmt.Sprintf("u%d", id%users)
	return user, fmt.Appendf(nil, `{"id":%d,"user":%q,"ts":%q,"seq":%d}`, id, user, t0.Format(time.RFC3339Nano), id)
}

// produceRange produces ids [from, to) synchronously.
func produceRange(t *testing.T, cl *kgo.Client, topic string, from, to, users int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		k, v := event(i, users)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: v})
		if len(recs) == 1000 || i == to-1 {
			produceAll(ctx, t, cl, recs)
			recs = recs[:0]
		}
	}
}

// produceAll produces recs, sending again the records the broker refused
// as belonging to no topic it knows: right after a topic is created (or
// deleted and created again) a broker can answer UNKNOWN_TOPIC_ID or
// UNKNOWN_TOPIC_OR_PARTITION until its metadata catches up, and such a
// record was not written. Any other error fails the test.
func produceAll(ctx context.Context, t *testing.T, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		var again []*kgo.Record
		for _, r := range cl.ProduceSync(ctx, recs...) {
			switch {
			case r.Err == nil:
			case attempt < 50 && (errors.Is(r.Err, kerr.UnknownTopicID) || errors.Is(r.Err, kerr.UnknownTopicOrPartition)):
				again = append(again, r.Record)
			default:
				t.Fatalf("produce: %v", r.Err)
			}
		}
		if len(again) == 0 {
			return
		}
		recs = again
		time.Sleep(200 * time.Millisecond)
	}
}

// produceSlowly produces ids [0, n) in batches of batch every 50 ms in the
// background; the returned channel closes when all are acknowledged.
func produceSlowly(t *testing.T, cl *kgo.Client, topic string, n, users, batch int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for from := 0; from < n; from += batch {
			produceRange(t, cl, topic, from, min(from+batch, n), users)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return done
}

// storedIDs opens a (stopped) node's store and counts each id of table.
func storedIDs(t *testing.T, data, tableName string) (map[int64]int, []table.Row) {
	t.Helper()
	s, err := table.Open(data, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names, _ := s.Tables()
	ids := map[int64]int{}
	var rows []table.Row
	found := false
	for _, nm := range names {
		found = found || nm == tableName
	}
	if !found {
		return ids, nil
	}
	tb, err := s.Table(table.Config{Name: tableName, HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	err = tb.Query(context.Background(), table.Query{}, func(r table.Row) error {
		ids[r["id"].(int64)]++
		c := make(table.Row, len(r))
		for k, v := range r {
			c[k] = v
		}
		rows = append(rows, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, rows
}

// waitRows waits until the node's table holds want rows (its query API).
func waitRows(t *testing.T, n *node, tableName string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	got := -1
	for time.Now().Before(deadline) {
		got = countRows(n, tableName)
		if got >= want {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("table %s holds %d rows, want %d after %v: %s", tableName, got, want, timeout, n.Tail())
}

func countRows(n *node, tableName string) int {
	resp, err := http.Get(n.URL + "/v1/tables/" + tableName + "/query?columns=id&format=ndjson")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return -1
	}
	sc := bufio.NewScanner(resp.Body)
	c := 0
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			c++
		}
	}
	return c
}

// checkExactlyOnce fails for every id of [0,n) not stored exactly once.
func checkExactlyOnce(t *testing.T, ids map[int64]int, n int) {
	t.Helper()
	missing, dup := 0, 0
	for i := range n {
		switch c := ids[int64(i)]; {
		case c == 0:
			missing++
		case c > 1:
			dup++
		}
	}
	if missing > 0 || dup > 0 || len(ids) != n {
		t.Fatalf("%d ids missing, %d stored more than once, %d distinct ids (want %d)", missing, dup, len(ids), n)
	}
}
