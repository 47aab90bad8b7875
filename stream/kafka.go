package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/ingest/schemaformat"
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

// KafkaOptions are what a Kafka source consumes and how: a table's
// sources[].kafka section as the server translates it (docs/streams.md).
// Zero fields get their defaults (EnsureDefaults).
type KafkaOptions struct {
	// Brokers are seed brokers, host:port.
	Brokers []string
	// Topics are consumed in full (every partition the group assigns).
	Topics []string
	// Group is the consumer group: nodes with the same group split the
	// partitions.
	Group string
	// Format of each message body: FormatNDJSON (default), FormatJSON,
	// FormatCSV or FormatParquet (gzip bodies are detected), or a Schema
	// Registry format, FormatAvro, FormatProtobuf or FormatJSONSchema,
	// whose schemas SchemaRegistry serves.
	Format string
	// SchemaRegistry is where the Schema Registry formats find a message's
	// schema by its id. While it cannot be reached the source pauses:
	// the batch is retried with backoff, named in the log and by Failing,
	// and no offset moves past it.
	SchemaRegistry schemaformat.Registry
	// Start is where a partition with neither a stored nor a committed
	// position begins: StartEarliest (default) or StartLatest.
	Start string
	// Metadata names message fields added to every row before the
	// computed columns run: key (_key), headers (_headers, a JSON object),
	// topic (_topic), partition (_partition), offset (_offset), timestamp
	// (_timestamp).
	Metadata []string
	// MaxPollRecords bounds the messages handled per poll (default
	// DefaultMaxPollRecords).
	MaxPollRecords int
	// FetchMaxBytes bounds what one fetch buffers (default
	// DefaultFetchMaxBytes, at most 2 MiB a partition): with
	// MaxPollRecords it bounds a source's memory.
	FetchMaxBytes int32
	// SessionTimeout is how long the group waits for a silent node before
	// giving its partitions to the others; 0 leaves the client's default
	// (45s) and its heartbeat interval.
	SessionTimeout time.Duration
	// InstanceID turns on static membership: a node restarted with the
	// same id within SessionTimeout gets its partitions back without a
	// rebalance.
	InstanceID string
	// OnAssigned, when set, is told of newly assigned partitions before
	// any of their records is stored (the assignment waits for it, so it
	// must return soon); OnReleased of revoked or lost partitions once no
	// more of their records will be stored. Key routing of cluster queries
	// follows the assignment with them (docs/cluster.md).
	OnAssigned func(ctx context.Context, partitions map[string][]int32)
	OnReleased func(partitions map[string][]int32)
	// CheckKeys, when set, sees each batch's messages before they are
	// stored: key routing checks there that every message's key is in
	// the partition Kafka's default partitioner gives it, and turns
	// itself off before a misplaced row can be stored. An error fails the
	// batch, which is retried.
	CheckKeys func(ctx context.Context, msgs []Message) error
	// Linger is how long a partition's worker gathers polls before it
	// stores them in one batch (one synced commit), unless it has
	// MaxPollRecords records sooner: 0 means DefaultLinger, a negative
	// value none (one batch per poll). docs/streams.md argues the default.
	Linger time.Duration
	// Conn is how every client of the source reaches the brokers: TLS and
	// SASL.
	Conn KafkaConn
	// Changes, when set, makes the source a change stream of a table with
	// a primary key: Debezium envelopes, an operation field or tombstones
	// (docs/changes.md).
	Changes *Changes
}

// The defaults of KafkaOptions and NATSOptions.
const (
	DefaultMaxPollRecords = 5000
	DefaultFetchMaxBytes  = 8 << 20
	DefaultMaxBatch       = 5000
	DefaultFetchWait      = 500 * time.Millisecond
	DefaultLinger         = 100 * time.Millisecond
)

// The message formats and start positions of a source.
const (
	FormatNDJSON  = "ndjson"
	FormatJSON    = "json"
	FormatCSV     = "csv"
	FormatParquet = "parquet"
	// The Schema Registry formats (package schemaformat).
	FormatAvro       = schemaformat.FormatAvro
	FormatProtobuf   = schemaformat.FormatProtobuf
	FormatJSONSchema = schemaformat.FormatJSONSchema
	StartEarliest    = "earliest"
	StartLatest      = "latest"
)

