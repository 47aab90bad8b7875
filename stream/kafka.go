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

	"github.com/twmb/franz-go/pkg/kadm"
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

	mu      sync.Mutex
	next    map[tp]int64 // the next offset to store, per assigned partition
	workers map[tp]*partitionWorker
	// writing bounds the batches decoded and stored at once (GOMAXPROCS):
	// more would only hold more decoded rows in memory.
	writing chan struct{}
}

type tp struct {
	topic     string
	partition int32
}

// NewKafka makes the Kafka source cfg of table t.
func NewKafka(t Target, tableName string, cfg config.KafkaSource) (*Kafka, error) {
	k := &Kafka{table: tableName, cfg: cfg, store: t.Store, log: t.Log, counters: newCounters(tableName, "kafka"), next: map[tp]int64{}, workers: map[tp]*partitionWorker{}, writing: make(chan struct{}, runtime.GOMAXPROCS(0))}
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

// partitionWorker stores the records of one assigned partition, in order,
// while the poll loop goes on fetching: records wait in a channel of
// workerQueue polls, so a slow store pauses the poll loop (and with it
// fetching) instead of growing memory.
type partitionWorker struct {
	records chan kgo.FetchTopicPartition
	quit    chan struct{} // closed when the partition is revoked or lost
	done    chan struct{} // closed when the worker has returned
}

// workerQueue is how many polled batches of one partition may wait.
const workerQueue = 1

func (k *Kafka) startWorkers(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for topic, parts := range assigned {
		for _, p := range parts {
			key := tp{topic, p}
			if _, ok := k.workers[key]; ok {
				continue
			}
			w := &partitionWorker{records: make(chan kgo.FetchTopicPartition, workerQueue), quit: make(chan struct{}), done: make(chan struct{})}
			k.workers[key] = w
			go k.work(ctx, cl, w)
		}
	}
}

// stopWorkers stops the workers of partitions revoked or lost: each
// finishes the batch it is storing and drops what waits (the next owner
// reads it again from its position).
func (k *Kafka) stopWorkers(ps map[string][]int32) {
	k.mu.Lock()
	var stopping []*partitionWorker
	for topic, parts := range ps {
		for _, p := range parts {
			key := tp{topic, p}
			if w, ok := k.workers[key]; ok {
				close(w.quit)
				stopping = append(stopping, w)
				delete(k.workers, key)
			}
			delete(k.next, key)
			k.counters.dropLag(topic, p)
		}
	}
	k.mu.Unlock()
	for _, w := range stopping {
		<-w.done
	}
}

func (k *Kafka) work(ctx context.Context, cl *kgo.Client, w *partitionWorker) {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		case p := <-w.records:
			for attempt := 0; ; attempt++ {
				err := k.storePartition(ctx, p)
				if err == nil {
					break
				}
				k.log.Error("storing a batch failed, retrying", "topic", p.Topic, "partition", p.Partition, "error", err, "attempt", attempt)
				k.counters.fail(err)
				// Back off, but give the partition up at once when it is
				// revoked (or the node stops): the next owner resumes at
				// the stored position.
				bctx, cancel := context.WithCancel(ctx)
				go func() {
					select {
					case <-w.quit:
						cancel()
					case <-bctx.Done():
					}
				}()
				err = backoff(bctx, attempt)
				cancel()
				if err != nil {
					return
				}
			}
			last := p.Records[len(p.Records)-1]
			cl.MarkCommitRecords(last)
			k.counters.SetLag(p.Topic, p.Partition, p.HighWatermark-(last.Offset+1))
		}
	}
}

// Run implements Source.
func (k *Kafka) Run(ctx context.Context) error {
	maxPoll := k.cfg.MaxPollRecords
	if maxPoll == 0 {
		maxPoll = 5000
	}
	fetchMax := k.cfg.FetchMaxBytes
	if fetchMax == 0 {
		fetchMax = 8 << 20
	}
	reset := kgo.NewOffset().AtStart()
	if k.cfg.Start == "latest" {
		reset = kgo.NewOffset().AtEnd()
	}
	// Workers are not canceled by ctx: at shutdown each finishes the batch
	// it is storing (quit, closed when the client leaves the group, stops
	// them), so that the offsets committed on leaving cover it.
	workCtx := context.WithoutCancel(ctx)
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.cfg.Brokers...),
		kgo.ConsumerGroup(k.cfg.Group),
		kgo.ConsumeTopics(k.cfg.Topics...),
		kgo.ConsumeResetOffset(reset),
		// Offsets go to the broker only for lag tools (and so that a node
		// taking a partition over after this one died starts near what
		// this store holds), after the rows are stored: marked records are
		// committed in the background every commitInterval and when
		// partitions are revoked, after their workers stopped.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(commitInterval),
		kgo.AdjustFetchOffsetsFn(k.adjust),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
			k.counters.Rebalances.Add(1)
			k.startWorkers(workCtx, cl, assigned)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			k.stopWorkers(revoked)
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				k.log.Warn("committing offsets on revoke (for lag tools only)", "error", err)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) { k.stopWorkers(lost) }),
		// Records of aborted transactions are never stored.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxBytes(fetchMax),
		kgo.FetchMaxPartitionBytes(min(fetchMax, 2<<20)),
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
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("stream: kafka client: %w", err)
	}
	// Close leaves the group: the revoke callback stops the workers and
	// commits their offsets.
	defer cl.Close()
	go k.refreshLag(ctx, cl)
	for {
		fs := cl.PollRecords(ctx, maxPoll)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return ctx.Err()
		}
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			k.log.Warn("fetch error", "topic", topic, "partition", p, "error", err)
			k.counters.fail(err)
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			k.mu.Lock()
			w := k.workers[tp{p.Topic, p.Partition}]
			k.mu.Unlock()
			if w == nil {
				return // revoked since the fetch: the next owner reads it
			}
			select {
			case w.records <- p:
			case <-w.quit:
			case <-ctx.Done():
			}
		})
	}
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
	select {
	case k.writing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-k.writing }()
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

// lagInterval is how often the lag of idle partitions is refreshed from the
// brokers' end offsets (busy partitions update it with every batch).
const lagInterval = 2 * time.Second

// refreshLag sets the lag of every assigned partition whose next offset is
// known from the brokers' end offsets, so that an idle partition shows 0.
func (k *Kafka) refreshLag(ctx context.Context, cl *kgo.Client) {
	adm := kadm.NewClient(cl)
	t := time.NewTicker(lagInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, lagInterval)
		ends, err := adm.ListEndOffsets(rctx, k.cfg.Topics...)
		cancel()
		if err != nil {
			continue
		}
		k.mu.Lock()
		for key, next := range k.next {
			if o, ok := ends.Lookup(key.topic, key.partition); ok && o.Err == nil {
				k.counters.SetLag(key.topic, key.partition, o.Offset-next)
			}
		}
		k.mu.Unlock()
	}
}
