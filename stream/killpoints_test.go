package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicedb/sluice/table"
)

// killPoints are where the fault runs kill the node, in this order: right
// after the first commits of a process (a batch's rows and position on
// disk, the source not told: no offset marked, no ack) and right before
// some (staged, not committed). A position committed in a second batch
// after the rows makes "after-commit:1" leave rows without their position,
// stored again after the restart.
var killPoints = []string{"after-commit:1", "before-commit:1", "after-commit:2", "before-commit:3", "after-commit:3", "after-commit:4"}

// runToFault runs `sluice serve` with table.FaultEnv set to point until it
// kills itself there, and fails the test if it does not within a minute.
func runToFault(t *testing.T, cfg, data, point string) {
	t.Helper()
	n := newNode(t, cfg, data, []string{table.FaultEnv + "=" + point})
	n.Log = data + ".fault.log"
	if err := os.Remove(n.Log); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := n.Spawn(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Wait(ctx); err != nil {
		t.Fatalf("no fault at %s: %v", point, err)
	}
	if b, _ := os.ReadFile(n.Log); !strings.Contains(string(b), "table: fault "+point) {
		t.Fatalf("the node exited without reaching the fault %s: %s", point, b)
	}
}

// TestKafkaKillPoints: the node is killed right before and right after
// single commits of its batches (table.FaultEnv), restarted each time on
// the same store, and ends with every id exactly once.
func TestKafkaKillPoints(t *testing.T) {
	t.Parallel()
	broker(t)
	const n, users = 3000, 20
	topic := uniqueName("killpoints")
	createTopic(t, topic)
	produceRange(t, newProducer(t), topic, 0, n, users)
	cfg := kafkaConfig("events", topic, "g-"+topic, "node-1", "", "          max_poll_records: 100\n")
	data := filepath.Join(t.TempDir(), "node1")
	for _, point := range killPoints {
		runToFault(t, cfg, data, point)
		ids, _ := storedIDs(t, data, "events")
		t.Logf("killed at %s: %d ids stored", point, len(ids))
	}
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", n, time.Minute)
	time.Sleep(time.Second) // nothing more may come
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, n)
	checkOrder(t, rows)
}

// TestNATSKillPoints: the same on a JetStream stream.
func TestNATSKillPoints(t *testing.T) {
	t.Parallel()
	const n, users = 3000, 20
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
	stream := uniqueName("KILLPOINTS")
	subject := strings.ToLower(stream)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		_, v := event(i, users)
		if _, err := js.PublishAsync(fmt.Sprintf("%s.u%d", subject, i%users), v); err != nil {
			t.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	cfg := fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - nats: {url: %q, stream: %s, subject: "%s.>", durable: sluice, max_batch: 100}
`, natsURL, stream, subject)
	data := filepath.Join(t.TempDir(), "node1")
	for _, point := range killPoints {
		runToFault(t, cfg, data, point)
		ids, _ := storedIDs(t, data, "events")
		t.Logf("killed at %s: %d ids stored", point, len(ids))
	}
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", n, time.Minute)
	time.Sleep(time.Second) // nothing more may come
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, n)
	checkOrder(t, rows)
}
