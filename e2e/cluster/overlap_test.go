package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/overlaptest"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/server"
)

// kafkaSetup creates topic on the test broker and returns a producer and
// an admin client.
func kafkaSetup(t *testing.T, topic string) (broker string, producer *kgo.Client, adm *kadm.Client) {
	b := testkafka.Require(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm = kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(context.Background(), partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	producer, err = kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	return b.Addr, producer, adm
}

// countIDs reads an NDJSON answer's ids; a row of error or a trailer error
// fails it.
func countIDs(resp *http.Response) (map[int64]int, error) {
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	ids := map[int64]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			ID    *int64 `json:"id"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.Error != "" || row.ID == nil {
			return nil, fmt.Errorf("line %q: %v", sc.Text(), err)
		}
		ids[*row.ID]++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if msg := resp.Trailer.Get("Sluice-Error"); msg != "" {
		return nil, fmt.Errorf("trailer: %s", msg)
	}
	return ids, nil
}

func get(t *testing.T, u string) (map[int64]int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	return countIDs(resp)
}

// onceEach fails t unless ids holds every id below n once and nothing else.
func onceEach(t *testing.T, what string, ids map[int64]int, n int) {
	t.Helper()
	var twice, missing []int64
	for id, k := range ids {
		if k > 1 {
			twice = append(twice, id)
		}
	}
	for id := range int64(n) {
		if ids[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(twice) > 0 || len(missing) > 0 || len(ids) != n {
		t.Fatalf("%s: %d rows for %d ids: %d ids seen twice (e.g. %v), %d missing (e.g. %v)",
			what, sumOf(ids), n, len(twice), first(twice), len(missing), first(missing))
	}
}

func sumOf(ids map[int64]int) int {
	s := 0
	for _, k := range ids {
		s += k
	}
	return s
}

func first(ids []int64) []int64 { return ids[:min(len(ids), 5)] }

// leaseRead opens a read lease on coordinator c and reads its splits one
// by one, as the Trino connector does, into one count.
func leaseRead(t *testing.T, c *node) map[int64]int {
	t.Helper()
	resp, err := http.Post(c.URL+"/v1/tables/events/leases", "application/json", strings.NewReader(`{"ttl":"1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	var lease server.Lease
	err = json.NewDecoder(resp.Body).Decode(&lease)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("open lease on %s: status %d, %v", c.Name, resp.StatusCode, err)
	}
	defer func() {
		req, _ := http.NewRequest(http.MethodDelete, c.URL+"/v1/tables/events/leases/"+lease.ID, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	all := map[int64]int{}
	for _, sp := range lease.Splits {
		base := sp.Node
		if base == "" {
			base = c.URL
		}
		q := url.Values{"tier": {sp.Tier}, "lease": {lease.ID}, "columns": {"id"}}
		ids, err := get(t, base+"/v1/tables/events/query?"+q.Encode())
		if err != nil {
			t.Fatalf("split %s (%s) of a lease on %s: %v", base, sp.Tier, c.Name, err)
		}
		for id, k := range ids {
			all[id] += k
		}
	}
	return all
}

// TestClusterQueryFailoverOverlap: the failover overlap, made on purpose.
// node0 stores every message of a six-partition topic and is killed with
// SIGKILL; the group's committed offsets are then where a node killed
// before its offset commit leaves them (the start of the topic), so node1,
// which joins the group next, reads every message again from there, and
// node0 restarts on its store. Both stores now hold every message, none
// committed to the Iceberg table. A cluster query from either node, and a
// read lease's splits read together (what the Trino connector does),
// return each id once; and so after node1 commits them, and after node0's
// next run skips them.
func TestClusterQueryFailoverOverlap(t *testing.T) {
	const topic, group, n = "overlap", "overlap-group", 3000
	broker, producer, adm := kafkaSetup(t, topic)
	nodes := overlaptest.Nodes(t, 2, broker, topic, group, 30*time.Second)
	overlaptest.Produce(t, producer, topic, 0, n, 10)
	overlaptest.Make(t, nodes, adm, topic, group, partitions, n)

	for _, c := range nodes {
		ids, err := get(t, c.URL+"/v1/tables/events/query?cluster=true&columns=id")
		if err != nil {
			t.Fatalf("cluster query from %s: %v", c.Name, err)
		}
		onceEach(t, "cluster query from "+c.Name+" before any commit", ids, n)
		onceEach(t, "a lease's splits from "+c.Name+" before any commit", leaseRead(t, c), n)
	}
	// A selective query: a where clause, a key, a limit.
	ids, err := get(t, nodes[1].URL+"/v1/tables/events/query?cluster=true&columns=id&where=id<100")
	if err != nil {
		t.Fatal(err)
	}
	onceEach(t, "cluster query with where id<100", ids, 100)
	if ids, err := get(t, nodes[0].URL+"/v1/tables/events/query?cluster=true&columns=id&limit=500"); err != nil || len(ids) != 500 || sumOf(ids) != 500 {
		t.Fatalf("cluster query with limit 500: %d ids, %d rows, %v", len(ids), sumOf(ids), err)
	}

	for _, c := range []*node{nodes[1], nodes[0]} {
		resp, err := http.Post(c.URL+"/v1/tables/events/compact", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("compact %s: %d %s", c.Name, resp.StatusCode, b)
		}
		for _, q := range nodes {
			ids, err := get(t, q.URL+"/v1/tables/events/query?cluster=true&columns=id")
			if err != nil {
				t.Fatalf("cluster query from %s: %v", q.Name, err)
			}
			onceEach(t, fmt.Sprintf("cluster query from %s after %s committed", q.Name, c.Name), ids, n)
			onceEach(t, fmt.Sprintf("a lease's splits from %s after %s committed", q.Name, c.Name), leaseRead(t, q), n)
		}
	}
}

// idleQuery sends a cluster query to c on a raw connection with a small
// receive buffer and reads its status line only: the coordinator blocks on
// its first writes, every node holding its cold tier.
func idleQuery(t *testing.T, c *node) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(conn, "GET /v1/tables/events/query?cluster=true HTTP/1.1\r\nHost: %s\r\n\r\n", strings.TrimPrefix(c.URL, "http://"))
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") {
		t.Fatalf("cluster query: %q %v", line, err)
	}
	return conn
}

// compactTakes commits node m's new rows on demand and says how long the
// commit waited; a commit that waits past limit fails t.
func compactTakes(t *testing.T, m *node, limit time.Duration) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.URL+"/v1/tables/events/compact", nil)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: compact: %v: its cold tier is still held %v after the query's reader stopped",
			m.Name, err, time.Since(start).Round(time.Millisecond))
	}
	var res struct {
		Rows int64 `json:"rows"`
	}
	json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if resp.StatusCode != 200 || res.Rows == 0 {
		t.Fatalf("%s: compact: status %d, %d rows: want the new rows committed", m.Name, resp.StatusCode, res.Rows)
	}
	return time.Since(start)
}

