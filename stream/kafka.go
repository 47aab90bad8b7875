package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/table"
)

// kafkaFields are the metadata a Kafka source can add to rows.
var kafkaFields = map[string]metaField{
	"key": {"_key", func(m *Message) any {
		if m.Key == nil {
			return nil
		}
		return string(m.Key)
	}},
	"headers":   {"_headers", func(m *Message) any { return headersJSON(m.Headers) }},
	"topic":     {"_topic", func(m *Message) any { return m.Topic }},
	"partition": {"_partition", func(m *Message) any { return int64(m.Partition) }},
	"offset":    {"_offset", func(m *Message) any { return m.Offset }},
	"timestamp": {"_timestamp", func(m *Message) any { return m.Time }},
}

// commitInterval is how often stored offsets are committed to the group.
const commitInterval = 250 * time.Millisecond

// Kafka consumes a table's Kafka source in a consumer group.
type Kafka struct {
	table    string
	cfg      config.KafkaSource
	w        *Writer
	store    *table.Store
	log      *slog.Logger
	counters *Counters
	// ExtraOpts are appended to the client's options (tests).
	ExtraOpts []kgo.Opt

	mu   sync.Mutex
	next map[tp]int64 // the next offset to store, per assigned partition
}

type tp struct {
	topic     string
	partition int32
}

// NewKafka makes the Kafka source cfg of table t.
func NewKafka(t Target, tableName string, cfg config.KafkaSource) (*Kafka, error) {
	k := &Kafka{table: tableName, cfg: cfg, store: t.Store, log: t.Log, counters: newCounters(tableName, "kafka"), next: map[tp]int64{}}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	k.log = k.log.With("table", tableName, "source", "kafka", "group", cfg.Group)
	t.Log = k.log
	w, err := newWriter(t, cfg.Format, cfg.Metadata, kafkaFields, func(m *Message) string {
		return fmt.Sprintf("kafka %s/%d@%d", m.Topic, m.Partition, m.Offset)
	})
	if err != nil {
		return nil, err
	}
	k.w = w
	return k, nil
}

// Name implements Source.
func (k *Kafka) Name() string { return fmt.Sprintf("kafka %s%v", k.cfg.Group, k.cfg.Topics) }

// Counters implements Source.
func (k *Kafka) Counters() *Counters { return k.counters }

// PositionName is the name under which the next offset of a partition is
// stored with the rows of table.
func PositionName(table, topic string, partition int32) string {
	return fmt.Sprintf("%s/kafka/%s/%d", table, topic, partition)
}

