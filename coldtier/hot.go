package coldtier

import (
	"context"
	"errors"

	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/table"
)

// errLimit ends the hot side's filtered scan at the query's limit.
var errLimit = errors.New("limit reached")

// hotValues is the hot side of a two-tier query. When the cold side was
// read (cold), it leaves out what that side returned:
//
//   - the blocks below the table's committed-sequence mark, which a
//     continuous run committed and the hot store keeps for its retention;
//   - the rows whose source offset another store claimed in tbl (the
//     table the cold side read): a message two nodes stored, which the
//     other node committed while this node's copy waits for its next run
//     (which will skip it).
//
// Without the cold side every row is in the hot store and all are
// returned. view, when not nil, is the view of the store to read (a keyed
// table's query reads the keys it leaves out of the cold side through it).
func (c *Compactor) hotValues(ctx context.Context, q table.Query, cols []table.Column, cold bool, tbl *itable.Table, view *table.View, emit func([]table.Column, []any) error) error {
	if !cold {
		return c.t.QueryValues(ctx, q, emit)
	}
	query := c.t.QueryValuesSeqs
	if view != nil {
		query = view.QueryValuesSeqs
	}
	mark, err := c.t.CommittedSeq()
	if err != nil {
		return err
	}
	var filter *hotFilter
	if tbl != nil && hasSourceColumns(c.t.Schema()) {
		claims, err := readClaims(tbl.Properties())
		if err != nil {
			return err
		}
		filter = newHotFilter(claims, c.writer)
	}
	if filter == nil {
		return query(ctx, q, mark, 0, emit)
	}
	// Read the source columns after the projected ones, filter, and count
	// the limit after the filter.
	hq := q
	hq.Limit = 0
	hq.Columns = make([]string, 0, len(cols)+2)
	for _, col := range cols {
		hq.Columns = append(hq.Columns, col.Name)
	}
	filter.batch, filter.offset = len(cols), len(cols)+1
	hq.Columns = append(hq.Columns, table.SourceBatchColumn, table.SourceOffsetColumn)
	emitted := 0
	err = query(ctx, hq, mark, 0, func(_ []table.Column, vals []any) error {
		if !filter.keep(vals) {
			return nil
		}
		if err := emit(cols, vals[:len(cols)]); err != nil {
			return err
		}
		if emitted++; q.Limit > 0 && emitted >= q.Limit {
			return errLimit
		}
		return nil
	})
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}
