package stream_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
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
	ids, _ := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, n)
}
