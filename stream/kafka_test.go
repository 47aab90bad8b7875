package stream_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/table"
)

// TestKafkaExactlyOnceUnderKill: a producer writes 20000 events while a
// sluice node consumes them; the node is killed with SIGKILL at random
// moments (5 rounds) and restarted on the same store. At the end the table
// holds every id exactly once.
func TestKafkaExactlyOnceUnderKill(t *testing.T) {
	broker(t)
	const n, users = 20000, 50
	topic := "kill"
	createTopic(t, topic)
	prod := newProducer(t)
	done := produceSlowly(t, prod, topic, n, users, 100)
	dir := t.TempDir()
	data := filepath.Join(dir, "node1")
	cfg := kafkaConfig("events", topic, "g-kill", "node-1", "", "")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := range 5 {
		nd := startNode(t, cfg, data)
		wait := time.Duration(500+rng.IntN(2500)) * time.Millisecond
		time.Sleep(wait)
		before := countRows(nd, "events")
		nd.kill()
		t.Logf("round %d: kill -9 after %v, %d rows queryable just before", round, wait, before)
	}
	<-done
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", n, 2*time.Minute)
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
// commit (at most the one poll it was storing).
func TestKafkaTwoNodesOneKilled(t *testing.T) {
	broker(t)
	const n, users = 20000, 50
	topic := "two"
	createTopic(t, topic)
	prod := newProducer(t)
	dir := t.TempDir()
	data1, data2 := filepath.Join(dir, "node1"), filepath.Join(dir, "node2")
	n1 := startNode(t, kafkaConfig("events", topic, "g-two", "node-1", "", ""), data1)
	n2 := startNode(t, kafkaConfig("events", topic, "g-two", "node-2", "", ""), data2)
	done := produceSlowly(t, prod, topic, n, users, 100)
	time.Sleep(4 * time.Second)
	r1, r2 := countRows(n1, "events"), countRows(n2, "events")
	n2.kill()
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
	if both > 1000 {
		t.Errorf("%d ids stored on both nodes: more than the one poll node 2 may have stored after its last commit", both)
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
	topic := "restart"
	createTopic(t, topic)
	prod := newProducer(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "node1")
	nd := startNode(t, kafkaConfig("events", topic, "g-restart", "node-1", "", ""), data)
	produceRange(t, prod, topic, 0, n/2, users)
	time.Sleep(2 * time.Second)
	b.Kill()
	t.Log("broker killed")
	deadline := time.Now().Add(30 * time.Second)
	notReady := ""
	for time.Now().Before(deadline) && notReady == "" {
		resp, err := http.Get(nd.url + "/readyz")
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
		resp, err := http.Get(nd.url + "/readyz")
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
