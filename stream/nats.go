package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/table"
)

// natsFields are the metadata a NATS source can add to rows.
var natsFields = map[string]metaField{
	"subject":   {"_subject", func(m *Message) any { return m.Topic }},
	"headers":   {"_headers", func(m *Message) any { return headersJSON(m.Headers) }},
	"sequence":  {"_sequence", func(m *Message) any { return m.Offset }},
	"timestamp": {"_timestamp", func(m *Message) any { return m.Time }},
}

// NATS consumes a table's JetStream source through a durable pull
// consumer that it recreates, on every (re)connection, at the sequence after
// the one stored with the table's rows.
type NATS struct {
	table    string
	cfg      config.NATSSource
	w        *Writer
	store    *table.Store
	log      *slog.Logger
	counters *Counters
}

// NewNATS makes the NATS source cfg of table t.
func NewNATS(t Target, tableName string, cfg config.NATSSource) (*NATS, error) {
	n := &NATS{table: tableName, cfg: cfg, store: t.Store, log: t.Log, counters: newCounters(tableName, "nats")}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.log = n.log.With("table", tableName, "source", "nats", "stream", cfg.Stream, "durable", cfg.Durable)
	t.Log = n.log
	w, err := newWriter(t, cfg.Format, cfg.Metadata, natsFields, func(m *Message) string {
		return fmt.Sprintf("nats %s %s#%d", cfg.Stream, m.Topic, m.Offset)
	})
	if err != nil {
		return nil, err
	}
	n.w = w
	return n, nil
}

// Name implements Source.
func (n *NATS) Name() string { return fmt.Sprintf("nats %s/%s", n.cfg.Stream, n.cfg.Durable) }

// Counters implements Source.
func (n *NATS) Counters() *Counters { return n.counters }

// NATSPositionName is the name under which the last stored stream sequence
// of a NATS source is stored with the rows of table.
func NATSPositionName(table, stream, subject string) string {
	return fmt.Sprintf("%s/nats/%s/%s", table, stream, subject)
}

// Run implements Source.
func (n *NATS) Run(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := n.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.log.Warn("nats session ended, reconnecting", "error", err, "attempt", attempt)
		n.counters.fail(err)
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
		if err == nil {
			attempt = 0
		}
	}
}

func (n *NATS) session(ctx context.Context) error {
	nc, err := nats.Connect(n.cfg.URL, nats.Name("sluice"), nats.MaxReconnects(0), nats.Timeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("nats: connect %s: %w", n.cfg.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	posName := NATSPositionName(n.table, n.cfg.Stream, n.cfg.Subject)
	v, err := n.store.Position(posName)
	if err != nil {
		return err
	}
	var stored uint64
	if len(v) == 8 {
		stored = binary.BigEndian.Uint64(v)
	}
	cc := jetstream.ConsumerConfig{
		Durable:       n.cfg.Durable,
		FilterSubject: n.cfg.Subject,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       5 * time.Minute,
		MaxAckPending: -1,
	}
	switch {
	case stored > 0:
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, stored+1
	case n.cfg.Start == "latest":
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	default:
		cc.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	// The broker's view of the consumer never drives delivery: the stored
	// sequence does. Recreate the durable there.
	if err := js.DeleteConsumer(ctx, n.cfg.Stream, n.cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("nats: delete consumer %s: %w", n.cfg.Durable, err)
	}
	cons, err := js.CreateConsumer(ctx, n.cfg.Stream, cc)
	if err != nil {
		return fmt.Errorf("nats: create consumer %s on %s: %w", n.cfg.Durable, n.cfg.Stream, err)
	}
	n.counters.ok()
	n.counters.Rebalances.Add(1)
	n.log.Info("consuming", "from_sequence", stored+1)
	maxBatch := n.cfg.MaxBatch
	if maxBatch == 0 {
		maxBatch = 5000
	}
	wait := n.cfg.FetchWait
	if wait == 0 {
		wait = 500 * time.Millisecond
	}
	for ctx.Err() == nil {
		batch, err := cons.Fetch(maxBatch, jetstream.FetchMaxWait(wait))
		if err != nil {
			return fmt.Errorf("nats: fetch: %w", err)
		}
		var msgs []Message
		var last jetstream.Msg
		var pending uint64
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("nats: message metadata: %w", err)
			}
			last, pending = m, meta.NumPending
			if meta.Sequence.Stream <= stored {
				continue // stored already (a redelivery)
			}
			msg := Message{Body: m.Data(), Topic: m.Subject(), Offset: int64(meta.Sequence.Stream), Time: meta.Timestamp}
			for k, vs := range m.Headers() {
				for _, v := range vs {
					msg.Headers = append(msg.Headers, Header{Key: k, Value: []byte(v)})
				}
			}
			msgs = append(msgs, msg)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("nats: fetch: %w", err)
		}
		if len(msgs) > 0 {
			lastSeq := uint64(msgs[len(msgs)-1].Offset)
			pos := []Position{{Name: posName, Value: binary.BigEndian.AppendUint64(nil, lastSeq)}}
			for attempt := 0; ; attempt++ {
				res, err := n.w.Write(ctx, msgs, pos)
				if err == nil {
					n.counters.add(res)
					break
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				n.log.Error("storing a batch failed, retrying", "error", err, "attempt", attempt)
				n.counters.fail(err)
				if err := backoff(ctx, attempt); err != nil {
					return err
				}
			}
			stored = lastSeq
			n.counters.ok()
		}
		if last != nil {
			// For lag tools only: the stored sequence is what counts.
			if err := last.Ack(); err != nil {
				n.log.Warn("ack (for lag tools only)", "error", err)
			}
			n.counters.SetLag(n.cfg.Stream, 0, int64(pending))
		}
	}
	return ctx.Err()
}
