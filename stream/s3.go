package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/s3http"
)

// S3Options configure an S3 source: the objects under a bucket's prefix,
// each ingested once, found by listing the prefix every Interval or told by
// Notifications (S3 event notifications through SQS).
type S3Options struct {
	Bucket, Prefix string
	// Format of every object: ndjson, json, csv or parquet; empty means by
	// the key's extension (.ndjson/.jsonl, .json, .csv, .parquet, each
	// optionally .gz; any other is ndjson). Gzip is detected by content.
	Format string
	// Interval is how often the prefix is listed when there are no
	// Notifications (default 30s).
	Interval time.Duration
	// Endpoint, Region and PathStyle reach the bucket (empty: the
	// environment's, as s3http.Client says).
	Endpoint, Region string
	PathStyle        bool
	// Credentials sign the requests; nil means the environment's.
	Credentials func() (s3http.Credentials, error)
	// Notifications, when set, replace listing: they tell which objects
	// arrived, and a notice is acknowledged only once its object is stored.
	Notifications Notifications
	// HTTP sends the S3 requests (nil: s3http's default client).
	HTTP *http.Client

	// afterStore, when set (tests), runs between storing an object's rows
	// and acknowledging its notice: where a crash leaves the notice to be
	// delivered again.
	afterStore func(key string)
}

// EnsureDefaults fills the zero fields with their defaults.
func (o *S3Options) EnsureDefaults() {
	if o.Interval <= 0 {
		o.Interval = 30 * time.Second
	}
}

// Notice says that an object arrived.
type Notice struct {
	Bucket, Key string
	// ETag is the object's entity tag as the event gave it (may be empty).
	ETag string
	// Ack removes the notice (deletes the SQS message); until then it is
	// delivered again after its visibility timeout.
	Ack func(ctx context.Context) error
}

// Notifications deliver Notices: S3 event notifications through a queue.
type Notifications interface {
	// Receive waits for notices (long polling) until ctx is done; an
	// empty answer is no error.
	Receive(ctx context.Context) ([]Notice, error)
	Close() error
}

// S3 is the source of one table's objects under a bucket prefix.
type S3 struct {
	table    string
	opts     S3Options
	target   Target
	client   *s3http.Client
	log      *slog.Logger
	counters *Counters

	mu      sync.Mutex
	writers map[string]*Writer // by format
	done    map[string]string  // key → ETag stored; REQUIRES: mu held
}

