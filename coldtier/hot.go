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
//     (which will skip it);
//   - the rows of the keys in shadowed (encoded keys): a keyed table's
//     keys whose Iceberg row the cold side returned as a later change than
//     the store's.
//
// Without the cold side every row is in the hot store and all are
// returned. view, when not nil, is the view of the store to read (a keyed
// table's query reads the keys it leaves out of the cold side through it).
func (c *Compactor) hotValues(ctx context.Context, q table.Query, cols []table.Column, cold bool, tbl *itable.Table, view *table.View,
	shadowed map[string]struct{}, emit func([]table.Column, []any) error) error {
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
	if filter == nil && len(shadowed) == 0 {
		return query(ctx, q, mark, 0, emit)
	}
	// Read the columns the filters need after the projected ones, filter,
	// and count the limit after the filters.
	hq := q
	hq.Limit = 0
	hq.Columns = make([]string, 0, len(cols)+2)
	for _, col := range cols {
		hq.Columns = append(hq.Columns, col.Name)
	}
	if filter != nil {
		filter.batch, filter.offset = len(hq.Columns), len(hq.Columns)+1
		hq.Columns = append(hq.Columns, table.SourceBatchColumn, table.SourceOffsetColumn)
	}
	keyCols := c.t.PrimaryKey()
	types := columnTypes(c.t.Schema())
	keyAt := make([]int, len(keyCols))
	if len(shadowed) > 0 {
		for i, k := range keyCols {
			keyAt[i] = len(hq.Columns)
			hq.Columns = append(hq.Columns, k)
		}
	}
	key := make([]any, len(keyCols))
	var buf []byte
	emitted := 0
	err = query(ctx, hq, mark, 0, func(_ []table.Column, vals []any) error {
		if filter != nil && !filter.keep(vals) {
			return nil
		}
		if len(shadowed) > 0 {
			for i, j := range keyAt {
				key[i] = vals[j]
			}
			var err error
			if buf, err = encodeKeyValues(buf[:0], keyCols, types, key); err != nil {
				return err
			}
			if _, ok := shadowed[string(buf)]; ok {
				return nil // the cold side returned a later change of the key
			}
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
