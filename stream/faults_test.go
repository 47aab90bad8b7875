package stream_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/procmem"
)

// deleteTopic deletes topic and waits until a topic of that name can be
// created again, then creates it (4 partitions): a topic deleted and
// recreated under the same name.
func recreateTopic(t *testing.T, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
	for {
		resp, err := adm.CreateTopic(ctx, 4, 1, nil, topic)
		if err == nil && resp.Err == nil {
			return
		}
		if ctx.Err() != nil || (resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists)) {
			t.Fatalf("recreate topic %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lagSeries returns the partitions of topic a node has a lag series for,
// with their values.
func lagSeries(t *testing.T, n *node, topic string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	// client_golang writes the labels sorted by name
	prefix := `sluice_source_lag_messages{partition="`
	suffix := fmt.Sprintf(`",table="events",topic=%q} `, topic)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			p, val, ok := strings.Cut(rest, suffix)
			if !ok {
				continue
			}
			var v float64
			fmt.Sscan(val, &v)
			out[p] = v
		}
	}
	return out
}

// waitLagZero waits until the node has a lag series of 0 for each of the
// 4 partitions of topic.
func waitLagZero(t *testing.T, n *node, topic string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lag map[string]float64
	for time.Now().Before(deadline) {
		lag = lagSeries(t, n, topic)
		zero := 0
		for _, v := range lag {
			if v == 0 {
				zero++
			}
		}
		if zero == 4 && len(lag) == 4 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Errorf("lag of topic %s after %v: %v, want 0 for each of 4 partitions", topic, timeout, lag)
}

// checkUpAndReady fails unless the node reports its source up and /readyz 200.
func checkUpAndReady(t *testing.T, n *node) {
	t.Helper()
	if v, _ := n.metric("sluice_source_up", `table="events"`); v != 1 {
		t.Errorf("sluice_source_up %v, want 1", v)
	}
	resp, err := http.Get(n.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz %s, want 200", resp.Status)
	}
}

// logCount counts the lines of a node's log containing sub.
func logCount(t *testing.T, n *node, sub string) int {
	b, err := os.ReadFile(n.Log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), sub)
}

// TestKafkaTopicRecreated: a topic deleted and recreated under the same
// name, once under a running node and once while it is down, with more
// messages in the new topic than the stored offsets (so only the topic ID
// can tell). Policy: each partition starts again at the new log's
// beginning, loudly (sluice_source_position_resets_total, an ERROR line);
// at the end every id of the three topics is stored exactly once, the lag
// is 0 (not clamped from below), and the node backed off instead of
// spinning on UNKNOWN_TOPIC_ID.
func TestKafkaTopicRecreated(t *testing.T) {
	t.Parallel()
	broker(t)
	const users = 20
	topic := uniqueName("recreate")
	createTopic(t, topic)
	// A producer per topic instance: franz-go never produces to a
	// recreated topic from the client that knew the first one.
	produceRange(t, newProducer(t), topic, 0, 2000, users)
	data := filepath.Join(t.TempDir(), "node1")
	cfg := kafkaConfig("events", topic, "g-"+topic, "node-1", "", "")
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", 2000, time.Minute)

	recreateTopic(t, topic)
	produceRange(t, newProducer(t), topic, 2000, 3000, users)
	waitRows(t, nd, "events", 3000, 2*time.Minute)
	if n := logCount(t, nd, "fetch error"); n > 200 {
		t.Errorf("%d fetch errors logged across the recreation: spinning instead of backing off", n)
	}
	nd.stop()

	recreateTopic(t, topic)
	produceRange(t, newProducer(t), topic, 3000, 6000, users)
	nd = startNode(t, cfg, data)
	waitRows(t, nd, "events", 6000, 2*time.Minute)
	waitLagZero(t, nd, topic, 15*time.Second)
	checkUpAndReady(t, nd)
	if v, _ := nd.metric("sluice_source_position_resets_total", `table="events"`); v < 1 {
		t.Errorf("sluice_source_position_resets_total %v after a restart on a recreated topic, want at least 1", v)
	}
	if logCount(t, nd, "topic deleted and recreated") == 0 {
		t.Errorf("no log line says the topic was recreated: %s", nd.Tail())
	}
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, 6000)
	checkOrder(t, rows)
}

