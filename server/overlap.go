package server

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/internal/coldapi"
	"github.com/sluicedb/sluice/table"
)

// Each message once across stores (docs/cluster.md, "Each message once").
// Two stores can hold the same stream messages: a node killed after
// storing them and before its consumer group learned their offsets, whose
// partition's next owner read them again. A cluster query (and a read
// lease) makes every node that reads its store report the source offsets
// its answer holds, gives each offset to one of them (cluster.Assign), and
// each node answers only with the rows of the offsets it was given, plus
// every row without a source (HTTP ingest). A node also leaves out the
// stream rows it stored after it reported what it holds: another node may
// have reported them, and a row stored after the report is after the
// query's cut either way.

// errLimitReached ends a filtered read at the query's limit.
var errLimitReached = errors.New("limit reached")

// hasSourceColumns reports whether ts's rows may carry their source
// position: only a table with a cold tier stores it.
func hasSourceColumns(ts *tableState) bool {
	if ts.cold == nil {
		return false
	}
	n := 0
	for _, c := range ts.table.Schema() {
		if c.Name == table.SourceBatchColumn || c.Name == table.SourceOffsetColumn {
			n++
		}
	}
	return n == 2
}

// heldOffsets is what the hot side of q holds, as source offset ranges:
// the batch ranges of the rows q's hot side returns (a stored batch is
// one Pebble batch, so a store that holds one of its rows processed every
// message of it). The caller holds ts's cold tier. It reads the batch
// column only; nil when ts's rows carry no source.
func (s *Server) heldOffsets(ctx context.Context, ts *tableState, q table.Query) (cluster.Offsets, error) {
	if !hasSourceColumns(ts) {
		return nil, nil
	}
	q.Columns, q.Limit = []string{table.SourceBatchColumn}, 0
	if _, absent, err := splitAbsent(ctx, ts, q); err != nil {
		return nil, err
	} else if absent != nil {
		if absent.None {
			return cluster.Offsets{}, nil // no row of this store passes q
		}
		q = absent.Query
	}
	held := cluster.Offsets{}
	last := ""
	err := ts.cold.QueryValuesHeld(ctx, q, readsCold(ts), true, func(_ []table.Column, vals []any) error {
		tag, ok := vals[0].(string)
		if !ok || tag == last {
			return nil
		}
		last = tag
		if src, lo, hi, ok := parseBatchTag(tag); ok {
			held.Add(src, lo, hi)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	held.Normalize()
	return held, nil
}

// parseBatchTag reads a table.SourceBatchColumn value,
// "<source>@<first>-<end>".
func parseBatchTag(tag string) (source string, lo, hi int64, ok bool) {
	i := strings.LastIndexByte(tag, '@')
	if i < 0 {
		return "", 0, 0, false
	}
	los, his, ok := strings.Cut(tag[i+1:], "-")
	if !ok {
		return "", 0, 0, false
	}
	lo, err1 := strconv.ParseInt(los, 10, 64)
	hi, err2 := strconv.ParseInt(his, 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return tag[:i], lo, hi, true
}

// keepValues reads q from ts through read with the source columns after
// the projected ones, and emits only the rows of keep's offsets and the
// rows without a source; q's limit counts after this filter. A nil keep
// reads q as it is, as does a table whose rows carry no source (yet: a
// table whose first stream rows arrive after its report gets an empty
// keep, and leaves them out).
func keepValues(ctx context.Context, ts *tableState, q table.Query, keep cluster.Offsets, emit func([]table.Column, []any) error,
	read func(context.Context, table.Query, func([]table.Column, []any) error) error) error {
	if keep == nil || !hasSourceColumns(ts) {
		return read(ctx, q, emit)
	}
	// The share applies to the store's rows only: an Iceberg row (a keyed
	// table's carries its source position too) is the coordinator's to
	// answer, whichever node's share its offset falls in. The tier says
	// when its store's rows begin.
	var hot atomic.Bool
	ctx = coldapi.WithColdDone(ctx, func() { hot.Store(true) })
	cols, err := ts.table.Columns(q)
	if err != nil {
		return err
	}
	fq := q
	fq.Limit = 0
	fq.Columns = make([]string, 0, len(cols)+2)
	for _, c := range cols {
		fq.Columns = append(fq.Columns, c.Name)
	}
	fq.Columns = append(fq.Columns, table.SourceBatchColumn, table.SourceOffsetColumn)
	width := len(cols)
	lastTag, lastSrc, lastOK := "", "", false
	emitted := 0
	err = read(ctx, fq, func(_ []table.Column, vals []any) error {
		// A row from the Iceberg table is kept, as is an HTTP row (no
		// source columns: nil).
		if tag, ok := vals[width].(string); ok && hot.Load() {
			if off, ok := vals[width+1].(int64); ok {
				if tag != lastTag {
					lastTag = tag
					lastSrc, _, _, lastOK = parseBatchTag(tag)
				}
				if lastOK && !keep.Contains(lastSrc, off) {
					return nil
				}
			}
		}
		if err := emit(cols, vals[:width]); err != nil {
			return err
		}
		if emitted++; q.Limit > 0 && emitted >= q.Limit {
			return errLimitReached
		}
		return nil
	})
	if errors.Is(err, errLimitReached) {
		return nil
	}
	return err
}
