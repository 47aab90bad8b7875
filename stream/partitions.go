package stream

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionCounts asks the brokers how many partitions each topic has,
// over a client of its own that is closed before it returns. A topic the
// brokers do not know, or know with no partitions, is an error naming it:
// its count is what routes keys to partitions, and a guess would send
// queries to the wrong node.
func PartitionCounts(ctx context.Context, conn KafkaConn, brokers, topics []string) (map[string]int32, error) {
	cl, err := conn.newClient(brokers, kgo.ClientID("sluice-partitions"))
	if err != nil {
		return nil, fmt.Errorf("stream: kafka client: %w", err)
	}
	defer cl.Close()
	meta, err := kadm.NewClient(cl).Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("stream: kafka metadata of %v: %w", topics, err)
	}
	counts := make(map[string]int32, len(topics))
	for _, topic := range topics {
		d, ok := meta.Topics[topic]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			return nil, fmt.Errorf("stream: kafka topic %s: no partitions (%v)", topic, d.Err)
		}
		counts[topic] = int32(len(d.Partitions))
	}
	return counts, nil
}