// EnsureDefaults fills o's zero fields with their defaults and returns o
// (a new KafkaOptions when o is nil).
func (o *KafkaOptions) EnsureDefaults() *KafkaOptions {
	if o == nil {
		o = &KafkaOptions{}
	}
	if o.Format == "" {
		o.Format = FormatNDJSON
	}
	if o.Start == "" {
		o.Start = StartEarliest
	}
	if o.MaxPollRecords == 0 {
		o.MaxPollRecords = DefaultMaxPollRecords
	}
	if o.FetchMaxBytes == 0 {
		o.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	return o
}

// Kafka consumes a table's Kafka source in a consumer group.
type Kafka struct {
	table    string
	opts     KafkaOptions // defaults ensured
	w        *Writer
	store    *table.Store
	log      *slog.Logger
	counters *Counters

	mu   sync.Mutex
	next map[tp]int64 // the next offset to store, per assigned partition
	// ids are the topic IDs seen at assignment, stored beside each
	// position so that a topic deleted and recreated under the same name
	// is told from the one the position was read from.
	ids map[string][16]byte
	// adm asks the brokers for topic IDs and log start and end offsets
	// at assignment (a client of its own: the group's client is not
	// there yet when the first assignment comes).
	adm     *kadm.Client
	workers map[tp]*partitionWorker
	// writing bounds the batches decoded and stored at once (GOMAXPROCS):
	// more would only hold more decoded rows in memory.
	writing chan struct{}
	// missingLog and connLog limit the log lines of missing topics and
	// unreachable brokers (health.go).
	missingLog, connLog logEvery
	// msgBufs are the messages slices of batches stored before, for the
	// next ones to reuse: a batch's messages (~170 bytes a record,
	// pointers the GC scans) were a large allocation per batch at bulk
	// rates. At most GOMAXPROCS are kept, as many as batches are written
	// at once (writing), fewer than one per partition.
	msgBufs chan []Message
}

type tp struct {
	topic     string
	partition int32
}

// NewKafka makes the Kafka source of table t that opts describe (their
// zero fields take the defaults). It connects to nothing: Run does.
func NewKafka(t Target, tableName string, opts KafkaOptions) (*Kafka, error) {
	opts.EnsureDefaults()
	if err := checkStart(opts.Start); err != nil {
		return nil, err
	}
	k := &Kafka{table: tableName, opts: opts, store: t.Store, log: t.Log, counters: newCounters(tableName, "kafka"), next: map[tp]int64{}, ids: map[string][16]byte{}, workers: map[tp]*partitionWorker{}, writing: make(chan struct{}, runtime.GOMAXPROCS(0)), msgBufs: make(chan []Message, runtime.GOMAXPROCS(0))}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	k.log = k.log.With("table", tableName, "source", "kafka", "group", opts.Group)
	t.Log = k.log
	registry, format, err := registryDecoder(opts.Format, opts.SchemaRegistry)
	if err != nil {
		return nil, fmt.Errorf("stream: kafka: %w", err)
	}
	w, err := newWriter(t, format, opts.Metadata, kafkaFields, func(m *Message) string {
		return fmt.Sprintf("kafka %s/%d@%d", m.Topic, m.Partition, m.Offset)
	})
	if err != nil {
		return nil, err
	}
	w.registry = registry
	if opts.Changes != nil {
		changes := *opts.Changes // the caller's options stay as they are
		if err := changes.EnsureDefaults().check(); err != nil {
			return nil, err
		}
		w.changes = &changes
	}
	k.w = w
	return k, nil
}

// Name implements Source.
func (k *Kafka) Name() string { return fmt.Sprintf("kafka %s%v", k.opts.Group, k.opts.Topics) }

// Counters implements Source.
func (k *Kafka) Counters() *Counters { return k.counters }

// PositionName is the name under which the next offset of a partition is
// stored with the rows of table.
func PositionName(table, topic string, partition int32) string {
	return fmt.Sprintf("%s/kafka/%s/%d", table, topic, partition)
}

// kafkaPosition is what a Kafka source stores with its rows for a
// partition: the next offset to store and the ID of the topic it belongs
// to. Positions written before the ID was kept are 8 bytes (zero ID).
type kafkaPosition struct {
	next int64
	id   [16]byte
}

func (p kafkaPosition) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(p.next))
	if p.id != ([16]byte{}) {
		b = append(b, p.id[:]...)
	}
	return b
}

