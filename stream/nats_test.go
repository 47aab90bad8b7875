package stream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicedb/sluice/internal/freeport"
)

// TestNATSExactlyOnceUnderKill: events published to a JetStream stream
// while a sluice node consumes them; the node is killed with SIGKILL at
// random moments (4 rounds) and restarted; every id is stored exactly once,
// in order within each user.
func TestNATSExactlyOnceUnderKill(t *testing.T) {
	t.Parallel()
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
	// A stream and subjects of this run only: -count=2 must not find the
	// first run's messages (nor overlapping subjects).
	stream := uniqueName("EVENTS")
	subject := strings.ToLower(stream)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			_, v := event(i, users)
			if _, err := js.PublishAsync(fmt.Sprintf("%s.u%d", subject, i%users), v); err != nil {
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
      - nats: {url: %q, stream: %s, subject: "%s.>", durable: sluice, max_batch: 500, metadata: [subject, sequence]}
`, natsURL, stream, subject)
	dir := t.TempDir()
	data := filepath.Join(dir, "node1")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for round := range 4 {
		nd := startNode(t, cfg, data)
		wait := time.Duration(300+rng.IntN(1500)) * time.Millisecond
		time.Sleep(wait)
		before := countRows(nd, "events")
		nd.Kill()
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
		if r["_subject"] != subject+"."+r["user"].(string) || r["_sequence"] == nil {
			t.Fatalf("row %v: _subject and _sequence", r)
		}
	}
}

// TestNATSServerRestart: the NATS server is shut down mid-stream and
// started again on the same port and store; the node reconnects,
// recreates its consumer at the stored sequence and ends with every id
// exactly once.
func TestNATSServerRestart(t *testing.T) {
	t.Parallel()
	const n, users = 6000, 10
	ctx := context.Background()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	storeDir := t.TempDir()
	startNATS := func() *natsserver.Server {
		ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: storeDir, NoSigs: true, NoLog: true})
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats server not ready")
		}
		return ns
	}
	ns := startNATS()
	defer func() { ns.Shutdown() }()
	url := ns.ClientURL()
	publish := func(from, to int) {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RESTART", Subjects: []string{"restart.>"}}); err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			_, v := event(i, users)
			if _, err := js.PublishAsync(fmt.Sprintf("restart.u%d", i%users), v); err != nil {
				t.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
	}
	publish(0, n/2)
	cfg := fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - nats: {url: %q, stream: RESTART, subject: "restart.>", durable: sluice, max_batch: 200}
`, url)
	data := filepath.Join(t.TempDir(), "node1")
	nd := startNode(t, cfg, data)
	time.Sleep(300 * time.Millisecond)
	ns.Shutdown()
	ns.WaitForShutdown()
	before := countRows(nd, "events")
	t.Logf("nats server shut down with %d rows queryable", before)
	time.Sleep(2 * time.Second)
	ns = startNATS()
	publish(n/2, n)
	waitRows(t, nd, "events", n, time.Minute)
	time.Sleep(500 * time.Millisecond)
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, n)
	checkOrder(t, rows)
}
