package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/colbatch"
)

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