func (k *Kafka) stored(t string, p int32) (kafkaPosition, bool, error) {
	v, err := k.store.Position(PositionName(k.table, t, p))
	if err != nil || v == nil {
		return kafkaPosition{}, false, err
	}
	if len(v) != 8 && len(v) != 24 {
		return kafkaPosition{}, false, fmt.Errorf("stream: position of %s/%d is %d bytes, want 8 or 24", t, p, len(v))
	}
	pos := kafkaPosition{next: int64(binary.BigEndian.Uint64(v))}
	copy(pos.id[:], v[8:])
	return pos, true, nil
}

// topicLog is what the brokers say of an assigned topic: its ID and each
// partition's log start and end offsets.
type topicLog struct {
	id               [16]byte
	start, end       map[int32]int64
	hasStart, hasEnd map[int32]bool
}

// describe asks the brokers for the topics' IDs and log bounds.
func (k *Kafka) describe(ctx context.Context, topics []string) (map[string]*topicLog, error) {
	ids, err := topicIDs(ctx, topics, func(ctx context.Context) (kadm.Metadata, error) { return k.adm.Metadata(ctx, topics...) })
	if err != nil {
		return nil, err
	}
	starts, err := k.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("stream: kafka log start offsets: %w", err)
	}
	ends, err := k.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("stream: kafka end offsets: %w", err)
	}
	out := map[string]*topicLog{}
	for _, t := range topics {
		l := &topicLog{start: map[int32]int64{}, end: map[int32]int64{}, hasStart: map[int32]bool{}, hasEnd: map[int32]bool{}}
		l.id = ids[t]
		starts.Each(func(o kadm.ListedOffset) {
			if o.Topic == t && o.Err == nil {
				l.start[o.Partition], l.hasStart[o.Partition] = o.Offset, true
			}
		})
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == t && o.Err == nil {
				l.end[o.Partition], l.hasEnd[o.Partition] = o.Offset, true
			}
		})
		out[t] = l
	}
	return out, nil
}

// topicIDAttempts bounds how often topicIDs asks again for a topic whose
// metadata came back with an error.
const topicIDAttempts = 6

// topicIDs is each topic's ID as the brokers give it. A topic whose
// metadata carries an error (a topic just created answers
// LEADER_NOT_AVAILABLE for a moment) is asked for again, and an error is
// returned if it still has none: the ID is part of every stored row's
// source name (the partition a keyed table orders changes by, the source
// a cold tier claims offsets of), so a node must never label a
// partition's rows without it while another node labels them with it.
// A topic the brokers answer without error and without an ID (a broker
// older than topic IDs) keeps the zero ID, on every node alike.
func topicIDs(ctx context.Context, topics []string, metadata func(context.Context) (kadm.Metadata, error)) (map[string][16]byte, error) {
	for attempt := 0; ; attempt++ {
		meta, err := metadata(ctx)
		if err != nil {
			return nil, fmt.Errorf("stream: kafka metadata: %w", err)
		}
		ids := make(map[string][16]byte, len(topics))
		var missing error
		for _, t := range topics {
			d, ok := meta.Topics[t]
			switch {
			case !ok:
				missing = fmt.Errorf("stream: kafka metadata: topic %q not in the answer", t)
			case d.Err != nil:
				missing = fmt.Errorf("stream: kafka metadata of topic %q: %w", t, d.Err)
			default:
				ids[t] = d.ID
			}
		}
		if missing == nil {
			return ids, nil
		}
		if attempt+1 >= topicIDAttempts {
			return nil, missing
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, errors.Join(missing, err)
		}
	}
}