// NewS3 makes the S3 source of table tableName.
func NewS3(t Target, tableName string, opts S3Options) (*S3, error) {
	opts.EnsureDefaults()
	if opts.Bucket == "" {
		return nil, errors.New("stream: s3: bucket is empty")
	}
	if opts.Format != "" {
		if _, err := newWriter(t, opts.Format, nil, nil, nil); err != nil {
			return nil, err
		}
	}
	s := &S3{table: tableName, opts: opts, target: t, log: t.Log, counters: newCounters(tableName, "s3"),
		writers: map[string]*Writer{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("table", tableName, "source", "s3", "bucket", opts.Bucket, "prefix", opts.Prefix)
	s.target.Log = s.log
	s.client = &s3http.Client{Endpoint: opts.Endpoint, Region: opts.Region, PathStyle: opts.PathStyle, Credentials: opts.Credentials, HTTP: opts.HTTP}
	return s, nil
}

// Name implements Source.
func (s *S3) Name() string { return fmt.Sprintf("s3 %s/%s", s.opts.Bucket, s.opts.Prefix) }

// Counters implements Source.
func (s *S3) Counters() *Counters { return s.counters }

// S3PositionName is the name under which an object's ETag is stored with
// its rows in table: the record that it was ingested.
func S3PositionName(table, bucket, key string) string {
	return fmt.Sprintf("%s/s3/%s/%s", table, bucket, key)
}

// objectFormat is the format of key: s.opts.Format, else by extension.
func (s *S3) objectFormat(key string) string {
	if s.opts.Format != "" {
		return s.opts.Format
	}
	ext := path.Ext(strings.TrimSuffix(strings.ToLower(key), ".gz"))
	switch ext {
	case ".json":
		return "json"
	case ".csv":
		return "csv"
	case ".parquet":
		return "parquet"
	}
	return "ndjson"
}

func (s *S3) writer(format string) (*Writer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.writers[format]; ok {
		return w, nil
	}
	bucket := s.opts.Bucket
	w, err := newWriter(s.target, format, nil, nil, func(m *Message) string {
		return "s3://" + bucket + "/" + m.Topic
	})
	if err != nil {
		return nil, err
	}
	s.writers[format] = w
	return w, nil
}

// loadDone reads the records of the objects stored so far.
func (s *S3) loadDone() error {
	done := map[string]string{}
	prefix := S3PositionName(s.table, s.opts.Bucket, "")
	err := s.target.Store.Positions(prefix, func(name string, value []byte) error {
		done[strings.TrimPrefix(name, prefix)] = string(value)
		return nil
	})
	if err != nil {
		return fmt.Errorf("stream: s3: read the objects stored: %w", err)
	}
	s.mu.Lock()
	s.done = done
	s.mu.Unlock()
	return nil
}

// stored says whether key with etag was ingested already (any version of
// it when etag is empty).
func (s *S3) stored(key, etag string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.done[key]
	return ok && (etag == "" || got == unquote(etag))
}

// unquote is an ETag without its quotes: listings and GETs quote it, S3
// event notifications do not.
func unquote(etag string) string { return strings.Trim(etag, `"`) }

// Run implements Source.
func (s *S3) Run(ctx context.Context) error {
	if err := s.loadDone(); err != nil {
		return err
	}
	if s.opts.Notifications != nil {
		defer s.opts.Notifications.Close()
		return reconnect(ctx, s.log, s.counters, s.receive, backoff)
	}
	return reconnect(ctx, s.log, s.counters, s.listLoop, backoff)
}

// listLoop lists the prefix every Interval and ingests what is new.
func (s *S3) listLoop(ctx context.Context) (bool, error) {
	reached := false
	for {
		if err := s.listOnce(ctx); err != nil {
			return reached, err
		}
		reached = true
		s.counters.ok()
		t := time.NewTimer(s.opts.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return reached, ctx.Err()
		case <-t.C:
		}
	}
}

// listOnce ingests every object under the prefix not stored yet, in key
// order.
func (s *S3) listOnce(ctx context.Context) error {
	after := ""
	for {
		page, err := s.client.List(ctx, s.opts.Bucket, s.opts.Prefix, after)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		for _, o := range page {
			if strings.HasSuffix(o.Key, "/") || s.stored(o.Key, o.ETag) {
				continue
			}
			if err := s.ingest(ctx, o.Key, o.ETag); err != nil {
				return err
			}
		}
		after = page[len(page)-1].Key
	}
}

// receive handles the notices of one long poll after another.
func (s *S3) receive(ctx context.Context) (bool, error) {
	reached := false
	for {
		notices, err := s.opts.Notifications.Receive(ctx)
		if err != nil {
			return reached, err
		}
		reached = true
		s.counters.ok()
		for _, n := range notices {
			if n.Bucket != s.opts.Bucket || !strings.HasPrefix(n.Key, s.opts.Prefix) || strings.HasSuffix(n.Key, "/") {
				// Not this source's (a shared queue): leave it for its owner.
				continue
			}
			if !s.stored(n.Key, n.ETag) {
				err := s.ingest(ctx, n.Key, n.ETag)
				if errors.Is(err, s3http.ErrNotFound) {
					// Deleted since it was announced: nothing will ever
					// read it, so the notice is dropped, not retried.
					s.log.Warn("announced object is gone: notice dropped", "key", n.Key, "error", err)
					err = nil
				}
				if err != nil {
					// Not acknowledged: the queue delivers it again after
					// its visibility timeout.
					return reached, err
				}
			}
			if n.Ack != nil {
				if err := n.Ack(ctx); err != nil {
					return reached, fmt.Errorf("stream: s3: acknowledge s3://%s/%s: %w", n.Bucket, n.Key, err)
				}
			}
		}
	}
}

// ingest reads one object and stores its rows with the record of its key
// and ETag in one synced batch: after a crash both are stored or neither,
// so a notice delivered again, or the next listing, finds it stored. An
// object that does not decode goes to the dead letters, recorded the same
// way. A failure to read or store is returned (nothing stored): the caller
// retries with backoff.
func (s *S3) ingest(ctx context.Context, key, etag string) error {
	w, err := s.writer(s.objectFormat(key))
	if err != nil {
		return err
	}
	obj, err := s.client.Get(ctx, s.opts.Bucket, key, "")
	if err != nil {
		return err
	}
	// Read one byte past the bound at most: a larger object becomes a dead
	// letter (Writer.unpack) without being held whole.
	body, err := io.ReadAll(io.LimitReader(obj.Body, w.maxMessageBytes()+1))
	obj.Body.Close()
	if err != nil {
		return fmt.Errorf("stream: s3: read s3://%s/%s: %w", s.opts.Bucket, key, err)
	}
	if obj.ETag != "" {
		etag = obj.ETag // what was read is what is recorded
	}
	etag = unquote(etag)
	msg := Message{Body: body, Topic: key, Time: time.Now(),
		// The source incarnation is the object's version: the cold tier
		// commits each (source, offset) once across nodes.
		Source: "s3/" + s.opts.Bucket + "/" + key + "/" + etag}
	res, err := w.Write(ctx, []Message{msg}, []Position{{Name: S3PositionName(s.table, s.opts.Bucket, key), Value: []byte(etag)}})
	if err != nil {
		return fmt.Errorf("stream: s3: store s3://%s/%s: %w", s.opts.Bucket, key, err)
	}
	s.counters.add(res)
	s.mu.Lock()
	s.done[key] = etag
	s.mu.Unlock()
	if res.Poison > 0 {
		s.log.Warn("object to the dead letters", "key", key, "etag", etag)
	}
	if s.opts.afterStore != nil {
		s.opts.afterStore(key)
	}
	return nil
}

// ErrNoSQS: the binary was built without an SQS client (the lean sluice:
// the AWS SDK is in sluice-full only), so an S3 source cannot read a queue.
var ErrNoSQS = errors.New("this binary is built without SQS (an S3 source's queue)")

// SQSConfig is what opening an S3 source's queue needs.
type SQSConfig struct {
	// Queue is the queue's URL.
	Queue string
	// Endpoint and Region reach it (empty: the environment's).
	Endpoint, Region string
	// Credentials sign the requests; nil means the environment's.
	Credentials func() (s3http.Credentials, error)
}

var sqsOpener struct {
	sync.Mutex
	open func(ctx context.Context, c SQSConfig) (Notifications, error)
}

// EnableSQS registers the function that opens an SQS queue (sluice-full's
// main calls it); without it OpenSQS fails with ErrNoSQS.
func EnableSQS(open func(ctx context.Context, c SQSConfig) (Notifications, error)) {
	sqsOpener.Lock()
	sqsOpener.open = open
	sqsOpener.Unlock()
}

// SQSLinked says whether EnableSQS was called.
func SQSLinked() bool {
	sqsOpener.Lock()
	defer sqsOpener.Unlock()
	return sqsOpener.open != nil
}

// OpenSQS opens the queue of c with the registered opener.
func OpenSQS(ctx context.Context, c SQSConfig) (Notifications, error) {
	sqsOpener.Lock()
	open := sqsOpener.open
	sqsOpener.Unlock()
	if open == nil {
		return nil, fmt.Errorf("queue %s: %w", c.Queue, ErrNoSQS)
	}
	return open(ctx, c)
}
