package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"
)

// Source is one stream a table consumes besides HTTP: exactly one of Kafka
// or NATS is set. See docs/streams.md.
type Source struct {
	Kafka *KafkaSource `yaml:"kafka"`
	NATS  *NATSSource  `yaml:"nats"`
}

// KafkaSource consumes topics of a Kafka cluster (or anything speaking the
// Kafka protocol) in a consumer group.
type KafkaSource struct {
	// Brokers are seed brokers, host:port.
	Brokers []string `yaml:"brokers"`
	// Topics are consumed in full (every partition the group assigns).
	Topics []string `yaml:"topics"`
	// Group is the consumer group: nodes with the same group split the
	// partitions.
	Group string `yaml:"group"`
	// Format of each message body: ndjson (default), json, csv or
	// parquet; gzip bodies are detected.
	Format string `yaml:"format"`
	// Start is where a partition with neither a stored nor a committed
	// position begins: earliest (default) or latest.
	Start string `yaml:"start"`
	// Metadata names message fields added to every row before the computed
	// columns run: key (_key), headers (_headers, a JSON object), topic
	// (_topic), partition (_partition), offset (_offset), timestamp
	// (_timestamp).
	Metadata []string `yaml:"metadata"`
	// MaxPollRecords bounds the messages handled per poll (default 5000).
	MaxPollRecords int `yaml:"max_poll_records"`
	// FetchMaxBytes bounds what one fetch buffers (default 8 MiB, 2 MiB a partition):
	// with MaxPollRecords it bounds a source's memory.
	FetchMaxBytes int32 `yaml:"fetch_max_bytes"`
	// SessionTimeout is how long the group waits for a silent node before
	// giving its partitions to the others (default 45s; the broker's
	// group.min.session.timeout.ms, 6s by default, bounds it from below).
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// InstanceID turns on static membership: a node restarted with the same
	// id within SessionTimeout gets its partitions back without a
	// rebalance. Give each node its own (e.g. SLUICE_... override).
	InstanceID string `yaml:"instance_id"`
	// MaxMessageBytes bounds a message body, as received and after gzip
	// decoding; a larger message is a dead letter (default 8 MiB, and never
	// more than limits.max_body_bytes).
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
	// KeyPartitioned states that every message's key is its rows' hashBy
	// value (as text: a string as it is, an integer in decimal) and that
	// producers pick its partition with Kafka's default partitioner
	// (murmur2 of the key, modulo the topic's partitions): a cluster query
	// for hashBy values then asks only the nodes that hold rows of their
	// partitions (docs/cluster.md, "Key queries"). sluice cannot check it;
	// a wrong statement makes key queries miss rows.
	KeyPartitioned bool `yaml:"key_partitioned"`
	// Linger is how long a partition gathers polls into one stored batch
	// (one synced commit) unless it has max_poll_records sooner (default
	// 100ms; negative: one batch per poll). docs/streams.md, "Linger".
	Linger time.Duration `yaml:"linger"`
}

// NATSSource consumes a JetStream stream through a durable pull consumer.
type NATSSource struct {
	URL     string `yaml:"url"`
	Stream  string `yaml:"stream"`
	Subject string `yaml:"subject"`
	// Durable is the consumer's name; sluice (re)creates it at the stored
	// position on start.
	Durable string `yaml:"durable"`
	Format  string `yaml:"format"`
	// Start is where a table with no stored position begins: earliest
	// (default) or latest.
	Start string `yaml:"start"`
	// Metadata: subject (_subject), headers (_headers), sequence
	// (_sequence), timestamp (_timestamp).
	Metadata []string `yaml:"metadata"`
	// MaxBatch bounds the messages fetched at once (default 5000).
	MaxBatch int `yaml:"max_batch"`
	// FetchWait is how long a fetch waits for messages (default 500ms).
	FetchWait time.Duration `yaml:"fetch_wait"`
	// MaxMessageBytes: as for Kafka.
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
}

// KafkaMetadata and NATSMetadata are the metadata names a source accepts.
var (
	KafkaMetadata = []string{"key", "headers", "topic", "partition", "offset", "timestamp"}
	NATSMetadata  = []string{"subject", "headers", "sequence", "timestamp"}
	StreamFormats = []string{"ndjson", "json", "csv", "parquet"}
)

