package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"
)

// Source is one stream a table consumes besides HTTP: exactly one of Kafka,
// NATS or S3 is set. See docs/streams.md and docs/s3.md.
type Source struct {
	Kafka *KafkaSource `yaml:"kafka"`
	NATS  *NATSSource  `yaml:"nats"`
	S3    *S3Source    `yaml:"s3"`
}

// S3Source ingests the objects that land under a bucket's prefix, each
// once: told by S3 event notifications through an SQS queue, or found by
// listing the prefix (docs/s3.md).
type S3Source struct {
	Bucket string `yaml:"bucket"`
	Prefix string `yaml:"prefix"`
	// Format of every object: ndjson, json, csv or parquet; empty: by the
	// key's extension (gzip is detected by content).
	Format string `yaml:"format"`
	// Queue is the URL of the SQS queue the bucket's event notifications
	// go to; empty: the prefix is listed every Interval.
	Queue string `yaml:"queue"`
	// Interval is how often the prefix is listed without a queue (default 30s).
	Interval time.Duration `yaml:"interval"`
	// Endpoint, Region and PathStyle reach the bucket and the queue
	// (empty: the environment's).
	Endpoint  string `yaml:"endpoint"`
	Region    string `yaml:"region"`
	PathStyle bool   `yaml:"path_style"`
	// AccessKey and SecretKey sign the requests (neither: the environment's).
	AccessKey Secret `yaml:"access_key"`
	SecretKey Secret `yaml:"secret_key"`
	// MaxObjectBytes bounds an object held in memory and stored in one
	// batch, as stored and after gzip decoding; a larger one is streamed
	// into a table.Stage (default 8 MiB, and never more than
	// limits.max_body_bytes).
	MaxObjectBytes int64 `yaml:"max_object_bytes"`
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
	// parquet (gzip bodies are detected), or avro, protobuf or json_schema
	// in the Schema Registry wire format (schema_registry required).
	Format string `yaml:"format"`
	// SchemaRegistry serves the schemas of the avro, protobuf and
	// json_schema formats.
	SchemaRegistry *SchemaRegistry `yaml:"schema_registry"`
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
	// TLS, when present, connects to the brokers over TLS (every
	// managed Kafka requires it).
	TLS *ClientTLS `yaml:"tls"`
	// SASL, when present, authenticates to the brokers.
	SASL *KafkaSASL `yaml:"sasl"`
	// Changes, when present, makes the source a change stream: each
	// message upserts or deletes a key of a table with a primary key
	// (docs/changes.md).
	Changes *KafkaChanges `yaml:"changes"`
}

// KafkaChanges says how a change stream's messages name their operation.
// In every format a message with a null value (a tombstone) deletes its
// message key.
type KafkaChanges struct {
	// Format is debezium (Debezium's envelope, JSON or avro), field (plain
	// rows with a column naming the operation) or tombstones (plain rows
	// are upserts, null values delete).
	Format string `yaml:"format"`
	// Field is the column naming a row's operation (format field); it is
	// not stored.
	Field string `yaml:"field"`
	// Delete are the field's values that delete the row's key (default
	// d and delete).
	Delete []string `yaml:"delete"`
	// KeyColumn is the column a scalar message key fills (a tombstone's,
	// or a Debezium delete's without a before image); a JSON object key
	// names its columns.
	KeyColumn string `yaml:"key_column"`
}

// ChangeFormats are the values of a Kafka source's changes.format.
var ChangeFormats = []string{"debezium", "field", "tombstones"}

func (c *KafkaChanges) validate(where string) []error {
	if c == nil {
		return nil
	}
	var errs []error
	if !slices.Contains(ChangeFormats, c.Format) {
		errs = append(errs, fmt.Errorf("%s: format %q: want one of %v", where, c.Format, ChangeFormats))
	}
	if c.Format == "field" && c.Field == "" {
		errs = append(errs, fmt.Errorf("%s: field: empty (format field reads each row's operation from it)", where))
	}
	if c.Format != "field" && (c.Field != "" || len(c.Delete) > 0) {
		errs = append(errs, fmt.Errorf("%s: field and delete: only format field reads them", where))
	}
	return errs
}

// SchemaRegistry is a Confluent-compatible schema registry (Confluent,
// Apicurio's ccompat API, Redpanda, Karapace) a Kafka or NATS source reads
// schemas from.
type SchemaRegistry struct {
	// URLs are the registry's base URLs (http or https), tried in order.
	URLs []string `yaml:"urls"`
	// Username and Password log in with HTTP basic auth; Token is a bearer
	// token instead.
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
	Token    Secret `yaml:"token"`
	// Timeout bounds one schema lookup (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// TLS is for https URLs (a private CA, a client certificate).
	TLS *ClientTLS `yaml:"tls"`
}

