package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// registryDecoder is the decoder of a source's format when it is a Schema
// Registry format (nil otherwise), and the format its writer is made with:
// a registry format's body is none of ingest's formats, the decoder reads
// it, so the writer's own format is only the dead letters' fallback.
func registryDecoder(format string, registry schemaformat.Registry) (messageDecoder, string, error) {
	if !slices.Contains(schemaformat.Formats, format) {
		return nil, format, nil
	}
	dec, err := schemaformat.New(format, registry)
	if err != nil {
		return nil, "", fmt.Errorf("format %s: %w", format, err)
	}
	return dec, FormatNDJSON, nil
}

// colbatchPool reuses the column batches of the registry formats: a batch
// of messages fills one, which the table copies from (AppendColumns), and
// its cells and columns serve the next batch.
var colbatchPool = sync.Pool{New: func() any { return new(colbatch.Batch) }}

// writeRegistryColumns is writeColumns for the Schema Registry formats:
// each message is one row, decoded straight into the columns by the
// decoder compiled for its schema id (schemaformat.Rows).
// A registry that cannot answer fails the batch, storing nothing, as the
// map path does; any other unusual message (one that does not decode, is
// too large, is not gunzippable) or rows the table refuses leave the
// batch to the map path (done false), which names each poison message.
func (w *Writer) writeRegistryColumns(ctx context.Context, msgs []Message, positions []Position) (res Result, done bool, err error) {
	if w.registry.Format() == schemaformat.FormatJSONSchema {
		return w.writeJSONSchemaColumns(ctx, msgs, positions)
	}
	cb := colbatchPool.Get().(*colbatch.Batch)
	defer func() {
		cb.Reset()
		colbatchPool.Put(cb)
	}()
	rows := w.registry.Rows(cb)
	lastLine := make([]int, len(msgs))
	for i := range msgs {
		b, err := body(&msgs[i])
		if err != nil {
			return res, false, nil
		}
		if err := rows.Append(ctx, b, i+1); err != nil {
			if errors.Is(err, schemaformat.ErrUnavailable) {
				return res, true, fmt.Errorf("stream: decoding the message at %s: %w", w.origin(&msgs[i]), err)
			}
			return res, false, nil
		}
		lastLine[i] = i + 1
	}
	batch, err := w.target.Store.NewBatch()
	if err != nil {
		return res, false, nil
	}
	defer batch.Close()
	st, err := w.stageColumns(ctx, batch, msgs, lastLine, cb)
	if err != nil {
		return res, false, nil
	}
	return w.commitColumns(ctx, batch, msgs, positions, st)
}

// writeJSONSchemaColumns is writeRegistryColumns for json_schema: the
// bodies, each one JSON object on one line, are joined and decoded by the
// NDJSON column decoder, as NDJSON messages are, and each row then gets
// its schema's types (schemaformat.JSONTypes). A body on several lines,
// or one that is not a JSON object, leaves the batch to the map path.
func (w *Writer) writeJSONSchemaColumns(ctx context.Context, msgs []Message, positions []Position) (res Result, done bool, err error) {
	bodies := make([]Message, len(msgs))
	types := make([]*schemaformat.JSONTypes, len(msgs))
	jrows := w.registry.JSONRows()
	jrows.TimestampColumns(w.target.Schema)
	for i := range msgs {
		b, err := body(&msgs[i])
		if err != nil {
			return res, false, nil
		}
		jb, jt, err := jrows.Body(ctx, b)
		if errors.Is(err, schemaformat.ErrUnavailable) {
			return res, true, fmt.Errorf("stream: decoding the message at %s: %w", w.origin(&msgs[i]), err)
		}
		if err != nil || len(jb) == 0 || bytes.IndexByte(jb, '\n') >= 0 {
			return res, false, nil
		}
		bodies[i] = Message{Body: jb, unpacked: true}
		types[i] = jt
	}
	buf := joinPool.Get().(*[]byte)
	j, ok := joinInto(*buf, bodies, nil)
	defer putJoined(buf, j.buf)
	if !ok {
		return res, false, nil
	}
	batch, err := w.target.Store.NewBatch()
	if err != nil {
		return res, false, nil
	}
	defer batch.Close()
	var st staged
	_, err = ingest.DecodeColumns(bytes.NewReader(j.buf), ingest.DecodeOptions{Format: ingest.NDJSON, Policy: ingest.Reject, MaxLine: max(j.size, 1)},
		func(cb *colbatch.Batch) error {
			if cb.Len != len(msgs) {
				return errNotOneRowEach
			}
			// Runs of rows of one schema (mostly the whole batch) are
			// converted together.
			for from := 0; from < cb.Len; {
				to := from + 1
				for to < cb.Len && types[to] == types[from] {
					to++
				}
				if _, err := jrows.Convert(cb, from, to, types[from]); err != nil {
					return err
				}
				from = to
			}
			var err error
			st, err = w.stageColumns(ctx, batch, msgs, j.lastLine, cb)
			return err
		})
	if err != nil {
		return res, false, nil
	}
	return w.commitColumns(ctx, batch, msgs, positions, st)
}

// errNotOneRowEach: the JSON bodies did not make one row each.
var errNotOneRowEach = errors.New("stream: a JSON body is not one object")
