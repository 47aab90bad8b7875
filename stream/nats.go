package stream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/table"
)

// natsFields are the metadata a NATS source can add to rows.
var natsFields = map[string]metaField{
	"subject":   {"_subject", func(m *Message) any { return m.Topic }},
	"headers":   {"_headers", func(m *Message) any { return headersJSON(m.Headers) }},
	"sequence":  {"_sequence", func(m *Message) any { return m.Offset }},
	"timestamp": {"_timestamp", func(m *Message) any { return m.Time }},
}

// NATSOptions are what a NATS JetStream source consumes and how: a table's
// sources[].nats section as the server translates it (docs/streams.md).
// Zero fields get their defaults (EnsureDefaults).
type NATSOptions struct {
	// URL is the server's, nats://host:port.
	URL string
	// Stream is the JetStream stream; Subject, when set, filters it.
	Stream  string
	Subject string
	// Durable is the consumer's name; the source (re)creates it at the
	// stored position on every connection.
	Durable string
	// Format of each message body, as for Kafka (default FormatNDJSON),
	// the Schema Registry formats included.
	Format string
	// SchemaRegistry serves the Schema Registry formats' schemas. While it
	// cannot be reached the source pauses as a Kafka source does: the
	// batch is retried with backoff, named by Failing, and the stored
	// sequence does not move past it.
	SchemaRegistry schemaformat.Registry
	// Start is where a table with no stored position begins:
	// StartEarliest (default) or StartLatest.
	Start string
	// Metadata: subject (_subject), headers (_headers), sequence
	// (_sequence), timestamp (_timestamp).
	Metadata []string
	// MaxBatch bounds the messages fetched at once (default
	// DefaultMaxBatch).
	MaxBatch int
	// FetchWait is how long a fetch waits for messages (default
	// DefaultFetchWait).
	FetchWait time.Duration
	// Conn is how the source reaches and proves itself to the server.
	Conn NATSConn
}

// NATSConn is how a NATS source connects: TLS, and at most one of
// user/password, token, nkey seed file and creds file. The zero value is
// plaintext without credentials.
type NATSConn struct {
	// TLS, when set, connects over TLS (verification as the caller set it).
	TLS *tls.Config
	// User with Password (a function, read at every connection so that a
	// rotated file is picked up) logs in by name.
	User     string
	Password func() (string, error)
	// Token, read at every connection, logs in by token.
	Token func() (string, error)
	// NKeySeedFile is an nkey user's seed file; CredsFile a user JWT and
	// seed (decentralized auth): nats.go reads them at every connection.
	NKeySeedFile string
	CredsFile    string
}

// options returns nats.go's options for c, reading its secrets now.
func (c NATSConn) options() ([]nats.Option, error) {
	var opts []nats.Option
	if c.TLS != nil {
		opts = append(opts, nats.Secure(c.TLS.Clone()))
	}
	switch {
	case c.Password != nil:
		pw, err := c.Password()
		if err != nil {
			return nil, fmt.Errorf("nats: password of user %s: %w", c.User, err)
		}
		opts = append(opts, nats.UserInfo(c.User, pw))
	case c.Token != nil:
		token, err := c.Token()
		if err != nil {
			return nil, fmt.Errorf("nats: token: %w", err)
		}
		opts = append(opts, nats.Token(token))
	case c.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats: nkey seed file: %w", err)
		}
		opts = append(opts, o)
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	return opts, nil
}