func (k *Kafka) stored(t string, p int32) (int64, bool, error) {
	v, err := k.store.Position(PositionName(k.table, t, p))
	if err != nil || v == nil {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("stream: position of %s/%d is %d bytes, want 8", t, p, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

// adjust starts each assigned partition at the later of the position
// stored with this node's rows and the offset committed to the group
// (which another node, whose store holds the rows before it, committed
// after storing them); with neither, at the configured start.
func (k *Kafka) adjust(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for topic, parts := range offsets {
		for p, o := range parts {
			committed := o.EpochOffset().Offset
			stored, ok, err := k.stored(topic, p)
			if err != nil {
				return nil, err
			}
			start := int64(-1)
			if committed >= 0 {
				start = committed
			}
			if ok && stored > start {
				start = stored
			}
			if start >= 0 {
				parts[p] = kgo.NewOffset().At(start).WithEpoch(-1)
				k.next[tp{topic, p}] = start
			} else {
				delete(k.next, tp{topic, p})
			}
			k.log.Info("partition assigned", "topic", topic, "partition", p, "stored", stored, "committed", committed, "start", start)
		}
	}
	return offsets, nil
}

func (k *Kafka) dropPartitions(ps map[string][]int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for topic, parts := range ps {
		for _, p := range parts {
			delete(k.next, tp{topic, p})
			k.counters.dropLag(topic, p)
		}
	}
}

// Run implements Source.
func (k *Kafka) Run(ctx context.Context) error {
	maxPoll := k.cfg.MaxPollRecords
	if maxPoll == 0 {
		maxPoll = 10000
	}
	fetchMax := k.cfg.FetchMaxBytes
	if fetchMax == 0 {
		fetchMax = 16 << 20
	}
	reset := kgo.NewOffset().AtStart()
	if k.cfg.Start == "latest" {
		reset = kgo.NewOffset().AtEnd()
	}
	var cl *kgo.Client
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.cfg.Brokers...),
		kgo.ConsumerGroup(k.cfg.Group),
		kgo.ConsumeTopics(k.cfg.Topics...),
		kgo.ConsumeResetOffset(reset),
		// Offsets go to the broker only for lag tools (and so that a node
		// taking a partition over after this one died starts near what
		// this store holds), after the rows are stored: marked records are
		// committed in the background every CommitInterval and when
		// partitions are revoked.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(commitInterval),
		// A rebalance waits until the records polled are stored.
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(k.adjust),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, _ map[string][]int32) {
			k.counters.Rebalances.Add(1)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				k.log.Warn("committing offsets on revoke (for lag tools only)", "error", err)
			}
			k.dropPartitions(revoked)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) { k.dropPartitions(lost) }),
		kgo.FetchMaxBytes(fetchMax),
		kgo.FetchMaxPartitionBytes(min(fetchMax, 8<<20)),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.WithHooks(connectHook{k.counters}),
		kgo.ClientID("sluice"),
	}
	if k.cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(k.cfg.SessionTimeout), kgo.HeartbeatInterval(max(k.cfg.SessionTimeout/5, 500*time.Millisecond)))
	}
	if k.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(k.cfg.InstanceID))
	}
	opts = append(opts, k.ExtraOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("stream: kafka client: %w", err)
	}
	defer cl.Close() // leaves the group; the revoke callback commits marks
	for {
		fs := cl.PollRecords(ctx, maxPoll)
		if ctx.Err() != nil || fs.IsClientClosed() {
			cl.AllowRebalance()
			return ctx.Err()
		}
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			k.log.Warn("fetch error", "topic", topic, "partition", p, "error", err)
			k.counters.fail(err)
		})
		var parts []kgo.FetchTopicPartition
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				parts = append(parts, p)
			}
		})
		if err := k.storeAll(ctx, parts); err != nil {
			cl.AllowRebalance()
			return err
		}
		for _, p := range parts {
			cl.MarkCommitRecords(p.Records[len(p.Records)-1])
			k.counters.SetLag(p.Topic, p.Partition, p.HighWatermark-(p.Records[len(p.Records)-1].Offset+1))
		}
		cl.AllowRebalance()
	}
}

// storeAll stores the records of each partition (partitions in parallel,
// each its own batch with its position), retrying failures with backoff
// until they are stored or ctx is done.
func (k *Kafka) storeAll(ctx context.Context, parts []kgo.FetchTopicPartition) error {
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i, p := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for attempt := 0; ; attempt++ {
				err := k.storePartition(ctx, p)
				if err == nil {
					return
				}
				if ctx.Err() != nil {
					errs[i] = ctx.Err()
					return
				}
				k.log.Error("storing a batch failed, retrying", "topic", p.Topic, "partition", p.Partition, "error", err, "attempt", attempt)
				k.counters.fail(err)
				if err := backoff(ctx, attempt); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (k *Kafka) storePartition(ctx context.Context, p kgo.FetchTopicPartition) error {
	key := tp{p.Topic, p.Partition}
	k.mu.Lock()
	next, known := k.next[key]
	k.mu.Unlock()
	msgs := make([]Message, 0, len(p.Records))
	for _, r := range p.Records {
		if known && r.Offset < next {
			continue // stored already (a record fetched twice)
		}
		m := Message{Body: r.Value, Key: r.Key, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp}
		if len(r.Headers) > 0 {
			m.Headers = make([]Header, len(r.Headers))
			for i, h := range r.Headers {
				m.Headers[i] = Header{Key: h.Key, Value: h.Value}
			}
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	last := msgs[len(msgs)-1].Offset
	pos := []Position{{Name: PositionName(k.table, p.Topic, p.Partition), Value: binary.BigEndian.AppendUint64(nil, uint64(last+1))}}
	res, err := k.w.Write(ctx, msgs, pos)
	if err != nil {
		return err
	}
	k.counters.add(res)
	k.counters.ok()
	k.mu.Lock()
	k.next[key] = last + 1
	k.mu.Unlock()
	return nil
}

// connectHook reports whether the client reaches its brokers.
type connectHook struct{ c *Counters }

func (h connectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.c.fail(err)
		return
	}
	h.c.ok()
}
