// Package schemaformat decodes messages in the Schema Registry wire format
// (Confluent's framing, which Apicurio's compatible API, Redpanda and
// Karapace share) into rows: Avro, Protobuf and JSON Schema bodies, each
// read with the schema its id names, fetched from the registry once and
// cached by id. A schema's references (Confluent's: an Avro type, a
// .proto file or a JSON Schema of another subject) are fetched with it by
// subject and version, cached the same way, and compiled into it.
//
// The framing, before the body the schema describes:
//
//	byte 0      magic, always 0
//	bytes 1..4  the schema id, big-endian
//	(Protobuf)  the message indexes: a zigzag varint count n, then n zigzag
//	            varints, the path to the message type in the .proto file
//	            (a lone 0 byte is [0], the file's first message)
//	bytes ..    the body
//
// A row is the body's top-level fields; the values are those sluice's
// column types hold (docs/streams.md, "Schema Registry formats", has the
// table of each schema type's column type and why).
//
// Errors tell a source what to do: ErrUnavailable (the registry cannot
// answer now: down, timing out, refusing our credentials) means retry the
// same message later and commit nothing; any other error means this
// message will never decode (bad framing, an id the registry does not
// know, a body that does not match its schema) and belongs to the dead
// letters.
package schemaformat

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// The formats a Decoder reads.
const (
	FormatAvro       = "avro"
	FormatProtobuf   = "protobuf"
	FormatJSONSchema = "json_schema"
)

// Formats lists the formats, for configuration checks.
var Formats = []string{FormatAvro, FormatProtobuf, FormatJSONSchema}

// The errors of Decode; each is wrapped with the message's details.
var (
	// ErrUnavailable: the registry did not answer a schema lookup (network
	// error, timeout, a 5xx, or 401/403: credentials are the operator's to
	// fix, and no message is given up meanwhile). Retry later.
	ErrUnavailable = errors.New("schema registry unavailable")
	// ErrFraming: the message is not in the wire format (too short, or a
	// magic byte other than 0).
	ErrFraming = errors.New("not in the schema registry wire format")
	// ErrUnknownSchema: the registry does not know the message's schema
	// id, or the schema it returned is not of the source's format.
	ErrUnknownSchema = errors.New("unknown schema")
	// ErrBody: the body does not decode with its schema.
	ErrBody = errors.New("body does not match its schema")
)

// DefaultTimeout bounds one registry request.
const DefaultTimeout = 10 * time.Second

// Registry is how to reach a schema registry. Secrets are functions so
// that a token or password file is read again for each request (a renewed
// token needs no restart).
type Registry struct {
	// URLs are the registry's base URLs, tried in order.
	URLs []string
	// Username with Password is HTTP basic auth; Token a bearer token.
	// Either may be set, not both.
	Username string
	Password func() (string, error)
	Token    func() (string, error)
	// TLS, when set, is the client TLS configuration for https URLs.
	TLS *tls.Config
	// Timeout bounds each registry request (default DefaultTimeout).
	Timeout time.Duration
}

// Decoder decodes wire-format messages of one format. Safe for concurrent
// use: the partitions of a source share one.
type Decoder struct {
	format  string
	client  *sr.Client
	timeout time.Duration

	mu sync.RWMutex
	// schemas are the decoders of the ids seen, kept for the process's
	// life: a registry's schema id never changes meaning.
	schemas map[int]bodyDecoder // guarded by mu
	// fetching are the lookups under way: the partitions that meet a new
	// id at once wait for one request instead of each sending its own.
	fetching map[int]*lookup // guarded by mu
	// references are the referenced schemas fetched, by subject and
	// version, kept as schemas are: schemas of several ids often share
	// one referenced subject.
	references map[subjectVersion]sr.Schema // guarded by mu

	// lookups counts registry requests (cold lookups), for tests and
	// benchmarks.
	lookups atomic.Int64
	// waiting, when set (tests), is called when a caller starts waiting
	// for another's lookup of id.
	waiting func(id int)
}

