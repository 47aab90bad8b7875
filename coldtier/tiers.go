package coldtier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/catalog"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier/coldread"
	"github.com/sluicedb/sluice/internal/coldapi"
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
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.QueryValuesHeld(ctx, q, cold, false, emit)
}

// Hold holds the compactor's lock shared until release is called: no run
// commits or takes its local step (they take the lock exclusively) in
// between, so queries made under it with QueryValuesHeld see the Iceberg
// table and the hot store at one cut. A cluster query holds it on every
// node before any of them reads (docs/cluster.md). Waiting for the lock
// ends with ctx; release may be called more than once.
func (c *Compactor) Hold(ctx context.Context) (release func(), err error) {
	acquired := make(chan struct{})
	go func() {
		c.mu.RLock()
		close(acquired)
	}()
	select {
	case <-acquired:
	case <-ctx.Done():
		// The lock may still come: give it back then.
		go func() {
			<-acquired
			c.mu.RUnlock()
		}()
		return nil, fmt.Errorf("coldtier: table %s: hold: %w", c.t.Name(), context.Cause(ctx))
	}
	var once sync.Once
	return func() { once.Do(c.mu.RUnlock) }, nil
}

// QueryValuesHeld is QueryValues for a caller that holds the lock already
// (Hold): a second RLock could wait behind a waiting commit, which waits
// for the first. hotOnly leaves out the Iceberg table's rows and returns
// the hot store's rows that it lacks (with cold: the same leaving-out as
// hotValues does after the cold side, from the current table's claims).
func (c *Compactor) QueryValuesHeld(ctx context.Context, q table.Query, cold, hotOnly bool, emit func(cols []table.Column, vals []any) error) error {
	var tbl *itable.Table
	var err error
	if cold {
		if tbl, err = c.loadForQuery(ctx); err != nil {
			return err
		}
	}
	// A column of the Iceberg table that the store lacks (another node's
	// store had it) is read from the cold side and null on the hot side.
	absent, err := c.t.WithAbsent(q, func(name string) (table.Type, bool) {
		if tbl == nil {
			return 0, false
		}
		f, ok := tbl.Schema().FindFieldByName(name)
		if !ok {
			return 0, false
		}
		return coldread.TypeOf(f.Type)
	})
	if err != nil {
		return err
	}
	var cols []table.Column
	if absent != nil {
		cols = absent.Out
	} else if cols, err = c.t.Columns(q); err != nil {
		return err
	}
	// A keyed table's store and Iceberg table may both hold a key: the
	// store's change (an upsert or a delete) since the committed mark is
	// the key's state, and the Iceberg row is left out, unless that row is
	// a later change of the key's source partition (storeChange.hides):
	// then the store's row of the key is left out (shadowed). The keys
	// changed and the store's rows are read through one view of the store,
	// so a change appended while the query runs is in both or in neither.
	var view *table.View
	var hidden map[string]storeChange
	shadowed := map[string]struct{}{}
	if cold && c.keyed && tbl != nil && !hotOnly {
		if view, err = c.t.NewView(); err != nil {
			return err
		}
		defer view.Close()
		mark, err := c.t.CommittedSeq()
		if err != nil {
			return err
		}
		if hidden, err = c.hiddenKeys(ctx, view, mark, columnTypes(c.t.Schema())); err != nil {
			return err
		}
		if filtered(q) {
			if err := c.shadowUnread(ctx, tbl, hidden, shadowed); err != nil {
				return err
			}
		}
	}
	if cold {
		emitted := 0
		switch {
		case tbl == nil || hotOnly:
		case len(hidden) > 0:
			if emitted, err = c.coldValuesHiding(ctx, tbl, q, cols, hidden, shadowed, emit); err != nil {
				return err
			}
		default:
			if emitted, _, err = coldread.Query(ctx, tbl, c.t, q, cols, emit); err != nil {
				return err
			}
		}
		// The hot side reads the committed-sequence mark next: a commit
		// landing here would move it past rows the snapshot just read
		// lacks. None can: the caller holds c.mu shared, and a run commits
		// and moves the mark under it exclusively.
		afterColdRead()
		if q.Limit > 0 {
			if emitted >= q.Limit {
				return nil
			}
			q.Limit -= emitted
		}
	}
	// The store's rows follow (a caller filtering them by source offset
	// tells them from the Iceberg rows by this).
	if done := coldapi.ColdDone(ctx); done != nil {
		done()
	}
	if absent == nil {
		return c.hotValues(ctx, q, cols, cold, tbl, view, shadowed, emit) // hot.go
	}
	if absent.None {
		return nil
	}
	hq := absent.Query
	hq.Limit = q.Limit
	inner, err := c.t.Columns(hq)
	if err != nil {
		return err
	}
	var row []any
	return c.hotValues(ctx, hq, inner, cold, tbl, view, shadowed, func(_ []table.Column, vals []any) error {
		row = absent.Row(row, vals)
		return emit(cols, row)
	})
}