// EnsureDefaults fills o's zero fields with their defaults and returns o
// (a new NATSOptions when o is nil).
func (o *NATSOptions) EnsureDefaults() *NATSOptions {
	if o == nil {
		o = &NATSOptions{}
	}
	if o.Format == "" {
		o.Format = FormatNDJSON
	}
	if o.Start == "" {
		o.Start = StartEarliest
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.FetchWait == 0 {
		o.FetchWait = DefaultFetchWait
	}
	return o
}

// NATS consumes a table's JetStream source through a durable pull
// consumer that it recreates, on every (re)connection, at the sequence after
// the one stored with the table's rows.
type NATS struct {
	table    string
	opts     NATSOptions // defaults ensured
	w        *Writer
	store    *table.Store
	log      *slog.Logger
	counters *Counters
}

// NewNATS makes the NATS source of table t that opts describe (their zero
// fields take the defaults). It connects to nothing: Run does.
func NewNATS(t Target, tableName string, opts NATSOptions) (*NATS, error) {
	opts.EnsureDefaults()
	if err := checkStart(opts.Start); err != nil {
		return nil, err
	}
	n := &NATS{table: tableName, opts: opts, store: t.Store, log: t.Log, counters: newCounters(tableName, "nats")}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.log = n.log.With("table", tableName, "source", "nats", "stream", opts.Stream, "durable", opts.Durable)
	t.Log = n.log
	registry, format, err := registryDecoder(opts.Format, opts.SchemaRegistry)
	if err != nil {
		return nil, fmt.Errorf("stream: nats: %w", err)
	}
	w, err := newWriter(t, format, opts.Metadata, natsFields, func(m *Message) string {
		return fmt.Sprintf("nats %s %s#%d", opts.Stream, m.Topic, m.Offset)
	})
	if err != nil {
		return nil, err
	}
	w.registry = registry
	n.w = w
	return n, nil
}

// Name implements Source.
func (n *NATS) Name() string { return fmt.Sprintf("nats %s/%s", n.opts.Stream, n.opts.Durable) }

// Counters implements Source.
func (n *NATS) Counters() *Counters { return n.counters }

// NATSPositionName is the name under which the last stored stream sequence
// of a NATS source is stored with the rows of table.
func NATSPositionName(table, stream, subject string) string {
	return fmt.Sprintf("%s/nats/%s/%s", table, stream, subject)
}

// Run implements Source.
func (n *NATS) Run(ctx context.Context) error {
	return reconnect(ctx, n.log, n.counters, n.session, backoff)
}

// natsPosition is what a NATS source stores with its rows: the last
// stream sequence stored and the creation time of the stream it belongs
// to, which tells a stream deleted and recreated under the same name from
// the one the sequence was read from. Positions written before the
// creation time was kept are 8 bytes (created zero).
type natsPosition struct {
	seq     uint64
	created time.Time
}

func (p natsPosition) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, p.seq)
	if !p.created.IsZero() {
		b = binary.BigEndian.AppendUint64(b, uint64(p.created.UnixNano()))
	}
	return b
}

func decodeNATSPosition(v []byte) (natsPosition, error) {
	switch len(v) {
	case 0:
		return natsPosition{}, nil
	case 8:
		return natsPosition{seq: binary.BigEndian.Uint64(v)}, nil
	case 16:
		return natsPosition{seq: binary.BigEndian.Uint64(v), created: time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))).UTC()}, nil
	}
	return natsPosition{}, fmt.Errorf("stream: NATS position is %d bytes, want 8 or 16", len(v))
}

// streamRecreated says why the stored position cannot belong to the stream
// described by info ("" when it can): another creation time, or a stored
// sequence past the stream's last one (sequences never go back within one
// stream: a purge keeps them).
func streamRecreated(pos natsPosition, info *jetstream.StreamInfo) string {
	if !pos.created.IsZero() && pos.created.UnixNano() != info.Created.UnixNano() {
		return fmt.Sprintf("the stream was created at %s, the stored position belongs to the stream created at %s", info.Created.UTC().Format(time.RFC3339Nano), pos.created.Format(time.RFC3339Nano))
	}
	if pos.seq > info.State.LastSeq {
		return fmt.Sprintf("the stored sequence %d is past the stream's last sequence %d", pos.seq, info.State.LastSeq)
	}
	return ""
}

// streamCheckInterval is how often an idle session checks that its stream
// is still the one it consumes (a deleted stream's consumer only times out).
const streamCheckInterval = 2 * time.Second

