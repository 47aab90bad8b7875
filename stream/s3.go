package stream

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/internal/s3http"
	"github.com/sluicedb/sluice/table"
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
	// streamAbove, when set (tests, the benchmark), streams every object
	// larger than it, whatever max_object_bytes says.
	streamAbove int64
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
// and ETag all at once: after a crash both are stored or neither, so a
// notice delivered again, or the next listing, finds it stored. An object
// of at most max_object_bytes (as stored and gzip-decoded) is held in
// memory and stored in one synced batch; a larger one is decoded as it is
// read into a table.Stage, published with its record once read to its end
// (streamObject). An object that does not decode goes to the dead letters,
// recorded the same way. A failure to read or store is returned (nothing
// stored): the caller retries with backoff.
func (s *S3) ingest(ctx context.Context, key, etag string) error {
	format := s.objectFormat(key)
	w, err := s.writer(format)
	if err != nil {
		return err
	}
	obj, err := s.client.Get(ctx, s.opts.Bucket, key, "")
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	if obj.ETag != "" {
		etag = obj.ETag // what was read is what is recorded
	}
	etag = unquote(etag)
	msg := Message{Topic: key, Time: time.Now(),
		// The source incarnation is the object's version: the cold tier
		// commits each (source, offset) once across nodes.
		Source: "s3/" + s.opts.Bucket + "/" + key + "/" + etag}
	record := Position{Name: S3PositionName(s.table, s.opts.Bucket, key), Value: []byte(etag)}
	// Read one byte past the in-memory bound at most: what is longer is
	// streamed on from there, never held whole.
	limit := min(w.maxMessageBytes(), s.streamAbove())
	head, err := io.ReadAll(io.LimitReader(obj.Body, limit+1))
	if err != nil {
		return fmt.Errorf("stream: s3: read s3://%s/%s: %w", s.opts.Bucket, key, err)
	}
	var res Result
	if rest, whole := s.inMemory(&msg, head, limit, format); whole {
		res, err = w.Write(ctx, []Message{msg}, []Position{record})
	} else {
		res, err = s.streamObject(ctx, w, &msg, record, io.MultiReader(rest, obj.Body))
	}
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

// streamAbove is the size above which an object is streamed (tests and the
// benchmark lower it; otherwise max_object_bytes decides).
func (s *S3) streamAbove() int64 {
	if s.opts.streamAbove > 0 {
		return s.opts.streamAbove
	}
	return math.MaxInt64
}

// inMemory says whether the object whose first bytes are head (at most
// limit+1 of them) is stored from memory, setting msg's body, or streamed
// (whole false), to be read from rest and then the rest of the GET body.
// A Parquet object over the bound is streamed too: to a file first, since
// its decoder needs random access (streamObject).
func (s *S3) inMemory(msg *Message, head []byte, limit int64, format string) (rest io.Reader, whole bool) {
	msg.Body = head
	if int64(len(head)) > limit {
		return bytes.NewReader(head), false
	}
	if format == "parquet" {
		return nil, true
	}
	if !bytes.HasPrefix(head, gzipMagic) {
		return nil, true
	}
	decoded, err := gunzip(head, limit)
	if errors.Is(err, ErrMessageTooLarge) {
		return bytes.NewReader(head), false
	}
	if err == nil {
		// Gzip-decoded once, here: Writer.unpack takes it as it is.
		msg.Body, msg.unpacked = decoded, true
	}
	return nil, true // a corrupt gzip stream is the Writer's poison
}

// s3StreamRows is how many rows of a streamed object are decoded, computed
// and staged at a time: what bounds its memory with the decoder's buffers.
const s3StreamRows = 4096

// errObjectPoison marks an error that makes a streamed object a dead
// letter (a row refused by the schema or a reject column), as opposed to a
// failure to store it, which is retried.
type errObjectPoison struct{ err error }

func (e errObjectPoison) Error() string { return e.err.Error() }
func (e errObjectPoison) Unwrap() error { return e.err }

// readErr remembers the first error reading the GET body: a connection
// lost mid-object is retried, not taken for a corrupt object.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// prefixBuffer keeps the first max bytes written to it: the start of a
// streamed object, for its dead letter.
type prefixBuffer struct {
	buf []byte
	max int
}

func (b *prefixBuffer) Write(p []byte) (int, error) {
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// streamObject decodes an object as it is read from r (gzip-decoded when
// it is gzip; a Parquet object spooled to a file first, spoolParquet),
// s3StreamRows rows at a time, through the table's computed
// columns and filters into a table.Stage, and publishes the rows, their
// dead letters and record in one step once r is read to its end: memory is
// bounded by the decoder's buffers and a batch of rows, whatever the
// object's size. A bad line (under on_bad_line reject), a row the schema
// or a reject column refuses, or a corrupt gzip stream publishes nothing of
// the object: it goes to the dead letters with its first bytes, recorded
// in one synced batch. A failure to read or store returns the error with
// nothing stored.
func (s *S3) streamObject(ctx context.Context, w *Writer, msg *Message, record Position, r io.Reader) (Result, error) {
	res := Result{Messages: 1}
	stage, err := w.target.Store.NewStage()
	if err != nil {
		return res, err
	}
	defer stage.Close()
	body := &readErr{r: r}
	start := &prefixBuffer{max: maxDeadLetterBody + 1}
	var d ingest.Decoded
	opts := ingest.DecodeOptions{
		Format: w.format, Policy: w.target.Policy, Schema: w.target.Schema,
		BatchRows: s3StreamRows, MaxLine: int(min(w.maxMessageBytes(), math.MaxInt32)),
	}
	emit := func(rows []ingest.Row, _ []int) error {
		return w.stageRows(ctx, stage, msg, rows, &res)
	}
	zr, release, err := ingest.MaybeGunzipPooled(body)
	if err == nil {
		defer release()
		if w.format == ingest.Parquet {
			d, err = spoolParquet(ctx, w.target.Store, stage, io.TeeReader(zr, start), opts, emit)
		} else {
			d, err = ingest.Decode(io.TeeReader(zr, start), opts, emit)
		}
	}
	var poison errObjectPoison
	switch {
	case body.err != nil:
		return res, fmt.Errorf("read: %w", body.err)
	case err != nil && ctx.Err() != nil:
		return res, ctx.Err()
	case err != nil && !errors.Is(err, ingest.ErrBadInput) && !errors.As(err, &poison) && !isGzipError(err):
		return res, err // storing failed: retried
	case err != nil:
		stage.Close() // nothing of it is published
		msg.Body = start.buf
		var bad *ingest.LineError
		if errors.As(err, &bad) {
			err = bad // "line N: ...", as a message's dead letter says it
		}
		return s.storePoison(ctx, w, msg, record, err, d.Rows)
	}
	res.BadLines = d.BadCount
	if d.BadCount > 0 && w.target.DeadLetters != nil {
		// on_bad_line skip: one dead letter for the object, as for a message.
		msg.Body = start.buf
		why := fmt.Errorf("%d bad lines skipped, the first: %w", d.BadCount, d.BadLines[0])
		dead := w.sourceOfDead(w.messageDeadLetter(w.now(), msg, why, "bad_line"), []Message{*msg}, 0)
		if err := stage.Append(ctx, w.target.DeadLetters, []table.Row{dead}); err != nil {
			return res, fmt.Errorf("stream: dead letters: %w", err)
		}
		res.DeadLetters++
	}
	if err := stage.SetPosition(record.Name, record.Value); err != nil {
		return res, err
	}
	if err := stage.Publish(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// spoolCheckBytes is how often spooling checks the store's free space.
const spoolCheckBytes = 16 << 20

// spoolParquet copies a Parquet object from r to a file in stage's scratch
// directory (removed with the stage, or by the next NewStage after a
// crash) and decodes it from there: Parquet's footer is at its end and its
// decoder reads the file in place, page by page, so memory stays bounded
// whatever the object's size. The copy is held to the store's free-space
// guard: while room for the copy and the minimum free space is lacking it
// fails with a *table.DiskFullError (nothing stored; retried), before the
// disk fills. A failure to write the file is returned as it is (retried).
func spoolParquet(ctx context.Context, store *table.Store, stage *table.Stage, r io.Reader, opts ingest.DecodeOptions, emit func([]ingest.Row, []int) error) (ingest.Decoded, error) {
	f, err := os.CreateTemp(stage.Dir(), "object-*.parquet")
	if err != nil {
		return ingest.Decoded{}, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	for {
		if err := ctx.Err(); err != nil {
			return ingest.Decoded{}, err
		}
		if err := spoolRoom(store, spoolCheckBytes); err != nil {
			return ingest.Decoded{}, fmt.Errorf("spool: %w", err)
		}
		n, err := io.CopyN(f, r, spoolCheckBytes)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ingest.Decoded{}, fmt.Errorf("spool: %w", err)
		}
		if n < spoolCheckBytes {
			break
		}
	}
	return ingest.Decode(f, opts, emit)
}

// spoolRoom refuses n more bytes of a spooled object when the store's
// filesystem would be left with less than its minimum free space.
func spoolRoom(store *table.Store, n uint64) error {
	st := store.SpaceStatus()
	if st.MinFree == 0 || st.Total == 0 {
		return nil // the guard is off, or the filesystem does not say
	}
	if st.Free < st.MinFree+n {
		return &table.DiskFullError{Dir: st.Dir, Free: st.Free, Need: st.MinFree + n}
	}
	return nil
}

// isGzipError says whether err is a corrupt gzip stream (the object's
// fault, not the connection's).
func isGzipError(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &corrupt)
}

// stageRows computes rows of a streamed object (msg) and stages what is
// kept, and the computed columns' dead letters, into stage.
func (w *Writer) stageRows(ctx context.Context, stage *table.Stage, msg *Message, rows []ingest.Row, res *Result) error {
	msgs := []Message{*msg}
	if w.target.SourceColumns && msg.Source != "" {
		batch := sourceBatch(msgs)
		for _, r := range rows {
			r[table.SourceBatchColumn] = batch
			r[table.SourceOffsetColumn] = msg.Offset
		}
	}
	res.Rows += len(rows)
	kept := rows
	var dls []compute.DeadLetter
	if w.target.Compute != nil {
		b, err := w.target.Compute.Process(compute.WithRowSource(ctx, messageSource(msgs, make([]int32, len(rows)))), rows)
		if errors.Is(err, compute.ErrRejected) {
			return errObjectPoison{err}
		}
		if err != nil {
			return fmt.Errorf("stream: compute: %w", err)
		}
		kept, dls = b.Rows, b.DeadLetters
		res.Filtered += len(rows) - len(kept) - len(dls)
	}
	if len(kept) > 0 {
		if err := stage.Append(ctx, w.target.Table, kept); err != nil {
			var se *table.SchemaError
			if errors.As(err, &se) {
				return errObjectPoison{err}
			}
			return err
		}
		res.Accepted += len(kept)
	}
	if len(dls) == 0 {
		return nil
	}
	if w.target.DeadLetters == nil {
		for _, dl := range dls {
			w.target.Log.Warn("dead letter dropped (the table has no dead-letter table)", "origin", w.origin(msg), "error", dl.Error)
		}
		return nil
	}
	letters := make([]ingest.DeadLetter, len(dls))
	for i, dl := range dls {
		letters[i] = ingest.DeadLetter{DeadLetter: dl, Origin: w.origin(msg)}
	}
	dead := ingest.DeadLetterRows(letters, w.now())
	for _, r := range dead {
		w.sourceOfDead(r, msgs, 0)
	}
	if err := stage.Append(ctx, w.target.DeadLetters, dead); err != nil {
		return fmt.Errorf("stream: dead letters: %w", err)
	}
	res.DeadLetters += len(dead)
	return nil
}

// storePoison stores the dead letter of a streamed object that does not
// decode (msg.Body its first bytes) with its record, in one synced batch.
func (s *S3) storePoison(ctx context.Context, w *Writer, msg *Message, record Position, why error, rows int) (Result, error) {
	res := Result{Messages: 1, Rows: rows, Poison: 1}
	batch, err := w.target.Store.NewBatch()
	if err != nil {
		return res, err
	}
	defer batch.Close()
	dead := w.sourceOfDead(w.messageDeadLetter(w.now(), msg, why, "poison"), []Message{*msg}, 0)
	if w.target.DeadLetters != nil {
		if err := batch.Append(w.target.DeadLetters, []table.Row{dead}); err != nil {
			return res, fmt.Errorf("stream: dead letters: %w", err)
		}
		res.DeadLetters = 1
	} else {
		w.target.Log.Warn("dead letter dropped (the table has no dead-letter table)", "origin", dead["origin"], "error", dead["error"])
	}
	if err := batch.SetPosition(record.Name, record.Value); err != nil {
		return res, err
	}
	return res, batch.Commit(ctx)
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
