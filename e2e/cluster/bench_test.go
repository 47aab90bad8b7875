package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/testkafka"
)

// BenchmarkKeyQuery is a key query (one user's 2,000 of 60,000 rows,
// spread over three nodes by their Kafka partitions) through a coordinator
// of three nodes: "routed" on the key_partitioned table (it asks the
// key's partition's owner), "all" on a table fed by the same topic in its
// own group without key_partitioned (it asks every node). It reports
// p50 and p99 latency (target p99 ≤ 50 ms) and the nodes' CPU time per
// query.
func BenchmarkKeyQuery(b *testing.B) {
	broker := testkafka.Require(b)
	topic := fmt.Sprintf("keyed-bench-%d", time.Now().UnixNano())
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr))
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close()
	if resp, err := kadm.NewClient(adm).CreateTopic(context.Background(), partitions, 1, nil, topic); err != nil || resp.Err != nil {
		b.Fatalf("create topic: %v %v", err, resp.Err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer producer.Close()
	extra := fmt.Sprintf(`  - name: events_all
    hashBy: user
    sortBy: ts
    schema:
      - {name: id, type: int64}
      - {name: user, type: string}
      - {name: ts, type: timestamp}
    sources:
      - kafka: {brokers: [%s], topics: [%s], group: %s-all, session_timeout: 6s}
`, broker.Addr, topic, topic)
	nodes := startNodes(b, 3, broker.Addr, topic, topic, extra)
	settle(b, nodes, topic) // each partition's rows on its owner alone
	const rows = 60_000
	for from := 0; from < rows; from += 5000 {
		produce(b, producer, topic, from, from+5000)
	}
	for _, table := range []string{"events", "events_all"} {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if a := queryTable(nodes[0], table, ""); a.err == nil && len(a.ids) == rows {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: not every row stored within 2 minutes", table)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second) // every coordinator has fresh reports
	for _, bc := range []struct{ name, table string }{{"routed", "events"}, {"all", "events_all"}} {
		b.Run(bc.name, func(b *testing.B) {
			var lat []time.Duration
			var asked int
			cpu := nodesCPU(nodes)
			b.ResetTimer()
			for i := range b.N {
				u := user(i)
				start := time.Now()
				a := queryTable(nodes[0], bc.table, u)
				lat = append(lat, time.Since(start))
				if a.err != nil || len(a.ids) != rows/users {
					b.Fatalf("%s: %d rows, want %d (%v)", u, len(a.ids), rows/users, a.err)
				}
				asked += len(a.asked)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric((nodesCPU(nodes)-cpu)*1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(asked)/float64(b.N), "asked/op")
		})
	}
}

// nodesCPU is the user+system CPU seconds of the nodes' processes.
func nodesCPU(nodes []*node) float64 {
	total := 0.0
	for _, n := range nodes {
		total += n.CPUSeconds()
	}
	return total
}