// bodyDecoder decodes a body (past the framing) into a row.
type bodyDecoder interface {
	decode(body []byte) (map[string]any, error)
}

// New returns a Decoder of format (FormatAvro, FormatProtobuf or
// FormatJSONSchema) with
// the schemas of registry o; it contacts the registry only when a message
// needs a schema it has not seen.
func New(format string, o Registry) (*Decoder, error) {
	switch format {
	case FormatAvro, FormatProtobuf, FormatJSONSchema:
	default:
		return nil, fmt.Errorf("schemaformat: format %q: want one of %v", format, Formats)
	}
	if len(o.URLs) == 0 {
		return nil, errors.New("schemaformat: no registry URL")
	}
	if o.Token != nil && (o.Username != "" || o.Password != nil) {
		return nil, errors.New("schemaformat: a token or a username and password, not both")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = o.TLS
	opts := []sr.ClientOpt{
		sr.URLs(o.URLs...),
		sr.HTTPClient(&http.Client{Transport: tr, Timeout: o.Timeout}),
		sr.UserAgent("sluice"),
		sr.PreReq(func(req *http.Request) error { return authorize(req, o) }),
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schemaformat: registry client: %w", err)
	}
	return &Decoder{format: format, client: cl, timeout: o.Timeout, schemas: map[int]bodyDecoder{}, fetching: map[int]*lookup{},
		references: map[subjectVersion]sr.Schema{}}, nil
}

// authorize sets the request's credentials, reading the secrets now.
func authorize(req *http.Request, o Registry) error {
	switch {
	case o.Token != nil:
		tok, err := o.Token()
		if err != nil {
			return fmt.Errorf("registry token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	case o.Username != "":
		var pass string
		if o.Password != nil {
			p, err := o.Password()
			if err != nil {
				return fmt.Errorf("registry password: %w", err)
			}
			pass = p
		}
		req.SetBasicAuth(o.Username, pass)
	}
	return nil
}

// Format is the decoder's format (FormatAvro, FormatProtobuf or
// FormatJSONSchema).
func (d *Decoder) Format() string { return d.format }

// Lookups is how many schema lookups went to the registry.
func (d *Decoder) Lookups() int64 { return d.lookups.Load() }

// Decode decodes one message into a row: Rows for one message, its row
// as a map. The row's values are int64, float64, string, bool, time.Time,
// nil, or (nested values) JSON text as json.RawMessage.
func (d *Decoder) Decode(ctx context.Context, msg []byte) (map[string]any, error) {
	cb := onePool.Get().(*colbatch.Batch)
	defer func() {
		cb.Reset()
		onePool.Put(cb)
	}()
	rows := Rows{d: d, cb: cb, id: -1} // one row: no string values kept
	if err := rows.Append(ctx, msg, 1); err != nil {
		return nil, err
	}
	return cb.Rows()[0], nil
}

// onePool holds the one-row batches of Decode: a new batch's columns are
// sized for a thousand rows.
var onePool = sync.Pool{New: func() any { return new(colbatch.Batch) }}

// decodeMap decodes one message with the schema's map decoder (the
// generic twmb/avro or dynamicpb decoding into a map): the reference the
// column decoders are tested against.
func (d *Decoder) decodeMap(ctx context.Context, msg []byte) (map[string]any, error) {
	id, body, err := splitFrame(msg)
	if err != nil {
		return nil, err
	}
	bd, err := d.schema(ctx, id)
	if err != nil {
		return nil, err
	}
	row, err := bd.decode(body)
	if err != nil {
		return nil, fmt.Errorf("%w: schema id %d: %w", ErrBody, id, err)
	}
	return row, nil
}

// splitFrame returns the schema id and the body of a wire-format message.
func splitFrame(msg []byte) (int, []byte, error) {
	if len(msg) < 5 {
		return 0, nil, fmt.Errorf("%w: %d bytes, want at least 5", ErrFraming, len(msg))
	}
	if msg[0] != 0 {
		return 0, nil, fmt.Errorf("%w: magic byte %#x, want 0", ErrFraming, msg[0])
	}
	return int(binary.BigEndian.Uint32(msg[1:5])), msg[5:], nil
}

// lookup is one registry request that callers wait for.
type lookup struct {
	done chan struct{}
	bd   bodyDecoder
	err  error
}

// schema returns the decoder of schema id, from the cache or the registry.
// A failed lookup is not cached: the next message asks again.
func (d *Decoder) schema(ctx context.Context, id int) (bodyDecoder, error) {
	d.mu.RLock()
	bd, ok := d.schemas[id]
	d.mu.RUnlock()
	if ok {
		return bd, nil
	}
	d.mu.Lock()
	if bd, ok := d.schemas[id]; ok {
		d.mu.Unlock()
		return bd, nil
	}
	l, waiting := d.fetching[id]
	if !waiting {
		l = &lookup{done: make(chan struct{})}
		d.fetching[id] = l
	}
	d.mu.Unlock()
	if waiting {
		if d.waiting != nil {
			d.waiting(id)
		}
		select {
		case <-l.done:
			return l.bd, l.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: waiting for schema id %d: %w", ErrUnavailable, id, ctx.Err())
		}
	}
	l.bd, l.err = d.fetch(ctx, id)
	d.mu.Lock()
	if l.err == nil {
		d.schemas[id] = l.bd
	}
	delete(d.fetching, id)
	d.mu.Unlock()
	close(l.done)
	return l.bd, l.err
}

// fetch asks the registry for schema id and compiles it.
func (d *Decoder) fetch(ctx context.Context, id int) (bodyDecoder, error) {
	d.lookups.Add(1)
	lctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	s, err := d.client.SchemaByID(lctx, id)
	if err != nil {
		return nil, lookupError(id, err)
	}
	refs, err := d.resolve(ctx, id, s.References, nil)
	if err != nil {
		return nil, err
	}
	bd, err := d.compile(s, refs)
	if err != nil {
		return nil, fmt.Errorf("%w: schema id %d: %w", ErrUnknownSchema, id, err)
	}
	return bd, nil
}

// lookupError sorts a failed lookup: the registry saying it has no such
// schema makes the message a dead letter; anything else waits.
func lookupError(id int, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusNotFound || re.StatusCode == http.StatusUnprocessableEntity) {
		return fmt.Errorf("%w: schema id %d: the registry answered %d: %s", ErrUnknownSchema, id, re.StatusCode, re.Error())
	}
	return fmt.Errorf("%w: looking up schema id %d: %w", ErrUnavailable, id, err)
}

// compile makes the body decoder of a registry schema whose references
// are refs.
func (d *Decoder) compile(s sr.Schema, refs []reference) (bodyDecoder, error) {
	for _, r := range dependencyOrder(refs) {
		if r.schema.Type != s.Type {
			return nil, fmt.Errorf("reference %q (%s) is %s, the schema %s", r.name, r.at, r.schema.Type, s.Type)
		}
	}
	switch d.format {
	case FormatAvro:
		if s.Type != sr.TypeAvro {
			return nil, fmt.Errorf("the registry's schema is %s, the source reads avro", s.Type)
		}
		return compileAvro(s.Schema, refs)
	case FormatProtobuf:
		if s.Type != sr.TypeProtobuf {
			return nil, fmt.Errorf("the registry's schema is %s, the source reads protobuf", s.Type)
		}
		return compileProto(s.Schema, refs)
	default:
		if s.Type != sr.TypeJSON {
			return nil, fmt.Errorf("the registry's schema is %s, the source reads json_schema", s.Type)
		}
		return compileJSONSchema(s.Schema, refs)
	}
}