// adjust starts each assigned partition at the later of the position
// stored with this node's rows and the offset committed to the group
// (which another node, whose store holds the rows before it, committed
// after storing them); with neither, at the configured start.
//
// A stored position that cannot belong to the partition's log as the
// brokers describe it now (another topic ID, or an offset past the log's
// end) means the topic was deleted and recreated (or truncated): the
// partition starts again at the log's beginning, stores that reset at
// once, and says so loudly (docs/streams.md, "A recreated topic or
// stream"). A committed offset outside the log is ignored likewise.
func (k *Kafka) adjust(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	topics := make([]string, 0, len(offsets))
	for t := range offsets {
		topics = append(topics, t)
	}
	k.mu.Lock()
	adm := k.adm
	k.mu.Unlock()
	if adm == nil {
		return nil, errors.New("stream: kafka admin client missing")
	}
	logs, err := k.describe(ctx, topics)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for topic, parts := range offsets {
		l := logs[topic]
		k.ids[topic] = l.id
		for p, o := range parts {
			committed := o.EpochOffset().Offset
			pos, ok, err := k.stored(topic, p)
			if err != nil {
				return nil, err
			}
			logStart, end := l.start[p], l.end[p]
			plan := planStart(pos, ok, committed, l.id, logStart, end, l.hasStart[p] && l.hasEnd[p])
			if plan.reset != "" {
				k.log.Error("topic deleted and recreated (or truncated): consuming the partition again from its log start; messages of the old log after the stored offset were never stored",
					"topic", topic, "partition", p, "why", plan.reset, "stored", pos.next, "log_start", logStart, "end", end)
				k.counters.Resets.Add(1)
				reset := kafkaPosition{next: logStart, id: l.id}
				if err := k.w.storePositions(ctx, []Position{{Name: PositionName(k.table, topic, p), Value: reset.encode()}}); err != nil {
					return nil, fmt.Errorf("stream: storing the reset position of %s/%d: %w", topic, p, err)
				}
			}
			if plan.lost > 0 {
				k.log.Warn("messages after the stored offset are gone from the log (retention or deletion) and were never stored",
					"topic", topic, "partition", p, "stored", pos.next, "log_start", logStart, "lost", plan.lost)
			}
			if plan.committedIgnored {
				k.log.Warn("committed offset outside the partition's log: ignored", "topic", topic, "partition", p, "committed", committed, "log_start", logStart, "end", end)
			}
			start := plan.start
			if start >= 0 {
				parts[p] = kgo.NewOffset().At(start).WithEpoch(-1)
				k.next[tp{topic, p}] = start
			} else {
				delete(k.next, tp{topic, p})
			}
			k.log.Info("partition assigned", "topic", topic, "partition", p, "stored", pos.next, "committed", committed, "start", start)
		}
	}
	return offsets, nil
}

// startPlan is where an assigned partition starts and what was found on
// the way.
type startPlan struct {
	start int64 // -1: the configured start (earliest or latest)
	// reset says why the stored position was given up ("": it was not):
	// the partition starts again at the log start.
	reset string
	// lost counts offsets deleted from the log (retention) before they
	// were stored.
	lost int64
	// committedIgnored: the group's committed offset was outside the log.
	committedIgnored bool
}

// planStart decides where a partition starts from its stored position
// (stored: there is one), the group's committed offset (-1: none), the
// topic ID and log bounds the brokers gave (known: they gave the bounds):
// the later of the stored position and the committed offset, unless the
// stored position belongs to another log (another topic ID, or past the
// end: the topic was recreated or truncated), in which case the log start,
// the committed offset ignored too (Kafka before 4.2 can keep the old
// topic's commits for the new one; starting earlier costs at most an
// overlap with another node's store, never a gap).
func planStart(pos kafkaPosition, stored bool, committed int64, id [16]byte, logStart, end int64, known bool) startPlan {
	var plan startPlan
	if stored && known {
		switch {
		case pos.id != ([16]byte{}) && id != ([16]byte{}) && pos.id != id:
			plan.reset = fmt.Sprintf("the topic ID is %s, the stored position belongs to topic ID %s", kadm.TopicID(id), kadm.TopicID(pos.id))
		case pos.next > end:
			plan.reset = fmt.Sprintf("the stored offset %d is past the log's end offset %d", pos.next, end)
		case pos.next < logStart:
			plan.lost = logStart - pos.next
			pos.next = logStart
		}
		if plan.reset != "" {
			return startPlan{start: logStart, reset: plan.reset}
		}
	}
	if known && committed >= 0 && (committed < logStart || committed > end) {
		plan.committedIgnored = true
		committed = -1
	}
	plan.start = -1
	if committed >= 0 {
		plan.start = committed
	}
	if stored && pos.next > plan.start {
		plan.start = pos.next
	}
	return plan
}