// session consumes over one connection until it fails; reached says
// whether it got as far as a fetch (which resets the reconnection backoff).
func (n *NATS) session(ctx context.Context) (reached bool, err error) {
	auth, err := n.opts.Conn.options()
	if err != nil {
		return false, err
	}
	nc, err := nats.Connect(n.opts.URL, append(auth, nats.Name("sluice"), nats.MaxReconnects(0), nats.Timeout(5*time.Second))...)
	if err != nil {
		return false, fmt.Errorf("nats: connect %s: %w", n.opts.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false, err
	}
	str, err := js.Stream(ctx, n.opts.Stream)
	if err != nil {
		return false, fmt.Errorf("nats: stream %s: %w", n.opts.Stream, err)
	}
	info := str.CachedInfo()
	created := info.Created.UTC()
	posName := NATSPositionName(n.table, n.opts.Stream, n.opts.Subject)
	source := fmt.Sprintf("nats/%s/%s/%d", n.opts.Stream, n.opts.Subject, created.UnixNano())
	v, err := n.store.Position(posName)
	if err != nil {
		return false, err
	}
	pos, err := decodeNATSPosition(v)
	if err != nil {
		return false, err
	}
	if why := streamRecreated(pos, info); why != "" && len(v) > 0 {
		// The policy (docs/streams.md, "A recreated topic or stream"): the
		// new stream is consumed from its first message, loudly. The reset
		// is stored at once, so that it is reported once and a crash
		// before the first batch does not undo it.
		n.log.Error("stream deleted and recreated: consuming the new stream from its first message; messages of the old stream after the stored sequence were never stored",
			"stored_sequence", pos.seq, "why", why, "first_sequence", info.State.FirstSeq, "last_sequence", info.State.LastSeq)
		n.counters.Resets.Add(1)
		pos = natsPosition{created: created}
		if err := n.w.storePositions(ctx, []Position{{Name: posName, Value: pos.encode()}}); err != nil {
			return false, fmt.Errorf("nats: storing the reset position: %w", err)
		}
	} else if pos.seq > 0 && pos.seq+1 < info.State.FirstSeq {
		n.log.Warn("messages after the stored sequence are gone from the stream (purged or expired) and were never stored",
			"stored_sequence", pos.seq, "first_sequence", info.State.FirstSeq)
	}
	stored := pos.seq
	cc := jetstream.ConsumerConfig{
		Durable:       n.opts.Durable,
		FilterSubject: n.opts.Subject,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       5 * time.Minute,
		MaxAckPending: -1,
	}
	switch {
	case stored > 0:
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, stored+1
	case n.opts.Start == StartLatest && len(v) == 0:
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	default:
		cc.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	// The broker's view of the consumer never drives delivery: the stored
	// sequence does. Recreate the durable there.
	if err := js.DeleteConsumer(ctx, n.opts.Stream, n.opts.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, fmt.Errorf("nats: delete consumer %s: %w", n.opts.Durable, err)
	}
	cons, err := js.CreateConsumer(ctx, n.opts.Stream, cc)
	if err != nil {
		return false, fmt.Errorf("nats: create consumer %s on %s: %w", n.opts.Durable, n.opts.Stream, err)
	}
	n.counters.ok()
	n.counters.Rebalances.Add(1)
	n.log.Info("consuming", "from_sequence", stored+1)
	maxBatch, wait := n.opts.MaxBatch, n.opts.FetchWait
	lastCheck := time.Now()
	for ctx.Err() == nil {
		batch, err := cons.Fetch(maxBatch, jetstream.FetchMaxWait(wait))
		if err != nil {
			return reached, fmt.Errorf("nats: fetch: %w", err)
		}
		var msgs []Message
		var last jetstream.Msg
		var pending uint64
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return reached, fmt.Errorf("nats: message metadata: %w", err)
			}
			last, pending = m, meta.NumPending
			if meta.Sequence.Stream <= stored {
				continue // stored already (a redelivery)
			}
			msg := Message{Body: m.Data(), Topic: m.Subject(), Offset: int64(meta.Sequence.Stream), Time: meta.Timestamp, Source: source}
			for k, vs := range m.Headers() {
				for _, v := range vs {
					msg.Headers = append(msg.Headers, Header{Key: k, Value: []byte(v)})
				}
			}
			msgs = append(msgs, msg)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return reached, fmt.Errorf("nats: fetch: %w", err)
		}
		reached = true
		if len(msgs) > 0 {
			positions := func(m *Message) []Position {
				return []Position{{Name: posName, Value: natsPosition{seq: uint64(m.Offset), created: created}.encode()}}
			}
			for attempt := 0; ; attempt++ {
				for len(msgs) > 0 && uint64(msgs[0].Offset) <= stored {
					msgs = msgs[1:] // stored by a run before a failed one
				}
				err := n.w.WriteBounded(ctx, msgs, positions, func(m *Message, res Result) {
					n.counters.add(res)
					stored = uint64(m.Offset)
				})
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return reached, ctx.Err()
				}
				n.log.Error("storing a batch failed, retrying", "error", err, "attempt", attempt)
				n.counters.fail(err)
				if err := backoff(ctx, attempt); err != nil {
					return reached, err
				}
			}
			n.counters.ok()
		}
		if last != nil {
			// For lag tools only: the stored sequence is what counts.
			if err := last.Ack(); err != nil {
				n.log.Warn("ack (for lag tools only)", "error", err)
			}
			n.counters.SetLag(n.opts.Stream, 0, int64(pending))
		} else if time.Since(lastCheck) >= streamCheckInterval {
			// Idle: a deleted (and perhaps recreated) stream looks just
			// like an idle one to a fetch. Ask.
			lastCheck = time.Now()
			info, err := str.Info(ctx)
			if err != nil {
				return reached, fmt.Errorf("nats: stream %s: %w", n.opts.Stream, err)
			}
			if !info.Created.Equal(created) {
				return reached, fmt.Errorf("nats: stream %s was deleted and recreated (created %s, consumed since %s)", n.opts.Stream, info.Created.UTC().Format(time.RFC3339Nano), created.Format(time.RFC3339Nano))
			}
		}
	}
	return reached, ctx.Err()
}