// validateSources reports every problem of t's sources.
func (t *Table) validateSources(where string) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for i, s := range t.Sources {
		sw := fmt.Sprintf("%s: sources[%d]", where, i)
		switch {
		case s.Kafka != nil && s.NATS != nil:
			add("%s: set kafka or nats, not both", sw)
			continue
		case s.Kafka == nil && s.NATS == nil:
			add("%s: set kafka or nats", sw)
			continue
		}
		checkCommon := func(format, start string, metadata, allowed []string) {
			if format != "" && !slices.Contains(StreamFormats, format) {
				add("%s: format %q: want one of %v", sw, format, StreamFormats)
			}
			if start != "" && start != "earliest" && start != "latest" {
				add("%s: start %q: want earliest or latest", sw, start)
			}
			for _, m := range metadata {
				if !slices.Contains(allowed, m) {
					add("%s: metadata %q: want some of %v", sw, m, allowed)
				}
			}
		}
		if k := s.Kafka; k != nil {
			sw += " kafka"
			if len(k.Brokers) == 0 {
				add("%s: brokers: none", sw)
			}
			for _, b := range k.Brokers {
				if _, _, err := net.SplitHostPort(b); err != nil {
					add("%s: broker %q: %v", sw, b, err)
				}
			}
			if len(k.Topics) == 0 {
				add("%s: topics: none", sw)
			}
			for _, tp := range k.Topics {
				if tp == "" {
					add("%s: topics: an empty name", sw)
				}
			}
			if k.Group == "" {
				add("%s: group: empty (nodes of one group split the partitions)", sw)
			}
			if k.MaxPollRecords < 0 || k.FetchMaxBytes < 0 || k.SessionTimeout < 0 || k.MaxMessageBytes < 0 {
				add("%s: max_poll_records, fetch_max_bytes, session_timeout and max_message_bytes must not be negative", sw)
			}
			checkCommon(k.Format, k.Start, k.Metadata, KafkaMetadata)
			if k.KeyPartitioned {
				errs = append(errs, t.checkKeyPartitioned(sw)...)
			}
		}
		if n := s.NATS; n != nil {
			sw += " nats"
			if u, err := url.Parse(n.URL); err != nil || u.Host == "" {
				add("%s: url %q: want nats://host:port", sw, n.URL)
			}
			if n.Stream == "" {
				add("%s: stream: empty", sw)
			}
			if n.Durable == "" {
				add("%s: durable: empty", sw)
			}
			if n.MaxBatch < 0 || n.FetchWait < 0 || n.MaxMessageBytes < 0 {
				add("%s: max_batch, fetch_wait and max_message_bytes must not be negative", sw)
			}
			checkCommon(n.Format, n.Start, n.Metadata, NATSMetadata)
		}
	}
	return errs
}

// checkKeyPartitioned reports why t cannot route key queries by Kafka
// partition: rows must all come from key-partitioned Kafka sources (a NATS
// source's rows could be on any node) and the hashBy column must have a
// text form that is the message key.
func (t *Table) checkKeyPartitioned(where string) []error {
	var errs []error
	if t.HashBy == "" {
		errs = append(errs, fmt.Errorf("%s: key_partitioned: the table has no hashBy column", where))
	} else {
		// Without a declared type the key form of a value is a guess (the
		// JSON number 7 and the string "7" are different keys): refused
		// rather than a table that never routes or routes on a guess.
		declared := false
		for _, c := range t.Schema {
			if c.Name != t.HashBy {
				continue
			}
			declared = true
			if c.Type != "string" && c.Type != "int64" {
				errs = append(errs, fmt.Errorf("%s: key_partitioned: hashBy column %q is %s; want string or int64", where, c.Name, c.Type))
			}
		}
		if !declared {
			errs = append(errs, fmt.Errorf("%s: key_partitioned: hashBy column %q has no declared type; declare it in the schema as string or int64", where, t.HashBy))
		}
	}
	for i, s := range t.Sources {
		if s.Kafka == nil || !s.Kafka.KeyPartitioned {
			errs = append(errs, fmt.Errorf("%s: key_partitioned: sources[%d] is not a key_partitioned kafka source (its rows could be on any node)", where, i))
		}
	}
	return errs
}
