package stream_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/table"
)

// TestKafkaExactlyOnceUnderKill: a producer writes 20000 events while a
// sluice node consumes them; the node is killed with SIGKILL at random
// moments (5 rounds) and restarted on the same store. At the end the table
// holds every id exactly once.
func TestKafkaExactlyOnceUnderKill(t *testing.T) {
	t.Parallel()
	broker(t)
	const n, users = 20000, 50
	topic := uniqueName("kill")
	createTopic(t, topic)
	prod := newProducer(t)
	done := produceSlowly(t, prod, topic, n, users, 100)
	dir := t.TempDir()
	data := filepath.Join(dir, "node1")
	cfg := kafkaConfig("events", topic, "g-"+topic, "node-1", "", "")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := range 5 {
		nd := startNode(t, cfg, data)
		wait := time.Duration(500+rng.IntN(2500)) * time.Millisecond
		time.Sleep(wait)
		before := countRows(nd, "events")
		nd.Kill()
		t.Logf("round %d: kill -9 after %v, %d rows queryable just before", round, wait, before)
	}
	<-done
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", n, 2*time.Minute)
	// The metrics name each partition's lag (0 once caught up, refreshed
	// every 2 s from the end offsets) and count the rebalances.
	deadline := time.Now().Add(10 * time.Second)
	for p := 0; p < 4; {
		v, ok := nd.metric("sluice_source_lag_messages", fmt.Sprintf(`partition="%d",table="events",topic=%q`, p, topic))
		if ok && v == 0 {
			p++
			continue
		}
		if time.Now().After(deadline) {
			t.Errorf("sluice_source_lag_messages for partition %d: %v (present: %v), want 0", p, v, ok)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v, _ := nd.metric("sluice_source_rebalances_total", `table="events"`); v < 1 {
		t.Errorf("sluice_source_rebalances_total %v, want at least 1", v)
	}
	if v, _ := nd.metric("sluice_source_up", `table="events"`); v != 1 {
		t.Errorf("sluice_source_up %v, want 1", v)
	}
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, n)
	checkOrder(t, rows)
}

// checkOrder: the rows of one user (one partition of the topic, one hash
// key of the table, all with the same event time) come back in the order
// they were produced.
func checkOrder(t *testing.T, rows []table.Row) {
	t.Helper()
	last := map[string]int64{}
	bad := 0
	for _, r := range rows {
		u, id := r["user"].(string), r["id"].(int64)
		if prev, ok := last[u]; ok && id < prev {
			bad++
		}
		last[u] = id
	}
	if bad > 0 {
		t.Fatalf("%d rows out of produce order within their user (partition, event time, hash key)", bad)
	}
}

// TestKafkaTwoNodesOneKilled: two nodes in one group split the topic's
// partitions; one is killed with SIGKILL mid-stream and not restarted; the
// other takes its partitions over after the session timeout. Each store
// holds each id at most once, together they hold every id, and an id is in
// both stores only if the killed node stored it after its last offset
// commit (commits run every 250 ms: at ~2000 messages/s, well under 1500).
func TestKafkaTwoNodesOneKilled(t *testing.T) {
	t.Parallel()
	broker(t)
	const n, users = 20000, 50
	topic := uniqueName("two")
	createTopic(t, topic)
	prod := newProducer(t)
	dir := t.TempDir()
	data1, data2 := filepath.Join(dir, "node1"), filepath.Join(dir, "node2")
	n1 := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-1", "", ""), data1)
	n2 := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-2", "", ""), data2)
	done := produceSlowly(t, prod, topic, n, users, 100)
	time.Sleep(3 * time.Second)
	waitSomeRows(t, n2, "events")
	r1, r2 := countRows(n1, "events"), countRows(n2, "events")
	n2.Kill()
	t.Logf("node 2 killed; rows queryable just before: node 1 %d, node 2 %d", r1, r2)
	if r1 <= 0 || r2 <= 0 {
		t.Errorf("both nodes should have consumed some partitions before the kill: %d and %d rows", r1, r2)
	}
	<-done
	ids2, rows2 := storedIDs(t, data2, "events")
	deadline := time.Now().Add(2 * time.Minute)
	for countRows(n1, "events")+len(ids2) < n && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	// Let node 1 finish what it has (it may hold a few ids node 2 had too).
	time.Sleep(2 * time.Second)
	n1.stop()
	ids1, rows1 := storedIDs(t, data1, "events")
	for name, ids := range map[string]map[int64]int{"node 1": ids1, "node 2": ids2} {
		for id, c := range ids {
			if c > 1 {
				t.Errorf("%s stores id %d %d times", name, id, c)
			}
		}
	}
	both, missing := 0, 0
	for i := range int64(n) {
		switch {
		case ids1[i] > 0 && ids2[i] > 0:
			both++
		case ids1[i] == 0 && ids2[i] == 0:
			missing++
		}
	}
	t.Logf("node 1 stores %d ids, node 2 %d; %d in both (stored by node 2 after its last commit)", len(ids1), len(ids2), both)
	if missing > 0 {
		t.Fatalf("%d ids in neither store", missing)
	}
	if both > 1500 {
		t.Errorf("%d ids stored on both nodes: more than node 2 may have stored after its last commit", both)
	}
	checkOrder(t, rows1)
	checkOrder(t, rows2)
}

// TestKafkaBrokerRestart: the broker is killed (SIGKILL) mid-stream and
// restarted; the node retries, reports the broker in /readyz meanwhile, and
// ends with every id exactly once.
func TestKafkaBrokerRestart(t *testing.T) {
	b := broker(t)
	const n, users = 10000, 20
	topic := uniqueName("restart")
	createTopic(t, topic)
	prod := newProducer(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "node1")
	nd := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-1", "", ""), data)
	produceRange(t, prod, topic, 0, n/2, users)
	time.Sleep(2 * time.Second)
	b.Kill()
	t.Log("broker killed")
	deadline := time.Now().Add(30 * time.Second)
	notReady := ""
	for time.Now().Before(deadline) && notReady == "" {
		resp, err := http.Get(nd.URL + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				notReady = string(body)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if notReady == "" {
		t.Error("/readyz stayed ready with the broker down for 30s")
	} else {
		t.Logf("/readyz with the broker down: %s", strings.TrimSpace(notReady))
	}
	if err := b.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Log("broker restarted")
	produceRange(t, prod, topic, n/2, n, users)
	waitRows(t, nd, "events", n, 3*time.Minute)
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(nd.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("/readyz not ready 30s after the broker came back")
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, n)
	checkOrder(t, rows)
}

// TestKafkaPoisonMessages: undecodable messages (bad JSON, a bad second
// line under on_bad_line reject, broken gzip) and messages failing a
// reject column are dead letters with their topic, partition and offset;
// every other message is stored exactly once and the partitions move on.
// Keys are visible to scripts (_key).
func TestKafkaPoisonMessages(t *testing.T) {
	t.Parallel()
	broker(t)
	const n, users = 3000, 10
	topic := uniqueName("poison")
	createTopic(t, topic)
	prod := newProducer(t)
	extraTable := `    computed:
      - name: double
        type: int64
        on_error: reject
        func: |
          function main(row)
            if row.id % 100 == 7 then error("id ends in 07") end
            return row.id * 2
          end
      - name: key_seen
        type: string
        func: "function main(row) return row._key end"
`
	extraSource := "          metadata: [key, headers, partition, offset]\n"
	dir := t.TempDir()
	data := filepath.Join(dir, "node1")
	nd := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-1", extraTable, extraSource), data)
	ctx := context.Background()
	poison := map[int]string{}
	var recs []*kgo.Record
	for i := range n {
		k, v := event(i, users)
		switch i % 100 {
		case 13:
			v, poison[i] = []byte(`{"id":`+strconv.Itoa(i)+`, not json`), "decode"
		case 21:
			v, poison[i] = append(append(v, '\n'), "also not json"...), "second line"
		case 33:
			v, poison[i] = []byte{0x1f, 0x8b, 1, 2, 3}, "gzip"
		case 7:
			poison[i] = "reject column"
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: v, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitRows(t, nd, "events", n-len(poison), time.Minute)
	time.Sleep(time.Second) // nothing more may come
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	for i := range n {
		want := 1
		if _, p := poison[i]; p {
			want = 0
		}
		if ids[int64(i)] != want {
			t.Errorf("id %d (%s) stored %d times, want %d", i, poison[i], ids[int64(i)], want)
		}
	}
	for _, r := range rows {
		id := r["id"].(int64)
		if r["double"] != 2*id || r["key_seen"] != r["user"] || r["_key"] != r["user"] || r["_partition"] == nil || r["_offset"] == nil {
			t.Fatalf("row %v: want double = 2*id, key_seen = _key = user, _partition and _offset set", r)
		}
		if h := fmt.Sprintf("%s", r["_headers"]); h != `{"h":"v"}` {
			t.Fatalf("row %v: _headers %s", r, h)
		}
	}
	dead := readTable(t, data, "events_deadletter", "", "time")
	if len(dead) != len(poison) {
		t.Errorf("%d dead letters, want %d (one per poison message)", len(dead), len(poison))
	}
	origin := regexp.MustCompile(`^kafka ` + regexp.QuoteMeta(topic) + `/[0-3]@[0-9]+$`)
	rejected := 0
	for _, d := range dead {
		if o, _ := d["origin"].(string); !origin.MatchString(o) {
			t.Errorf("dead letter %v: origin %q is not topic/partition@offset", d, o)
		}
		if d["column"] == "double" && d["loader"] == "lua" {
			rejected++
		}
	}
	if rejected != n/100 {
		t.Errorf("%d dead letters name the reject column double (lua), want %d", rejected, n/100)
	}
	if !t.Failed() {
		t.Logf("%d poison messages in events_deadletter, e.g. %v", len(dead), dead[0])
	}
}

// readTable reads every row of a stopped node's table.
func readTable(t *testing.T, data, name, hashBy, sortBy string) []table.Row {
	t.Helper()
	s, err := table.Open(data, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: name, HashBy: hashBy, SortBy: sortBy, Columns: nil})
	if err != nil {
		t.Fatal(err)
	}
	var rows []table.Row
	if err := tb.Query(context.Background(), table.Query{}, func(r table.Row) error {
		c := make(table.Row, len(r))
		for k, v := range r {
			c[k] = v
		}
		rows = append(rows, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestKafkaGracefulHandover: two nodes in one group; one is stopped with
// SIGTERM mid-stream. It finishes the batch it is storing and commits its
// offsets before leaving, so the other node takes its partitions over
// exactly where it stopped: every id in exactly one of the two stores.
func TestKafkaGracefulHandover(t *testing.T) {
	t.Parallel()
	broker(t)
	const n, users = 12000, 50
	topic := uniqueName("handover")
	createTopic(t, topic)
	prod := newProducer(t)
	dir := t.TempDir()
	data1, data2 := filepath.Join(dir, "node1"), filepath.Join(dir, "node2")
	n1 := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-1", "", ""), data1)
	n2 := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-2", "", ""), data2)
	done := produceSlowly(t, prod, topic, n, users, 100)
	time.Sleep(2 * time.Second)
	waitSomeRows(t, n2, "events")
	n2.stop()
	<-done
	ids2, _ := storedIDs(t, data2, "events")
	deadline := time.Now().Add(2 * time.Minute)
	for countRows(n1, "events")+len(ids2) < n && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(time.Second)
	n1.stop()
	ids1, _ := storedIDs(t, data1, "events")
	t.Logf("node 1 stores %d ids, node 2 %d", len(ids1), len(ids2))
	if len(ids2) == 0 {
		t.Fatal("node 2 stored nothing before it was stopped")
	}
	union := map[int64]int{}
	for id, c := range ids1 {
		union[id] += c
	}
	for id, c := range ids2 {
		union[id] += c
	}
	checkExactlyOnce(t, union, n)
}

// TestUnreachableServersReported: a node whose Kafka broker and NATS
// server cannot be reached starts anyway, serves HTTP ingest, and /readyz
// answers 503 naming both sources.
func TestUnreachableServersReported(t *testing.T) {
	t.Parallel()
	needBinary(t)
	kport, _ := freeport.Port()
	nport, _ := freeport.Port()
	cfg := fmt.Sprintf(`tables:
  - name: events
    sortBy: ts
    sources:
      - kafka: {brokers: ["127.0.0.1:%d"], topics: [events], group: g}
      - nats: {url: "nats://127.0.0.1:%d", stream: EVENTS, durable: sluice}
`, kport, nport)
	nd := startNode(t, cfg, filepath.Join(t.TempDir(), "node1"))
	resp, err := http.Post(nd.URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(`{"ts":"2026-01-01T00:00:00Z","id":1}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP ingest with the brokers down: %s", resp.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(nd.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "kafka g") && strings.Contains(string(body), "nats EVENTS/sluice") {
			t.Logf("/readyz: %s", strings.TrimSpace(string(body)))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after 30s with both servers down: %d %s", resp.StatusCode, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	nd.stop()
	// Logged too, once (not at each of the client's retries), naming the
	// broker; and the log stays JSON line by line.
	refused := linesWith(logLines(t, nd.Log), "cannot reach the kafka broker")
	if len(refused) != 1 || refused[0]["broker"] != fmt.Sprintf("127.0.0.1:%d", kport) || refused[0]["level"] != "ERROR" {
		t.Errorf("lines saying the broker is unreachable: %v, want one naming 127.0.0.1:%d:\n%s", refused, kport, nd.Tail())
	}
}

// waitSomeRows waits (up to 30 s) until a node has stored some rows, i.e.
// the group has given it partitions.
func waitSomeRows(t *testing.T, n *node, tableName string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for countRows(n, tableName) <= 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
}
