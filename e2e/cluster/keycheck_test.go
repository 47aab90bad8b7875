package cluster_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/internal/testkafka"
)

// createTopic makes topic with n partitions on the broker.
func createTopic(t *testing.T, addr, topic string, n int32) {
	t.Helper()
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(adm).CreateTopic(ctx, n, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
}

// waitReports waits until every node's report of events is ready.
func waitReports(t *testing.T, nodes []*node) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for _, n := range nodes {
		for {
			if th, ok := report(n); ok && th.Ready {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no ready report within 90s: %s", n.Name, n.Tail())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// checkRoutingOff wants every node to say that key routing of events is
// off: in its report, /readyz (still 200), /metrics and its log.
func checkRoutingOff(t *testing.T, nodes []*node, want string) {
	t.Helper()
	off := 0
	for _, n := range nodes {
		th, _ := report(n)
		if th.Off == "" {
			continue
		}
		off++
		if !strings.Contains(th.Off, want) {
			t.Errorf("%s: routing off for %q, want it to say %q", n.Name, th.Off, want)
		}
		resp, err := http.Get(n.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `key routing off (key queries ask every node): table "events"`) {
			t.Errorf("%s: /readyz %d %q, want 200 naming the table's routing", n.Name, resp.StatusCode, body)
		}
		resp, err = http.Get(n.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `sluice_key_routing_off{table="events"} 1`) {
			t.Errorf("%s: /metrics lacks sluice_key_routing_off 1", n.Name)
		}
		if log := n.Tail(); !strings.Contains(log, `"level":"ERROR"`) || !strings.Contains(log, "key routing is off") {
			t.Errorf("%s: no ERROR saying routing is off in the log:\n%s", n.Name, log)
		}
	}
	if off == 0 {
		t.Errorf("no node reports key routing off")
	}
}

// TestKeyQueryForeignPartitioner: a producer that partitions by CRC32 of
// the key (librdkafka's consistent_random), not murmur2: the nodes find
// keys in partitions murmur2 does not give them, turn routing off before
// storing them, and every key query from every coordinator returns every
// row of its key.
func TestKeyQueryForeignPartitioner(t *testing.T) {
	broker := testkafka.Require(t)
	const topic = "keyed-crc32"
	createTopic(t, broker.Addr, topic, partitions)
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	nodes := startNodes(t, 3, broker.Addr, topic, topic+"-group", "")
	settle(t, nodes, topic)
	time.Sleep(time.Second) // every coordinator has live reports: routing is on
	misplaced := 0
	var recs []*kgo.Record
	for id := range 600 {
		u := user(id)
		p := int32(crc32.ChecksumIEEE([]byte(u)) % partitions)
		if id < users && p != cluster.KafkaKeyPartition([]byte(u), partitions) {
			misplaced++
		}
		ts := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Second).Format(time.RFC3339)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(u), Value: fmt.Appendf(nil, `{"id":%d,"user":%q,"ts":%q}`, id, u, ts)})
	}
	if misplaced == 0 {
		t.Fatal("CRC32 and murmur2 agree on every key: the test proves nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	all := waitAll(t, nodes[0], 600)
	checkKeys(t, nodes, all, false, nil)
	checkRoutingOff(t, nodes, "hashes (murmur2")
	t.Logf("%d of %d users' keys are in another partition than murmur2's", misplaced, users)
}

// TestKeyQueryGrownTopic: a topic grown from 3 to 6 partitions, then every
// node killed and restarted: the nodes' stores hold rows routed by 3
// partitions, the brokers now say 6, so routing stays off and every key
// query returns every row of its key.
func TestKeyQueryGrownTopic(t *testing.T) {
	broker := testkafka.Require(t)
	const topic = "keyed-grown"
	createTopic(t, broker.Addr, topic, 3)
	nodes := startNodes(t, 3, broker.Addr, topic, topic+"-group", "")
	waitReports(t, nodes)
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	produce(t, producer, topic, 0, 600)
	producer.Close()
	waitAll(t, nodes[0], 600)

	adm, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(adm).CreatePartitions(ctx, 3, topic); err != nil {
		t.Fatalf("grow the topic: %v", err)
	}
	for _, n := range nodes {
		n.Kill()
	}
	for _, n := range nodes {
		n.Start(t)
	}
	waitReports(t, nodes)
	// A new producer sees 6 partitions: new keys go by murmur2 over 6.
	producer, err = kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produce(t, producer, topic, 600, 1200)
	all := waitAll(t, nodes[0], 1200)
	time.Sleep(time.Second) // every coordinator has the restarted nodes' reports
	checkKeys(t, nodes, all, false, nil)
	checkRoutingOff(t, nodes, "routed by 3")
}