// partitionWorker stores the records of one assigned partition, in order,
// while the poll loop goes on fetching: records wait in a channel of
// workerQueue polls, so a slow store pauses the poll loop (and with it
// fetching) instead of growing memory.
type partitionWorker struct {
	records chan kgo.FetchTopicPartition
	quit    chan struct{} // closed when the partition is revoked or lost
	done    chan struct{} // closed when the worker has returned
	// timer and gathered are linger's, kept from batch to batch.
	timer    *time.Timer
	gathered []*kgo.Record
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
		}
	}
	k.mu.Unlock()
	for _, w := range stopping {
		<-w.done
	}
	if k.opts.OnReleased != nil {
		k.opts.OnReleased(ps)
	}
	// Only now: a worker finishing its last batch after the revoke set
	// its lag once more, and a series of a partition this node no longer
	// holds would stay forever (phantom lag after a failover).
	for topic, parts := range ps {
		for _, p := range parts {
			k.counters.dropLag(topic, p)
		}
	}
}

func (k *Kafka) work(ctx context.Context, cl *kgo.Client, w *partitionWorker) {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		case p := <-w.records:
			p, held := k.linger(w, p)
			if !held {
				return // revoked while gathering: the next owner reads it all
			}
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
			// Marked even when revoked meanwhile: the offsets committed on
			// revoke must cover the batch just stored (a graceful handover).
			last := p.Records[len(p.Records)-1]
			cl.MarkCommitRecords(last)
			select {
			case <-w.quit:
				return // revoked while storing: the lag series is not ours any more
			default:
			}
			k.counters.SetLag(p.Topic, p.Partition, p.HighWatermark-(last.Offset+1))
			clear(w.gathered) // the records are the client's to free
		}
	}
}

// linger gathers the partition's next polls into p for up to Linger (or
// until it holds MaxPollRecords records), so that a moderate steady rate is
// stored in fewer, larger batches: each batch costs a synced Pebble commit
// and the decoder's and table's per-batch work whatever its size. The
// polls of one partition come in offset order, so their records are
// appended as they are. held is false when the partition was revoked
// meanwhile: nothing gathered is stored (the next owner reads it from the
// stored position, as a poll waiting in the queue).
func (k *Kafka) linger(w *partitionWorker, p kgo.FetchTopicPartition) (_ kgo.FetchTopicPartition, held bool) {
	if k.opts.Linger <= 0 || len(p.Records) >= k.opts.MaxPollRecords {
		return p, true
	}
	if w.timer == nil {
		w.timer = time.NewTimer(k.opts.Linger)
	} else {
		w.timer.Reset(k.opts.Linger)
	}
	defer w.timer.Stop()
	first := true
	for len(p.Records) < k.opts.MaxPollRecords {
		select {
		case <-w.quit:
			return p, false
		case <-w.timer.C:
			return p, true
		case more := <-w.records:
			if first {
				// p.Records is the client's: gather into the worker's own
				// slice, reused from batch to batch.
				w.gathered = append(w.gathered[:0], p.Records...)
				first = false
			}
			w.gathered = append(w.gathered, more.Records...)
			p.Records = w.gathered
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = more.HighWatermark, more.LastStableOffset, more.LogStartOffset
		}
	}
	return p, true
}

// Run implements Source: sessions of one client each, until ctx is done.
// A session ends when its topic was deleted and recreated (the client
// never adopts the new topic ID: a new client and a new assignment, where
// adjust applies the reset policy, do) or when a stored position turns
// out past its partition's end.
func (k *Kafka) Run(ctx context.Context) error {
	return reconnect(ctx, k.log, k.counters, k.session, backoff)
}

// errPastEnd ends a session whose stored position is past a partition's
// end offset: the next assignment's adjust decides what to do.
var errPastEnd = errors.New("stored position past the partition's end offset")

// errRecreated ends a session whose topic was deleted and recreated.
var errRecreated = errors.New("topic deleted and recreated")

