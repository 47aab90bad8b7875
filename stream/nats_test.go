package stream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNATSExactlyOnceUnderKill: events published to a JetStream stream
// while a sluice node consumes them; the node is killed with SIGKILL at
// random moments (4 rounds) and restarted; every id is stored exactly once,
// in order within each user.
func TestNATSExactlyOnceUnderKill(t *testing.T) {
	const n, users = 10000, 20
	ctx := context.Background()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			_, v := event(i, users)
			if _, err := js.PublishAsync(fmt.Sprintf("events.u%d", i%users), v); err != nil {
				t.Errorf("publish: %v", err)
				return
			}
			if i%100 == 99 {
				<-js.PublishAsyncComplete()
				time.Sleep(50 * time.Millisecond)
			}
		}
		<-js.PublishAsyncComplete()
	}()
	cfg := fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - nats: {url: %q, stream: EVENTS, subject: "events.>", durable: sluice, max_batch: 500, metadata: [subject, sequence]}
`, natsURL)
	dir := t.TempDir()
	data := filepath.Join(dir, "node1")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for round := range 4 {
		nd := startNode(t, cfg, data)
		wait := time.Duration(300+rng.IntN(1500)) * time.Millisecond
		time.Sleep(wait)
		before := countRows(nd, "events")
		nd.kill()
		t.Logf("round %d: kill -9 after %v, %d rows queryable just before", round, wait, before)
	}
	<-done
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", n, time.Minute)
	time.Sleep(500 * time.Millisecond)
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, n)
	checkOrder(t, rows)
	for _, r := range rows {
		if r["_subject"] != "events."+r["user"].(string) || r["_sequence"] == nil {
			t.Fatalf("row %v: _subject and _sequence", r)
		}
	}
}
