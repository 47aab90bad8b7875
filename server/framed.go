package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"sync"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// Framed bodies carry Schema Registry wire-format messages (magic byte,
// schema id, the body; what Confluent's serializers write) over HTTP and
// in files: each message is a 4-byte big-endian length and that many
// bytes. A length prefix, not a delimiter, because the messages are
// binary and any byte may occur in them; many messages to a body, not
// one, because a request is one synced batch and a message is often a
// hundred bytes (docs/streams.md, "Framed messages over HTTP and in
// files").
const (
	ContentTypeAvroFramed       = "application/vnd.sluice.avro-framed"
	ContentTypeProtobufFramed   = "application/vnd.sluice.protobuf-framed"
	ContentTypeJSONSchemaFramed = "application/vnd.sluice.json-schema-framed"
)

// framedTypes maps the framed content types to their registry format.
var framedTypes = map[string]string{
	ContentTypeAvroFramed:       schemaformat.FormatAvro,
	ContentTypeProtobufFramed:   schemaformat.FormatProtobuf,
	ContentTypeJSONSchemaFramed: schemaformat.FormatJSONSchema,
}

// FramedFormat is the Schema Registry format of a framed content type ("":
// contentType is not one).
func FramedFormat(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return framedTypes[mt]
}

// ErrNoRegistry: a body or dead letter in a Schema Registry format for a
// table that names no registry for it.
var ErrNoRegistry = errors.New("no schema registry")

// registryDecoders are a table's Schema Registry decoders by format, made
// on first use and kept (each caches its schemas by id).
type registryDecoders struct {
	mu       sync.Mutex
	byFormat map[string]*schemaformat.Decoder
}

// registryFor is the registry that serves format's schemas for ts: the
// table's schema_registry, else that of its first source of that format.
func registryFor(ts *tableState, format string) *config.SchemaRegistry {
	if ts.cfg.SchemaRegistry != nil {
		return ts.cfg.SchemaRegistry
	}
	for _, sc := range ts.cfg.Sources {
		switch {
		case sc.Kafka != nil && sc.Kafka.Format == format && sc.Kafka.SchemaRegistry != nil:
			return sc.Kafka.SchemaRegistry
		case sc.NATS != nil && sc.NATS.Format == format && sc.NATS.SchemaRegistry != nil:
			return sc.NATS.SchemaRegistry
		}
	}
	return nil
}

// registryDecoder is ts's decoder of format.
func registryDecoder(ts *tableState, format string) (*schemaformat.Decoder, error) {
	ts.registries.mu.Lock()
	defer ts.registries.mu.Unlock()
	if d := ts.registries.byFormat[format]; d != nil {
		return d, nil
	}
	rc := registryFor(ts, format)
	if rc == nil {
		return nil, fmt.Errorf("%w: table %q: format %s needs the table's schema_registry", ErrNoRegistry, ts.cfg.Name, format)
	}
	reg, err := schemaRegistry(rc)
	if err != nil {
		return nil, err
	}
	d, err := schemaformat.New(format, reg)
	if err != nil {
		return nil, err
	}
	if ts.registries.byFormat == nil {
		ts.registries.byFormat = map[string]*schemaformat.Decoder{}
	}
	ts.registries.byFormat[format] = d
	return d, nil
}