// TestKafkaTransactionalLag: a topic written by a transactional producer
// (committed transactions, one aborted) is consumed in full: the
// committed records are stored once, the aborted ones never, and the lag
// of every partition comes to 0, not 1 (the last commit marker's offset).
func TestKafkaTransactionalLag(t *testing.T) {
	t.Parallel()
	broker(t)
	const users = 20
	topic := uniqueName("txn")
	createTopic(t, topic)
	tx, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.TransactionalID(uniqueName("tx")), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	txn := func(from, to int, commit kgo.TransactionEndTry) {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			k, v := event(i, users)
			recs = append(recs, &kgo.Record{Key: []byte(k), Value: v})
		}
		if err := tx.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	txn(0, 300, kgo.TryCommit)
	txn(1000, 1100, kgo.TryAbort)
	txn(300, 600, kgo.TryCommit)
	data := filepath.Join(t.TempDir(), "node1")
	nd := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-1", "", ""), data)
	waitRows(t, nd, "events", 600, time.Minute)
	waitLagZero(t, nd, topic, 15*time.Second)
	nd.stop()
	ids, _ := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, 600)
}

// TestKafkaLagOnlyForHeldPartitions: a node that loses partitions to a
// second node of its group while it is storing batches of them (a slow
// computed column keeps a batch in flight most of the time) drops their
// lag series: after the rebalance each partition has a series on exactly
// one node (the one holding it), none on both (a phantom lag).
func TestKafkaLagOnlyForHeldPartitions(t *testing.T) {
	t.Parallel()
	broker(t)
	const n, users = 6000, 40
	topic := uniqueName("phantom")
	createTopic(t, topic)
	slow := `    computed:
      - name: busy
        type: int64
        func: |
          function main(row)
            local x = 0
            for i = 1, 20000 do x = x + i end
            return x
          end
`
	dir := t.TempDir()
	n1 := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-1", slow, ""), filepath.Join(dir, "node1"))
	done := produceSlowly(t, newProducer(t), topic, n, users, 100)
	waitSomeRows(t, n1, "events")
	n2 := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-2", slow, ""), filepath.Join(dir, "node2"))
	waitSomeRows(t, n2, "events")
	<-done
	deadline := time.Now().Add(2 * time.Minute)
	for countRows(n1, "events")+countRows(n2, "events") < n && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // two lag refreshes
	l1, l2 := lagSeries(t, n1, topic), lagSeries(t, n2, topic)
	var all []string
	for p := range l1 {
		all = append(all, "node1:"+p)
		if _, both := l2[p]; both {
			t.Errorf("partition %s has a lag series on both nodes (node 1: %v, node 2: %v)", p, l1[p], l2[p])
		}
	}
	for p := range l2 {
		all = append(all, "node2:"+p)
	}
	sort.Strings(all)
	if len(all) != 4 {
		t.Errorf("lag series %v: want one per partition, 4 in all", all)
	}
	t.Logf("lag series: node 1 %v, node 2 %v", l1, l2)
	n1.stop()
	n2.stop()
}