// SchemaRegistryFormats are the stream formats that need schema_registry.
var SchemaRegistryFormats = []string{"avro", "protobuf", "json_schema"}

func (r *SchemaRegistry) validate(key string) []error {
	var errs []error
	if len(r.URLs) == 0 {
		errs = append(errs, fmt.Errorf("%s: urls: none", key))
	}
	for _, u := range r.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s: url %q: want http://host:port or https://host:port", key, u))
		}
	}
	if r.Token.IsSet() && (r.Username != "" || r.Password.IsSet()) {
		errs = append(errs, fmt.Errorf("%s: token or username and password, not both", key))
	}
	if r.Password.IsSet() && r.Username == "" {
		errs = append(errs, fmt.Errorf("%s: password without username", key))
	}
	if r.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s: timeout must not be negative", key))
	}
	errs = append(errs, r.Password.Check(key+" password")...)
	errs = append(errs, r.Token.Check(key+" token")...)
	return append(errs, r.TLS.validate(key+" tls")...)
}

// The SASL mechanisms a Kafka source speaks.
var KafkaSASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

// KafkaSASL is how a Kafka source authenticates: PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512 with Username and Password, OAUTHBEARER with Token (a
// bearer token the operator renews, e.g. a file a sidecar rewrites: it is
// read again at every connection). Over a listener without TLS, PLAIN
// sends the password in the clear: sluice refuses that combination.
type KafkaSASL struct {
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	Password  Secret `yaml:"password"`
	Token     Secret `yaml:"token"`
}

// ClientTLS is how sluice speaks TLS to a server it connects to. The
// server's certificate is always verified: against CAFile when set, else
// the system's roots.
type ClientTLS struct {
	// CAFile is a PEM file of the CA certificates that may sign the
	// server's certificate.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate (with its chain)
	// and its key, for servers that require client certificates.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry (default:
	// the host the address names).
	ServerName string `yaml:"server_name"`
	// MinVersion is the oldest TLS version accepted: "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version"`
}

// TLSVersions are the versions ClientTLS.MinVersion accepts.
var TLSVersions = []string{"1.2", "1.3"}

func (c *ClientTLS) validate(key string) []error {
	if c == nil {
		return nil
	}
	var errs []error
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s: cert_file and key_file go together", key))
	}
	if c.MinVersion != "" && !slices.Contains(TLSVersions, c.MinVersion) {
		errs = append(errs, fmt.Errorf("%s: min_version %q: want one of %v", key, c.MinVersion, TLSVersions))
	}
	return errs
}

func (s *KafkaSASL) validate(key string, tls bool) []error {
	if s == nil {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(key+": "+format, args...)) }
	switch s.Mechanism {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if s.Username == "" || !s.Password.IsSet() {
			add("%s needs username and password", s.Mechanism)
		}
		if s.Token.IsSet() {
			add("token is for OAUTHBEARER, not %s", s.Mechanism)
		}
		if s.Mechanism == "PLAIN" && !tls {
			add("PLAIN without tls sends the password in the clear: add a tls section")
		}
	case "OAUTHBEARER":
		if !s.Token.IsSet() {
			add("OAUTHBEARER needs token")
		}
		if s.Password.IsSet() {
			add("password is not used by OAUTHBEARER (token is)")
		}
	default:
		add("mechanism %q: want one of %v", s.Mechanism, KafkaSASLMechanisms)
	}
	errs = append(errs, s.Password.Check(key+".password")...)
	errs = append(errs, s.Token.Check(key+".token")...)
	return errs
}

// NATSSource consumes a JetStream stream through a durable pull consumer.
type NATSSource struct {
	URL     string `yaml:"url"`
	Stream  string `yaml:"stream"`
	Subject string `yaml:"subject"`
	// Durable is the consumer's name; sluice (re)creates it at the stored
	// position on start.
	Durable string `yaml:"durable"`
	// Format of each message body: as for Kafka, the Schema Registry
	// formats included (schema_registry required).
	Format string `yaml:"format"`
	// SchemaRegistry serves the schemas of the avro, protobuf and
	// json_schema formats.
	SchemaRegistry *SchemaRegistry `yaml:"schema_registry"`
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

	// The server's authentication takes one of: User and Password; Token;
	// NKeySeedFile (an nkey user's seed, "SU..."); CredsFile (a
	// decentralized-auth user's JWT and seed, as nsc writes it).
	User         string `yaml:"user"`
	Password     Secret `yaml:"password"`
	Token        Secret `yaml:"token"`
	NKeySeedFile string `yaml:"nkey_seed_file"`
	CredsFile    string `yaml:"creds_file"`
	// TLS, when present, connects over TLS (also implied by a tls:// url).
	TLS *ClientTLS `yaml:"tls"`
}

