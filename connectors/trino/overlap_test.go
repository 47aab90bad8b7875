package trino_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/overlaptest"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/internal/testnode"
)

// overlapPartitions is the partition count of the overlap test's topic.
const overlapPartitions = 6

// The package's Kafka broker, started on first use (one test needs it)
// and stopped by TestMain.
var kafka struct {
	once sync.Once
	b    *testkafka.Broker
	err  error
	dir  string
}

func sharedKafka(t testing.TB) *testkafka.Broker {
	t.Helper()
	kafka.once.Do(func() {
		if kafka.dir, kafka.err = os.MkdirTemp("", "trino-kafka-"); kafka.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		kafka.b, kafka.err = testkafka.StartWith(ctx, kafka.dir, testkafka.Options{Partitions: overlapPartitions})
	})
	if kafka.err != nil {
		testenv.Missing(t, "a Kafka broker is needed and could not start: %v", kafka.err)
	}
	return kafka.b
}

func stopKafka() {
	if kafka.b != nil {
		kafka.b.Kill()
	}
	if kafka.dir != "" {
		os.RemoveAll(kafka.dir)
	}
}

// TestTrinoFailoverOverlap is the failover overlap of the cluster e2e test
// (TestClusterQueryFailoverOverlap, both made by internal/overlaptest) read
// through a real Trino: node0 stores every message of a six-partition topic
// and is killed with SIGKILL before its offsets are committed (the group's
// offsets are reset to the start), node1 reads every message again, and
// node0 restarts on its store, so both stores hold every message. Trino,
// with a sluice catalog on each node, counts each id once before any
// commit, after node1 commits them, and after node0's commit skips them.
func TestTrinoFailoverOverlap(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	const topic, group, n = "overlap", "overlap-group", 3000
	broker := sharedKafka(t).Addr
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	admin := kadm.NewClient(adm)
	if resp, err := admin.CreateTopic(context.Background(), overlapPartitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	overlaptest.Produce(t, producer, topic, 0, n, 0)
	nodes := overlaptest.Nodes(t, 2, broker, topic, group, 0)
	overlaptest.Make(t, nodes, admin, topic, group, overlapPartitions, n)

	trino := sharedTrino(t)
	catalogs := []string{newCatalog(t, trino, "sluice", catalogFile(t, nodes[0].URL)), newCatalog(t, trino, "sluice", catalogFile(t, nodes[1].URL))}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// onceEach asks through each catalog (each node the coordinator of its
	// read lease) for the rows, the distinct ids and their range.
	onceEach := func(when string) {
		t.Helper()
		for _, catalog := range catalogs {
			sql := "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM " + catalog + ".cluster.events"
			_, rows, err := trino.Query(ctx, sql)
			if err != nil {
				log, _ := os.ReadFile(trino.Log)
				t.Fatalf("%s: %s: %v\nTrino log (end): %s", when, sql, err, log[max(0, len(log)-3000):])
			}
			if len(rows) != 1 || len(rows[0]) != 4 {
				t.Fatalf("%s: %s: %v, want one row of four values", when, sql, rows)
			}
			got := fmt.Sprintf("%v %v %v %v", rows[0]...)
			if want := fmt.Sprintf("%d %d %d %d", n, n, 0, n-1); got != want {
				t.Fatalf("%s: %s = %s, want %s: each of the %d ids once", when, sql, got, want, n)
			}
		}
	}
	onceEach("before any commit")
	for _, nd := range []*testnode.Node{nodes[1], nodes[0]} {
		resp, err := http.Post(nd.URL+"/v1/tables/events/compact", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("compact %s: %d %s", nd.Name, resp.StatusCode, b)
		}
		onceEach("after " + nd.Name + " committed")
	}
}