// TestNATSStreamRecreated: a JetStream stream deleted and recreated under
// the same name, once under a running node (fewer messages than the stored
// sequence) and once while it is down (more messages than the stored
// sequence, so only the creation time can tell). Policy: the new stream
// is consumed from its first message, loudly; every id is stored once.
func TestNATSStreamRecreated(t *testing.T) {
	t.Parallel()
	const users = 10
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
	stream := uniqueName("RECREATE")
	subject := strings.ToLower(stream)
	create := func() {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}}); err != nil {
			t.Fatal(err)
		}
	}
	recreate := func() {
		if err := js.DeleteStream(ctx, stream); err != nil {
			t.Fatal(err)
		}
		create()
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			_, v := event(i, users)
			if _, err := js.PublishAsync(fmt.Sprintf("%s.u%d", subject, i%users), v); err != nil {
				t.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
	}
	create()
	publish(0, 500)
	cfg := fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - nats: {url: %q, stream: %s, subject: "%s.>", durable: sluice, max_batch: 200, fetch_wait: 200ms}
`, natsURL, stream, subject)
	data := filepath.Join(t.TempDir(), "node1")
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", 500, time.Minute)
	recreate()
	publish(500, 800)
	waitRows(t, nd, "events", 800, time.Minute)
	nd.stop()
	recreate()
	publish(800, 1500)
	nd = startNode(t, cfg, data)
	waitRows(t, nd, "events", 1500, time.Minute)
	time.Sleep(time.Second) // nothing more may come
	if v, _ := nd.metric("sluice_source_lag_messages", fmt.Sprintf("topic=%q", stream)); v != 0 {
		t.Errorf("lag %v, want 0", v)
	}
	checkUpAndReady(t, nd)
	if v, _ := nd.metric("sluice_source_position_resets_total", `table="events"`); v != 1 {
		t.Errorf("sluice_source_position_resets_total %v after a restart on a recreated stream, want 1", v)
	}
	// The log holds both runs of the node: one line per recreation.
	if n := logCount(t, nd, "stream deleted and recreated"); n != 2 {
		t.Errorf("%d log lines say the stream was recreated, want 2 (one per recreation): %s", n, nd.Tail())
	}
	nd.stop()
	ids, rows := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, 1500)
	checkOrder(t, rows)
}

// TestKafkaLargeMessages: a 10 MiB message (valid rows) and a gzip bomb
// (300 MiB of zeros in ~300 KB) over a source whose max_message_bytes is
// 4 MiB: both are dead letters naming the bound, the messages before and
// after them are stored, and the node's peak RSS stays under the
// documented 256 MB (reading the bomb whole took 5.7 GB in the report).
func TestKafkaLargeMessages(t *testing.T) {
	t.Parallel()
	broker(t)
	const users = 10
	topic := uniqueName("large")
	// The 10 MiB batch can take the broker longer than a produce request's
	// default bound (10 s) on a loaded machine, and a timed-out request is
	// retried: the test failed twice under the suite's load with its
	// produce at the context's end, and passes alone in ~30 s.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ProducerBatchMaxBytes(16<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	big := "16777216"
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &big}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	var recs []*kgo.Record
	add := func(v []byte) { recs = append(recs, &kgo.Record{Topic: topic, Value: v}) }
	for i := range 100 {
		_, v := event(i, users)
		add(v)
	}
	var huge []byte
	for i := 0; len(huge) < 10<<20; i++ {
		_, v := event(1000000+i, users)
		huge = append(append(huge, v...), '\n')
	}
	add(huge)
	add(gzipBomb(t, 300<<20))
	for i := 100; i < 200; i++ {
		_, v := event(i, users)
		add(v)
	}
	// One call for all of them (in order: one partition, one producer), not
	// a round trip each: on a loaded machine 202 round trips to the broker
	// took over the context's two minutes.
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	data := filepath.Join(t.TempDir(), "node1")
	nd := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-1", "", "          max_message_bytes: 4194304\n"), data)
	waitRows(t, nd, "events", 200, time.Minute)
	time.Sleep(time.Second) // nothing more may come
	hwm, _ := procmem.Status(nd.Pid(), "VmHWM")
	nd.stop()
	t.Logf("node peak RSS (VmHWM) %d MiB", hwm>>20)
	if hwm > 256<<20 {
		t.Errorf("node peak RSS %d MiB, over the documented 256 MB", hwm>>20)
	}
	ids, _ := storedIDs(t, data, "events")
	checkExactlyOnce(t, ids, 200)
	dead := readTable(t, data, "events_deadletter", "", "time")
	var reasons []string
	for _, d := range dead {
		reasons = append(reasons, fmt.Sprintf("%s: %s", d["origin"], d["error"]))
	}
	sort.Strings(reasons)
	want := []string{
		fmt.Sprintf("kafka %s/0@100: message too large: %d bytes, over max_message_bytes (4194304 bytes)", topic, len(huge)),
		fmt.Sprintf("kafka %s/0@101: message too large: gzip-decoded body over max_message_bytes (4194304 bytes)", topic),
	}
	if strings.Join(reasons, "\n") != strings.Join(want, "\n") {
		t.Errorf("dead letters:\n%s\nwant:\n%s", strings.Join(reasons, "\n"), strings.Join(want, "\n"))
	}
}

// gzipBomb is size zero bytes, gzipped.
func gzipBomb(t *testing.T, size int) []byte {
	t.Helper()
	return gzipRepeated(t, 0, size)
}

// gzipRepeated is a gzip file that decodes to size bytes of fill: one
// member of at most 1 MiB of them, repeated, and one member for the rest
// (a gzip file's members decode one after the other, RFC 1952, in Go's
// reader as in zcat). Compressing the whole size at once cost tens of
// CPU-seconds under the race detector; the file is the same bomb to a
// reader.
func gzipRepeated(t *testing.T, fill byte, size int) []byte {
	t.Helper()
	member := func(n int) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if _, err := zw.Write(bytes.Repeat([]byte{fill}, n)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	const chunk = 1 << 20
	out := bytes.Repeat(member(min(chunk, size)), size/chunk)
	if rest := size % chunk; rest > 0 {
		out = append(out, member(rest)...)
	}
	return out
}