func (n *NATSSource) validateAuth(key string) []error {
	var errs []error
	ways := 0
	for _, set := range []bool{n.User != "" || n.Password.IsSet(), n.Token.IsSet(), n.NKeySeedFile != "", n.CredsFile != ""} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		errs = append(errs, fmt.Errorf("%s: set one of user/password, token, nkey_seed_file, creds_file", key))
	}
	if (n.User == "") != !n.Password.IsSet() {
		errs = append(errs, fmt.Errorf("%s: user and password go together", key))
	}
	errs = append(errs, n.Password.Check(key+" password")...)
	errs = append(errs, n.Token.Check(key+" token")...)
	return append(errs, n.TLS.validate(key+" tls")...)
}

// KafkaMetadata and NATSMetadata are the metadata names a source accepts.
var (
	KafkaMetadata = []string{"key", "headers", "topic", "partition", "offset", "timestamp"}
	NATSMetadata  = []string{"subject", "headers", "sequence", "timestamp"}
	StreamFormats = []string{"ndjson", "json", "csv", "parquet"}
)

func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// validateSources reports every problem of t's sources.
func (t *Table) validateSources(where string) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if t.SchemaRegistry != nil {
		errs = append(errs, t.SchemaRegistry.validate(where+": schema_registry")...)
	}
	for i, s := range t.Sources {
		sw := fmt.Sprintf("%s: sources[%d]", where, i)
		switch {
		case countSet(s.Kafka != nil, s.NATS != nil, s.S3 != nil) > 1:
			add("%s: set one of kafka, nats or s3", sw)
			continue
		case s.Kafka == nil && s.NATS == nil && s.S3 == nil:
			add("%s: set kafka, nats or s3", sw)
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
			format, regErrs := checkRegistry(sw, k.Format, k.SchemaRegistry)
			errs = append(errs, regErrs...)
			checkCommon(format, k.Start, k.Metadata, KafkaMetadata)
			errs = append(errs, k.TLS.validate(sw+" tls")...)
			errs = append(errs, k.SASL.validate(sw+" sasl", k.TLS != nil)...)
			if k.KeyPartitioned {
				errs = append(errs, t.checkKeyPartitioned(sw)...)
			}
			errs = append(errs, k.Changes.validate(sw+" changes")...)
		}
		if o := s.S3; o != nil {
			sw := sw + " s3"
			if o.Bucket == "" {
				add("%s: bucket: empty", sw)
			}
			if o.Queue != "" {
				if u, err := url.Parse(o.Queue); err != nil || u.Host == "" {
					add("%s: queue: want the SQS queue's URL", sw)
				}
			}
			if o.Interval < 0 || o.MaxObjectBytes < 0 {
				add("%s: interval and max_object_bytes must not be negative", sw)
			}
			checkCommon(o.Format, "", nil, nil)
			errs = append(errs, o.AccessKey.Check(sw+" access_key")...)
			errs = append(errs, o.SecretKey.Check(sw+" secret_key")...)
			if o.AccessKey.IsSet() != o.SecretKey.IsSet() {
				add("%s: set access_key and secret_key together", sw)
			}
		}
		if n := s.NATS; n != nil {
			sw += " nats"
			if u, err := url.Parse(n.URL); err != nil || u.Host == "" {
				add("%s: url: want nats://host:port or tls://host:port", sw)
			} else if u.User != nil {
				add("%s: url: holds credentials; give them as user/password or token (never inline in a url, which is logged)", sw)
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
			format, regErrs := checkRegistry(sw, n.Format, n.SchemaRegistry)
			errs = append(errs, regErrs...)
			checkCommon(format, n.Start, n.Metadata, NATSMetadata)
			errs = append(errs, n.validateAuth(sw)...)
		}
	}
	return errs
}

// checkRegistry reports the problems of a stream source's format and
// schema_registry together: a Schema Registry format needs a registry, and
// a registry serves only those formats. It returns the format left for the
// checks of the formats every source shares ("" for a registry format).
func checkRegistry(where, format string, r *SchemaRegistry) (string, []error) {
	var errs []error
	if slices.Contains(SchemaRegistryFormats, format) {
		if r == nil {
			errs = append(errs, fmt.Errorf("%s: format %s: schema_registry: missing (the messages' schemas are there)", where, format))
		}
		format = ""
	} else if r != nil {
		errs = append(errs, fmt.Errorf("%s: schema_registry: only the formats %v use it", where, SchemaRegistryFormats))
	}
	if r != nil {
		errs = append(errs, r.validate(where+" schema_registry")...)
	}
	return format, errs
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
