package schemaformat

import (
	"context"
	"fmt"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// rowAppender is a body decoder that writes a row's cells into a column
// batch itself, without a map per row.
type rowAppender interface {
	appendRow(body []byte, cb *colbatch.Batch, row int) error
}

// AppendRow decodes one message into a new row of cb (its input line
// line), a cell per top-level field: the row Decode returns, held by
// column. Its errors are Decode's; on error cb is as it was (apart from
// columns it may have gained, with no cell in any row).
func (d *Decoder) AppendRow(ctx context.Context, msg []byte, cb *colbatch.Batch, line int) error {
	id, body, err := splitFrame(msg)
	if err != nil {
		return err
	}
	bd, err := d.schema(ctx, id)
	if err != nil {
		return err
	}
	row := cb.AddRow(line)
	if ra, ok := bd.(rowAppender); ok {
		err = ra.appendRow(body, cb, row)
	} else {
		var m map[string]any
		if m, err = bd.decode(body); err == nil {
			for k, v := range m {
				cb.Set(cb.ColumnOf(k), row, v)
			}
		}
	}
	if err != nil {
		cb.DropLastRow()
		return fmt.Errorf("%w: schema id %d: %w", ErrBody, id, err)
	}
	return nil
}