// TestClusterQueryIdleReader: a cluster query whose answer nobody reads
// (the client reads its status line and stops), and one whose coordinator
// is then stopped with SIGSTOP, hold every node's cold tier only until the
// reader timeout (3s here, against a query timeout of 2 minutes): a member's
// commit waits for the hold, then goes through.
func TestClusterQueryIdleReader(t *testing.T) {
	const topic, group = "idle-reader", "idle-reader-group"
	const readerTimeout = 3 * time.Second
	broker, producer, _ := kafkaSetup(t, topic)
	nodes := overlaptest.Nodes(t, 2, broker, topic, group, readerTimeout)
	for _, nd := range nodes {
		nd.Start(t)
	}
	// 20 MB of rows, ~10 MB a node: more than the sockets between a node
	// and its reader buffer.
	const n = 20000
	overlaptest.Produce(t, producer, topic, 0, n, 1000)
	waitLocalCluster(t, nodes[0], n)
	next := n
	for _, stop := range []bool{false, true} {
		what := "an idle client"
		if stop {
			what = "a stopped coordinator"
		}
		conn := idleQuery(t, nodes[0])
		if stop {
			nodes[0].Signal(syscall.SIGSTOP)
		}
		overlaptest.Produce(t, producer, topic, next, next+100, 10)
		next += 100
		time.Sleep(500 * time.Millisecond) // node1 stores some of them
		took := compactTakes(t, nodes[1], readerTimeout+20*time.Second)
		if took < readerTimeout/3 {
			t.Fatalf("%s: node1's commit waited %v: the query held nothing, the test did not reach the hold", what, took)
		}
		t.Logf("%s: node1's commit waited %v for the hold to end", what, took.Round(time.Millisecond))
		if stop {
			nodes[0].Signal(syscall.SIGCONT)
		}
		conn.Close()
	}
}

// waitLocalCluster waits until a cluster query from c holds want ids.
func waitLocalCluster(t *testing.T, c *node, want int) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		ids, err := get(t, c.URL+"/v1/tables/events/query?cluster=true&columns=id")
		if err == nil && len(ids) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d ids within 120s (%v)", c.Name, len(ids), want, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