// ingestFramed is Ingest for framed messages in a Schema Registry format:
// each message is one row, its frame's number (from 1) its line. A
// message that does not decode is a bad line: under on_bad_line reject
// the input is refused naming it, under skip it is a dead letter (its
// bytes, Go-quoted, and its format) and the rest is stored. A registry
// that cannot answer fails the input, storing nothing, with an error
// wrapping schemaformat.ErrUnavailable (503: the client retries).
func (s *Server) ingestFramed(ctx context.Context, ts *tableState, r io.Reader, opts IngestOptions) (res ingest.Result, d ingest.Decoded, err error) {
	dec, err := registryDecoder(ts, opts.Registry)
	if err != nil {
		return res, d, fmt.Errorf("%w: %w", ingest.ErrBadInput, err)
	}
	var skipped *badLines
	if ts.pipe.DeadLetters != nil && ts.policy == ingest.Skip {
		skipped = &badLines{format: ingest.NDJSON, registry: opts.Registry, origin: opts.Origin, now: s.now()}
	}
	b := ts.pipe.Begin()
	defer func() { b.Close() }()
	b.Origin = opts.Origin
	if rec := opts.Record; rec != nil && opts.BatchRows == 0 {
		b.Record(rec.Name, func(r ingest.Result) []byte { r.AddBadLines(d); return rec.Value(r) })
	}
	part := opts.BatchRows
	if part <= 0 {
		part = partRows
	}
	// Without computed columns or filters that need maps, and not a
	// delete, each message is decoded straight into a column batch by the
	// decoder compiled for its schema id (schemaformat.Rows), as a Kafka
	// source's are; otherwise into a map per row.
	var byColumn *framedColumns
	if ts.pipe.Columnar() && !opts.Delete {
		byColumn = newFramedColumns(dec)
		defer byColumn.close()
	}
	var rows []ingest.Row
	var lines []int
	pending := 0 // rows added to b and not committed
	flush := func(commit bool) error {
		if byColumn != nil && byColumn.cb.Len > 0 {
			if err := noHiddenColumns(byColumn.cb); err != nil {
				return err
			}
			pending += byColumn.cb.Len
			if err := b.AddColumns(ctx, byColumn.cb, &res); err != nil {
				return err
			}
			byColumn.reset()
		}
		if len(rows) > 0 {
			if err := operations(rows, lines, opts.Delete); err != nil {
				return err
			}
			pending += len(rows)
			if err := b.Add(ctx, rows, lines, &res); err != nil {
				return err
			}
			rows, lines = nil, nil
		}
		if !commit {
			return nil
		}
		if err := skipped.store(ctx, ts.pipe.DeadLetters); err != nil {
			return err
		}
		if pending == 0 && opts.Record == nil {
			return nil
		}
		pending = 0
		if err := b.Commit(ctx, &res); err != nil {
			return err
		}
		b.Close()
		b = ts.pipe.Begin()
		b.Origin = opts.Origin
		return nil
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var msg bytes.Buffer
	var head [4]byte
	for frame := 1; ; frame++ {
		if _, err = io.ReadFull(br, head[:]); err == io.EOF {
			err = nil // the end of the input, between frames
			break
		} else if err != nil {
			err = &ingest.LineError{Line: frame, Err: fmt.Errorf("%w: a frame's 4-byte length cut short", ingest.ErrBadInput)}
			break
		}
		n := int64(binary.BigEndian.Uint32(head[:]))
		if opts.MaxBytes > 0 && n > opts.MaxBytes {
			err = fmt.Errorf("frame %d of %d bytes: %w", frame, n, ErrTooLarge)
			break
		}
		// Read as it arrives: a damaged length on a short input fails at
		// its end, not by allocating what it claims.
		msg.Reset()
		if _, err = io.CopyN(&msg, br, n); err != nil {
			err = &ingest.LineError{Line: frame, Err: fmt.Errorf("%w: frame of %d bytes cut short after %d", ingest.ErrBadInput, n, msg.Len())}
			break
		}
		var row map[string]any
		var derr error
		if byColumn != nil {
			derr = byColumn.rows.Append(ctx, msg.Bytes(), frame)
		} else {
			row, derr = dec.Decode(ctx, msg.Bytes())
		}
		if errors.Is(derr, schemaformat.ErrUnavailable) {
			err = fmt.Errorf("frame %d: %w", frame, derr)
			break
		}
		if derr != nil {
			le := &ingest.LineError{Line: frame, Err: fmt.Errorf("%w: %w", ingest.ErrBadInput, derr), Text: msg.String()}
			if ts.policy != ingest.Skip {
				err = le
				break
			}
			d.BadCount++
			if len(d.BadLines) < ingest.MaxReported {
				d.BadLines = append(d.BadLines, le)
			}
			if skipped != nil {
				skipped.add(le)
			}
			continue
		}
		d.Rows++
		if byColumn == nil {
			rows = append(rows, row)
			lines = append(lines, frame)
		}
		if len(rows) == part || byColumn != nil && byColumn.cb.Len == part {
			if err = flush(opts.BatchRows > 0); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = flush(true)
	}
	if err != nil {
		b.Reject(&res)
	}
	return res, d, err
}

// framedColumns is the column batch framed messages are decoded into,
// from a pool: a body's batch is copied by the table (AddColumns), and its
// cells and columns serve the next.
type framedColumns struct {
	dec  *schemaformat.Decoder
	cb   *colbatch.Batch
	rows *schemaformat.Rows
}

var framedBatches = sync.Pool{New: func() any { return new(colbatch.Batch) }}

func newFramedColumns(dec *schemaformat.Decoder) *framedColumns {
	cb := framedBatches.Get().(*colbatch.Batch)
	return &framedColumns{dec: dec, cb: cb, rows: dec.Rows(cb)}
}

// reset empties the batch for the next rows (a Rows may not outlive its
// batch's Reset).
func (f *framedColumns) reset() {
	f.cb.Reset()
	f.rows = f.dec.Rows(f.cb)
}

func (f *framedColumns) close() {
	f.cb.Reset()
	framedBatches.Put(f.cb)
}

// IngestFramedSource is IngestSource for a file (or URL) of framed
// messages in the Schema Registry format (FormatAvro, ...): `sluice
// ingest --format avro-framed`, every batchRows rows durable on their own.
func (s *Server) IngestFramedSource(ctx context.Context, tableName, src, format string, batchRows int) (ingest.Result, error) {
	rc, err := OpenSource(ctx, src)
	if err != nil {
		return ingest.Result{}, err
	}
	defer rc.Close()
	if batchRows <= 0 {
		batchRows = 10000
	}
	res, err := s.Ingest(ctx, tableName, rc, IngestOptions{Registry: format, BatchRows: batchRows, Origin: "file " + src})
	if err != nil {
		return res, fmt.Errorf("%s: %w", src, err)
	}
	return res, nil
}