func (k *Kafka) session(ctx context.Context) (reached bool, err error) {
	maxPoll := k.opts.MaxPollRecords
	fetchMax := k.opts.FetchMaxBytes
	fetchWait, fetchMin := 500*time.Millisecond, int32(1)
	if k.opts.Linger > 0 {
		fetchWait, fetchMin = k.opts.Linger, max(1, fetchMax/8)
	}
	reset := kgo.NewOffset().AtStart()
	if k.opts.Start == StartLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	admCl, err := k.opts.Conn.newClient(k.opts.Brokers, kgo.ClientID("sluice-admin"))
	if err != nil {
		return false, fmt.Errorf("stream: kafka admin client: %w", err)
	}
	defer admCl.Close()
	k.mu.Lock()
	k.adm = kadm.NewClient(admCl)
	k.mu.Unlock()
	sctx, endSession := context.WithCancelCause(ctx)
	defer endSession(nil)
	// Workers are not canceled by ctx: at shutdown each finishes the batch
	// it is storing (quit, closed when the client leaves the group, stops
	// them), so that the offsets committed on leaving cover it.
	workCtx := context.WithoutCancel(ctx)
	opts := []kgo.Opt{
		kgo.ConsumerGroup(k.opts.Group),
		kgo.ConsumeTopics(k.opts.Topics...),
		kgo.ConsumeResetOffset(reset),
		// Offsets go to the broker only for lag tools (and so that a node
		// taking a partition over after this one died starts near what
		// this store holds), after the rows are stored: marked records are
		// committed in the background every commitInterval and when
		// partitions are revoked, after their workers stopped.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(commitInterval),
		kgo.AdjustFetchOffsetsFn(k.adjust),
		kgo.OnPartitionsAssigned(func(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
			k.counters.Rebalances.Add(1)
			if k.opts.OnAssigned != nil {
				k.opts.OnAssigned(ctx, assigned)
			}
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
		// Transaction markers come as control records: never stored, but
		// the position moves past them, so that a fully consumed
		// transactional partition has lag 0 and not 1 (its last marker).
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(fetchMax),
		kgo.FetchMaxPartitionBytes(min(fetchMax, 2<<20)),
		kgo.FetchMaxWait(fetchWait),
		// With a linger the broker holds a fetch until it has
		// fetchMinBytes or fetchWait passed: fewer, larger fetch
		// responses at a moderate rate (each costs the client a request,
		// a response to decode and a poll).
		kgo.FetchMinBytes(fetchMin),
		kgo.WithHooks(connectHook{c: k.counters, log: k.log, failing: &k.connLog}),
		kgo.ClientID("sluice"),
	}
	if k.opts.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(k.opts.SessionTimeout), kgo.HeartbeatInterval(max(k.opts.SessionTimeout/5, 500*time.Millisecond)))
	}
	if k.opts.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(k.opts.InstanceID))
	}
	cl, err := k.opts.Conn.newClient(k.opts.Brokers, opts...)
	if err != nil {
		return false, fmt.Errorf("stream: kafka client: %w", err)
	}
	// Close leaves the group: the revoke callback stops the workers and
	// commits their offsets.
	defer cl.Close()
	go k.refreshLag(sctx, cl, endSession)
	for attempt := 0; ; {
		fs := cl.PollRecords(sctx, maxPoll)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return reached, ctx.Err()
		}
		if sctx.Err() != nil {
			return reached, context.Cause(sctx)
		}
		failed, recreated := false, false
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			failed = true
			recreated = recreated || errors.Is(err, kerr.UnknownTopicID)
			k.log.Warn("fetch error", "topic", topic, "partition", p, "error", err, "attempt", attempt)
			k.counters.fail(err)
		})
		if recreated {
			return reached, fmt.Errorf("stream: kafka: %w (UNKNOWN_TOPIC_ID): a new client and assignment follow", errRecreated)
		}
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
			case <-sctx.Done():
			}
		})
		if !failed {
			reached, attempt = true, 0
			continue
		}
		// Fetch errors come back at once, poll after poll (a deleted
		// topic): back off instead of spinning on them.
		if err := backoff(sctx, attempt); err != nil {
			continue // the checks at the top say why
		}
		attempt++
	}
}

