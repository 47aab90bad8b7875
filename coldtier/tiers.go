package coldtier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go/catalog"

	"github.com/sluicedb/sluice/coldtier/coldread"
	"github.com/sluicedb/sluice/table"
)

// QueryValues answers q over both tiers: first the rows of the Iceberg
// table (when cold is true, i.e. compaction removes rows from the store),
// then the store's. The cold rows come from coldread.Query: pruned by
// iceberg-go on the day partitions and the files' column statistics (the
// time range, the hashBy values), only the columns the query needs, and
// the same time range, hash values and predicates applied row by row with
// the store's semantics. Each row is in exactly one tier: a run's commit
// and its removal from the store happen under a lock this query shares,
// and a crashed run's removal is finished by Open before any query. emit
// gets the columns of t.Columns(q) and the row's values in that order;
// vals is reused.
func (c *Compactor) QueryValues(ctx context.Context, q table.Query, cold bool, emit func(cols []table.Column, vals []any) error) error {
	cols, err := c.t.Columns(q)
	if err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cold {
		emitted, err := c.coldValues(ctx, q, cols, emit)
		if err != nil {
			return err
		}
		if q.Limit > 0 {
			if emitted >= q.Limit {
				return nil
			}
			q.Limit -= emitted
		}
	}
	return c.t.QueryValues(ctx, q, emit)
}

// coldValues emits the Iceberg table's rows matching q; none before the
// first run created the table.
func (c *Compactor) coldValues(ctx context.Context, q table.Query, cols []table.Column, emit func([]table.Column, []any) error) (int, error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("coldtier: load %s: %w", strings.Join(c.ident, "."), err)
	}
	n, _, err := coldread.Query(ctx, tbl, c.t, q, cols, emit)
	return n, err
}

// DataFiles lists the data files of the Iceberg table's current snapshot
// (the manifests' file list), for readers without Iceberg support.
func (c *Compactor) DataFiles(ctx context.Context) ([]string, error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return nil, fmt.Errorf("coldtier: load %s: %w", strings.Join(c.ident, "."), err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("coldtier: plan %s: %w", strings.Join(c.ident, "."), err)
	}
	files := make([]string, len(tasks))
	for i, t := range tasks {
		files[i] = t.File.FilePath()
	}
	return files, nil
}
