// Package cluster_test tests key routing of cluster queries (docs/cluster.md, "Key
// queries") on real processes: three server children (this test binary
// re-executed) in one Kafka consumer group on a six-partition topic whose
// message keys are the rows' hashBy values, each listing the others as
// cluster members.
//
// The package holds tests only and is named cluster_test, so that it can
// import sluice's cluster package by its own name.
package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/cluster"
	_ "github.com/sluicedb/sluice/coldtier" // the cold tier of the server children
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/server"
)

const (
	partitions = 6
	users      = 30
)

var (
	s3    *coldtest.S3
	s3Err error
)

func TestMain(m *testing.M) {
	testnode.Child()
	dir, err := os.MkdirTemp("", "keyroute-")
	if err != nil {
		panic(err)
	}
	s3, s3Err = coldtest.StartS3(dir)
	code := testkafka.MainWith(m, testkafka.Options{Partitions: partitions, Secure: true})
	if s3 != nil {
		s3.Stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one server child: testnode.Node starts it (and again on its
// store after a kill), kills it with SIGKILL and tails its log.
type node = testnode.Node

// startNodes makes and starts n nodes consuming topic in group, each
// listing all as members; extra is YAML of more tables, compact the events
// table's compact section (with %[1]s for the node's name).
func startNodes(t testing.TB, n int, broker, topic, group, extra string, compact ...string) []*node {
	dir := t.TempDir()
	nodes := make([]*node, n)
	var members []string
	for i := range nodes {
		port, err := freeport.Port()
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &node{Name: fmt.Sprintf("node%d", i), URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
		members = append(members, strconv.Quote(nodes[i].URL))
	}
	for i, nd := range nodes {
		nd.Config = filepath.Join(dir, nd.Name+".yaml")
		nd.Log = filepath.Join(dir, nd.Name+".log")
		port := strings.TrimPrefix(nd.URL, "http://127.0.0.1:")
		cfg := fmt.Sprintf(`
storage: {dir: %q}
listen: {http: "127.0.0.1:%s"}
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
          key_partitioned: true
%s%s`, filepath.Join(dir, nd.Name), port, strings.Join(members, ", "), broker, topic, group, compactOf(compact, nd.Name), extra)
		if err := os.WriteFile(nd.Config, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		_ = i
	}
	for _, nd := range nodes {
		nd.Start(t)
		t.Cleanup(nd.Kill)
	}
	return nodes
}

func compactOf(compact []string, name string) string {
	if len(compact) == 0 {
		return ""
	}
	return strings.ReplaceAll(compact[0], "NODE", name)
}

func user(id int) string { return "u" + strconv.Itoa(id%users) }

func produce(t testing.TB, cl *kgo.Client, topic string, from, to int) {
	var recs []*kgo.Record
	for id := from; id < to; id++ {
		u := user(id)
		ts := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Second).Format(time.RFC3339)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(u), Value: fmt.Appendf(nil, `{"id":%d,"user":%q,"ts":%q}`, id, u, ts)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Errorf("produce: %v", err)
	}
}

// answer is a cluster query's ids (id → times seen) and the nodes it asked.
type answer struct {
	ids   map[int64]int
	asked []string
	err   error
}

// query runs a cluster query on coordinator c: of user u, or of all rows
// when u is "".
func query(c *node, u string) answer { return queryTable(c, "events", u) }

func queryTable(c *node, table, u string) answer {
	q := url.Values{"cluster": {"true"}, "columns": {"id,user"}}
	if u != "" {
		q.Set("hash", u)
	}
	resp, err := http.Get(c.URL + "/v1/tables/" + table + "/query?" + q.Encode())
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		return answer{err: fmt.Errorf("status %d: %s", resp.StatusCode, b.String())}
	}
	a := answer{ids: map[int64]int{}}
	if h := resp.Header.Get("Sluice-Nodes-Asked"); h != "" {
		a.asked = strings.Split(h, ",")
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var row struct {
			ID    *int64 `json:"id"`
			User  string `json:"user"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.Error != "" || row.ID == nil {
			return answer{err: fmt.Errorf("line %q: %v", sc.Text(), err)}
		}
		if u != "" && row.User != u {
			return answer{err: fmt.Errorf("row of user %s in the answer for %s", row.User, u)}
		}
		a.ids[*row.ID]++
	}
	if err := sc.Err(); err != nil {
		return answer{err: err}
	}
	if msg := resp.Trailer.Get(cluster.TrailerError); msg != "" {
		return answer{err: fmt.Errorf("trailer: %s", msg)}
	}
	return a
}

// report is a node's routing report of events.
func report(n *node) (cluster.TableHoldings, bool) {
	resp, err := http.Get(n.URL + "/v1/cluster")
	if err != nil {
		return cluster.TableHoldings{}, false
	}
	defer resp.Body.Close()
	var info server.ClusterInfo
	if json.NewDecoder(resp.Body).Decode(&info) != nil || info.Routing == nil {
		return cluster.TableHoldings{}, false
	}
	th, ok := info.Routing.Tables["events"]
	return th, ok
}

// byUser splits an all-rows answer's ids by user.
func byUser(a answer) map[string]map[int64]int {
	out := map[string]map[int64]int{}
	for id, n := range a.ids {
		u := user(int(id))
		if out[u] == nil {
			out[u] = map[int64]int{}
		}
		out[u][id] = n
	}
	return out
}

// waitAll waits until an all-rows query on c sees every id below n.
func waitAll(t *testing.T, c *node, n int) answer {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		a := query(c, "")
		if a.err == nil {
			seen := 0
			for id := range a.ids {
				if id < int64(n) {
					seen++
				}
			}
			if seen == n {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ids not all seen within 90s (last: %d ids, %v)", n, len(a.ids), a.err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkKeys asks every coordinator for every user and wants the rows of the
// all-rows answer all, each as often; asked(c, u) says which members a key
// query asks (subset: at most those, since reports may drop a partition
// meanwhile).
func checkKeys(t *testing.T, nodes []*node, all answer, subset bool, asked func(c *node, u string) []string) (fewer int) {
	t.Helper()
	want := byUser(all)
	for _, c := range nodes {
		for i := range users {
			u := user(i)
			a := query(c, u)
			if a.err != nil {
				t.Fatalf("%s, user %s: %v", c.Name, u, a.err)
			}
			if fmt.Sprint(a.ids) != fmt.Sprint(want[u]) {
				t.Fatalf("%s, user %s: ids %v, the all-nodes query's %v (asked %v)", c.Name, u, a.ids, want[u], a.asked)
			}
			if asked != nil {
				w := asked(c, u)
				if subset && slices.ContainsFunc(a.asked, func(m string) bool { return !slices.Contains(w, m) }) ||
					!subset && !slices.Equal(sorted(a.asked), sorted(w)) {
					t.Fatalf("%s (%s), user %s: asked %v, want %v", c.Name, c.URL, u, a.asked, w)
				}
			}
			if len(a.asked) < len(nodes)-1 {
				fewer++
			}
		}
	}
	return fewer
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestKeyQueryRouted: a key query asks only the nodes that hold rows of
// the key's partition and returns what the all-nodes query returns; then,
// while key queries run, a node is killed (its partitions move to the
// others, which consume them again from the group's committed offsets),
// more rows come, and the node comes back on its store (its old rows of
// partitions others own now make it a holder): no successful key query
// lacks a row stored before it, and afterwards every key query still
// returns what the all-nodes query does.
func TestKeyQueryRouted(t *testing.T) { testKeyQueryRouted(t, "keyed", "") }

// TestKeyQueryRoutedColdTier is TestKeyQueryRouted with every node
// committing continuously into one Iceberg table (each commit removing its
// rows from the store): key queries run during commits, and once every
// node committed, each partition is held by its owner alone (the former
// owners' scans found their rows committed).
func TestKeyQueryRoutedColdTier(t *testing.T) {
	coldtest.Require(t, s3Err)
	catalog := filepath.Join(t.TempDir(), "catalog.db")
	testKeyQueryRouted(t, "keyed-cold", fmt.Sprintf(`    compact:
      interval: 1s
      after: 2s
      remove: true
      iceberg:
        warehouse: s3://%s/keyed
        s3: {endpoint: %q, region: us-east-1, path_style: true}
        catalog: {uri: %q}
        node: NODE
        continuous: true
        orphan_interval: -1s
`, coldtest.Bucket, s3.Endpoint, catalog))
}

func testKeyQueryRouted(t *testing.T, topic, compact string) {
	broker := testkafka.Require(t)
	group := topic + "-group"
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if resp, err := kadm.NewClient(adm).CreateTopic(context.Background(), partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var compactSection []string
	if compact != "" {
		compactSection = []string{compact}
	}
	nodes := startNodes(t, 3, broker.Addr, topic, group, "", compactSection...)
	// Rows posted to a node would be where key queries do not look.
	resp, err := http.Post(nodes[0].URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(`{"id":-1,"user":"u1","ts":"2026-11-26T10:00:00Z"}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("HTTP ingest into a key_partitioned table: status %d, want 409", resp.StatusCode)
	}

	// A settled assignment before any row: each partition's rows are then
	// on its owner alone.
	owner := settle(t, nodes, topic)
	time.Sleep(time.Second) // every coordinator has fresh reports
	produce(t, producer, topic, 0, 600)
	all := waitAll(t, nodes[0], 600)
	for id, n := range all.ids {
		if n != 1 {
			t.Fatalf("id %d seen %d times", id, n)
		}
	}
	fewer := checkKeys(t, nodes, all, false, func(c *node, u string) []string {
		o := owner[cluster.KafkaKeyPartition([]byte(u), partitions)]
		if o == c {
			return nil
		}
		return []string{o.URL}
	})
	t.Logf("settled: %d of %d key queries asked fewer nodes than all", fewer, 3*users)

	// The rebalance, with key queries running on the other two nodes.
	stored := byUser(all) // rows stored before every query that follows
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range nodes[:2] {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				u := user(rand.IntN(users))
				a := query(c, u)
				if a.err != nil {
					failed.Add(1) // node2 is down and asked (its lease ran out)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				ok.Add(1)
				for id := range stored[u] {
					if a.ids[id] == 0 {
						t.Errorf("%s, user %s: id %d missing (asked %v)", c.Name, u, id, a.asked)
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	produce(t, producer, topic, 600, 900)
	time.Sleep(500 * time.Millisecond)
	nodes[2].Kill()
	produce(t, producer, topic, 900, 1200)
	// The session times out: node2's partitions move to the others, which
	// store rows of them (after waiting out node2's lease) before it is back.
	settle(t, nodes[:2], topic)
	produce(t, producer, topic, 1200, 1500)
	time.Sleep(5 * time.Second)
	nodes[2].Start(t)
	produce(t, producer, topic, 1500, 1800)
	time.Sleep(8 * time.Second) // node2 rejoins: partitions move again
	close(stop)
	wg.Wait()
	t.Logf("during the rebalance: %d key queries answered, %d failed", ok.Load(), failed.Load())
	if ok.Load() == 0 {
		t.Fatal("no key query answered during the rebalance")
	}

	// Afterwards: the same rows as the all-nodes query, from every
	// coordinator, asking at least every node whose report holds the
	// key's partition.
	settle(t, nodes, topic)
	all = waitAll(t, nodes[0], 1800)
	time.Sleep(time.Second)
	holdersNow := func() (map[int32][]string, int) {
		holders := map[int32][]string{}
		for _, n := range nodes {
			th, _ := report(n)
			for _, p := range th.Holds[topic] {
				holders[p] = append(holders[p], n.URL)
			}
		}
		moved := 0
		for _, hs := range holders {
			if len(hs) > 1 {
				moved++
			}
		}
		return holders, moved
	}
	holders, moved := holdersNow()
	t.Logf("after the rebalance: holders %v", holders)
	if compact == "" && moved == 0 {
		t.Fatal("no partition is held by two nodes: the rebalance moved none")
	}
	if compact != "" {
		// Every node commits what it stored: the former owners' scans
		// drop the partitions they no longer consume.
		deadline := time.Now().Add(60 * time.Second)
		for moved > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("partitions still held by two nodes after 60s of commits: %v", holders)
			}
			time.Sleep(time.Second)
			holders, moved = holdersNow()
		}
		t.Logf("after the commits: holders %v", holders)
		time.Sleep(time.Second) // every coordinator has the new reports
	}
	fewer = checkKeys(t, nodes, all, true, func(c *node, u string) []string {
		var want []string
		for _, h := range holders[cluster.KafkaKeyPartition([]byte(u), partitions)] {
			if h != c.URL {
				want = append(want, h)
			}
		}
		return want
	})
	t.Logf("after the rebalance: %d of %d key queries asked fewer nodes than all", fewer, 3*users)
}

// settle waits until every node is ready and the partitions of topic are
// each assigned to one node, every node with some; it returns the owners.
func settle(t testing.TB, nodes []*node, topic string) map[int32]*node {
	t.Helper()
	owner := map[int32]*node{}
	deadline := time.Now().Add(90 * time.Second)
	for {
		clear(owner)
		settled := true
		for _, n := range nodes {
			th, ok := report(n)
			if !ok || !th.Ready || len(th.Assigned[topic]) == 0 {
				settled = false
				break
			}
			for _, p := range th.Assigned[topic] {
				if owner[p] != nil {
					settled = false
				}
				owner[p] = n
			}
		}
		if settled && len(owner) == partitions {
			return owner
		}
		if time.Now().After(deadline) {
			t.Fatalf("no settled assignment within 90s: %v", owner)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