// coldValuesHiding is the cold side of a two-tier query of a keyed table:
// coldread.Query less the rows whose key is in hidden and whose store
// change hides them (storeChange.hides); the keys of the rows it returns
// although the store changed them go into shadowed, whose store rows the
// hot side leaves out. The key columns, and the source columns when the
// store has them, are read after the query's columns when it does not name
// them, and the limit counts the rows emitted.
func (c *Compactor) coldValuesHiding(ctx context.Context, tbl *itable.Table, q table.Query, cols []table.Column, hidden map[string]storeChange,
	shadowed map[string]struct{}, emit func([]table.Column, []any) error) (int, error) {
	keyCols := c.t.PrimaryKey()
	schema := c.t.Schema()
	types := columnTypes(schema)
	read := slices.Clone(cols)
	column := func(name string) int {
		i := slices.IndexFunc(read, func(col table.Column) bool { return col.Name == name })
		if i < 0 {
			i = len(read)
			read = append(read, table.Column{Name: name, Type: types[name]})
		}
		return i
	}
	at := make([]int, len(keyCols))
	for i, k := range keyCols {
		at[i] = column(k)
	}
	batchAt, offsetAt := -1, -1
	if hasSourceColumns(schema) {
		batchAt, offsetAt = column(table.SourceBatchColumn), column(table.SourceOffsetColumn)
	}
	cq := q
	cq.Limit = 0
	emitted := 0
	key := make([]any, len(keyCols))
	var buf []byte
	_, _, err := coldread.Query(ctx, tbl, c.t, cq, read, func(_ []table.Column, vals []any) error {
		for i, j := range at {
			key[i] = vals[j]
		}
		var err error
		if buf, err = encodeKeyValues(buf[:0], keyCols, types, key); err != nil {
			return err
		}
		if ch, ok := hidden[string(buf)]; ok {
			var pos sourcePos
			if batchAt >= 0 {
				tag, _ := vals[batchAt].(string)
				off, ok := vals[offsetAt].(int64)
				if i := strings.LastIndexByte(tag, '@'); i > 0 && ok {
					pos = sourcePos{partition: tag[:i], offset: off}
				}
			}
			if ch.hides(pos) {
				return nil // the store changed the key since: its state is there
			}
			if !ch.deleted {
				shadowed[string(buf)] = struct{}{} // the store's row is older
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
		err = nil
	}
	return emitted, err
}

// filtered reports whether q may leave out rows of the Iceberg table other
// than by its limit.
func filtered(q table.Query) bool {
	return !q.From.IsZero() || !q.To.IsZero() || len(q.HashIn) > 0 || len(q.Where) > 0
}

// shadowUnread adds to shadowed the keys of hidden whose store row an
// Iceberg row of the key that a filtered query does not read is a later
// change than: coldValuesHiding weighs only the rows the query reads, and
// the store's older row may match the filter where the later row does not.
// Only a key whose store change is a row at a position that another writer
// claimed offsets of its partition at or past can have one (another node
// committed the same message or a later one), so the Iceberg table is read
// (the key and source columns, unfiltered) only when there is such a key:
// after a rebalance, until this node's next run.
func (c *Compactor) shadowUnread(ctx context.Context, tbl *itable.Table, hidden map[string]storeChange, shadowed map[string]struct{}) error {
	schema := c.t.Schema()
	if !hasSourceColumns(schema) {
		return nil
	}
	cl, err := readClaims(tbl.Properties())
	if err != nil {
		return err
	}
	suspect := map[string]storeChange{}
	for key, ch := range hidden {
		if ch.deleted || ch.pos.partition == "" {
			continue // a delete has no store row; a change without a position hides
		}
		if f := cl.foreign(ch.pos.partition, c.writer); len(f) > 0 && f[len(f)-1].hi > ch.pos.offset {
			suspect[key] = ch
		}
	}
	if len(suspect) == 0 {
		return nil
	}
	keyCols := c.t.PrimaryKey()
	types := columnTypes(schema)
	read := make([]table.Column, 0, len(keyCols)+2)
	for _, k := range keyCols {
		read = append(read, table.Column{Name: k, Type: types[k]})
	}
	n := len(keyCols)
	read = append(read, table.Column{Name: table.SourceBatchColumn, Type: types[table.SourceBatchColumn]},
		table.Column{Name: table.SourceOffsetColumn, Type: types[table.SourceOffsetColumn]})
	var buf []byte
	_, _, err = coldread.Query(ctx, tbl, c.t, table.Query{}, read, func(_ []table.Column, vals []any) error {
		var err error
		if buf, err = encodeKeyValues(buf[:0], keyCols, types, vals[:n]); err != nil {
			return err
		}
		ch, ok := suspect[string(buf)]
		if !ok {
			return nil
		}
		tag, _ := vals[n].(string)
		off, ok := vals[n+1].(int64)
		if i := strings.LastIndexByte(tag, '@'); i > 0 && ok && !ch.hides(sourcePos{partition: tag[:i], offset: off}) {
			shadowed[string(buf)] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("coldtier: table %s: later changes in the Iceberg table: %w", c.t.Name(), err)
	}
	return nil
}

// columnTypes is the sluice type of each column of cols by name.
func columnTypes(cols []table.Column) map[string]table.Type {
	types := make(map[string]table.Type, len(cols))
	for _, c := range cols {
		types[c.Name] = c.Type
	}
	return types
}

// afterColdRead runs in a two-tier query between its cold side and its hot
// side (tests start a commit there).
var afterColdRead = func() {}

// loadForQuery loads the Iceberg table (nil when there is none yet): the
// cold side of a query reads its current snapshot and the hot side its
// claims (hot.go), from the one load.
func (c *Compactor) loadForQuery(ctx context.Context) (*itable.Table, error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("coldtier: load %s: %w", strings.Join(c.ident, "."), err)
	}
	return tbl, nil
}

// TableColumns are the Iceberg table's columns with their sluice types
// (none before its first commit): the columns of other nodes' stores a
// query of this node may name.
func (c *Compactor) TableColumns(ctx context.Context) ([]table.Column, error) {
	tbl, err := c.loadForQuery(ctx)
	if err != nil || tbl == nil {
		return nil, err
	}
	var cols []table.Column
	for _, f := range tbl.Schema().Fields() {
		if typ, ok := coldread.TypeOf(f.Type); ok {
			cols = append(cols, table.Column{Name: f.Name, Type: typ})
		}
	}
	return cols, nil
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