func (k *Kafka) storePartition(ctx context.Context, p kgo.FetchTopicPartition) error {
	key := tp{p.Topic, p.Partition}
	k.mu.Lock()
	next, known := k.next[key]
	id := k.ids[p.Topic]
	k.mu.Unlock()
	var msgs []Message
	select {
	case msgs = <-k.msgBufs:
	default:
	}
	if cap(msgs) < len(p.Records) {
		msgs = make([]Message, 0, len(p.Records))
	}
	defer func() {
		// Cleared so that the bodies (the client's fetch buffers) are not
		// held until another batch overwrites them.
		clear(msgs)
		select {
		case k.msgBufs <- msgs[:0]:
		default:
		}
	}()
	source := fmt.Sprintf("kafka/%s/%d/%x", p.Topic, p.Partition, id[:8])
	last := int64(-1) // the last offset of the batch, control records too
	for _, r := range p.Records {
		if known && r.Offset < next {
			continue // stored already (a record fetched twice)
		}
		last = r.Offset
		if r.Attrs.IsControl() {
			continue // a transaction marker: no rows, the position moves past it
		}
		m := Message{Body: r.Value, Key: r.Key, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp, Source: source}
		if len(r.Headers) > 0 {
			m.Headers = make([]Header, len(r.Headers))
			for i, h := range r.Headers {
				m.Headers[i] = Header{Key: h.Key, Value: h.Value}
			}
		}
		msgs = append(msgs, m)
	}
	if last < 0 {
		return nil
	}
	if len(msgs) == 0 {
		// Only markers: move on in memory. Not stored: after a restart the
		// markers are read again and skipped again, which costs nothing,
		// where storing would cost a synced write per transaction.
		k.setNext(key, last+1)
		return nil
	}
	if k.opts.CheckKeys != nil {
		if err := k.opts.CheckKeys(ctx, msgs); err != nil {
			return fmt.Errorf("topic %s partition %d: check keys: %w", p.Topic, p.Partition, err)
		}
	}
	select {
	case k.writing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-k.writing }()
	final := &msgs[len(msgs)-1]
	positions := func(m *Message) []Position {
		next := m.Offset + 1
		if m == final {
			next = last + 1 // past the markers after the last message too
		}
		return []Position{{Name: PositionName(k.table, p.Topic, p.Partition), Value: kafkaPosition{next: next, id: id}.encode()}}
	}
	return k.w.WriteBounded(ctx, msgs, positions, func(m *Message, res Result) {
		k.counters.add(res)
		k.counters.ok()
		if m == final {
			k.setNext(key, last+1)
		} else {
			k.setNext(key, m.Offset+1)
		}
	})
}

// setNext records a partition's next offset, unless the partition was
// revoked meanwhile (stopWorkers deleted its worker): refreshLag would set
// its lag forever.
func (k *Kafka) setNext(key tp, next int64) {
	k.mu.Lock()
	if _, held := k.workers[key]; held {
		k.next[key] = next
	}
	k.mu.Unlock()
}

// lagInterval is how often the lag of idle partitions is refreshed from the
// brokers' end offsets (busy partitions update it with every batch).
const lagInterval = 2 * time.Second

// refreshLag sets the lag of every assigned partition whose next offset is
// known from the brokers' end offsets, so that an idle partition shows 0.
// A next offset past the end offset on two refreshes in a row (one could be
// a batch stored after the end offsets were read) means the topic was
// recreated or truncated under this session: it ends the session, and the
// next assignment applies the reset policy.
func (k *Kafka) refreshLag(ctx context.Context, cl *kgo.Client, endSession context.CancelCauseFunc) {
	adm := kadm.NewClient(cl)
	t := time.NewTicker(lagInterval)
	defer t.Stop()
	pastEnd := map[tp]int{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, lagInterval)
		k.checkTopics(rctx, adm)
		ends, err := adm.ListEndOffsets(rctx, k.opts.Topics...)
		cancel()
		if err != nil {
			continue
		}
		k.mu.Lock()
		for key, next := range k.next {
			o, ok := ends.Lookup(key.topic, key.partition)
			if !ok || o.Err != nil {
				continue
			}
			if o.Offset >= next {
				delete(pastEnd, key)
				k.counters.SetLag(key.topic, key.partition, o.Offset-next)
				continue
			}
			if pastEnd[key]++; pastEnd[key] >= 2 {
				err := fmt.Errorf("stream: kafka %s/%d: next offset %d, end offset %d: %w", key.topic, key.partition, next, o.Offset, errPastEnd)
				k.log.Error("position past the partition's end: the topic was recreated or truncated; starting a new session", "error", err)
				k.counters.fail(err)
				endSession(err)
			}
		}
		k.mu.Unlock()
	}
}
