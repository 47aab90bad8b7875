package coldtier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/table"
)

// QueryValues answers q over both tiers: first the rows of the Iceberg
// table (when cold is true, i.e. compaction removes rows from the store),
// then the store's. The cold scan is pruned by iceberg-go on the day
// partitions and the files' column statistics (the time range, the hashBy
// values), reads only the columns the query needs, and applies the same
// time range, hash values and predicates, with sluice's conversions, row
// by row. Each row is in exactly one tier: a run's commit and its removal
// from the store happen under a lock this query shares, and a crashed
// run's removal is finished by Open before any query. emit gets the
// columns of t.Columns(q) and the row's values in that order; vals is
// reused.
func (c *Compactor) QueryValues(ctx context.Context, q table.Query, cold bool, emit func(cols []table.Column, vals []any) error) error {
	cols, err := c.t.Columns(q)
	if err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	emitted := 0
	var tbl *itable.Table
	if cold {
		if tbl, err = c.loadForQuery(ctx); err != nil {
			return err
		}
		if emitted, _, err = c.coldScanTable(ctx, tbl, q, cols, emit); err != nil {
			return err
		}
		if q.Limit > 0 {
			if emitted >= q.Limit {
				return nil
			}
			q.Limit -= emitted
		}
	}
	return c.hotValues(ctx, q, cols, cold, tbl, emit) // hot.go
}

// errLimit ends a cold scan at the query's limit.
var errLimit = errors.New("limit reached")

// coldScanStats say what a cold scan read; the row-group figures show the
// pruning at work (tests check them).
type coldScanStats struct {
	Files, ArrowFiles        int // data files planned; those read through iceberg-go's Arrow path
	RowGroups, RowGroupsRead int // row groups in the files read here; those not pruned by statistics
}

func (c *Compactor) coldValues(ctx context.Context, q table.Query, cols []table.Column, emit func([]table.Column, []any) error) (int, error) {
	n, _, err := c.coldScan(ctx, q, cols, emit)
	return n, err
}

// coldScan plans the scan with iceberg-go (partition and file-statistics
// pruning with the matcher's filter), then reads each planned data file
// with parquet-go (parquetread.go), row groups decoded in parallel and
// emitted in the plan's order. A file with delete files (written by
// another engine: sluice never writes them), in another format than
// Parquet, or without Parquet field ids is read through iceberg-go's Arrow
// path instead, which applies deletes and name mapping.
func (c *Compactor) coldScan(ctx context.Context, q table.Query, cols []table.Column, emit func([]table.Column, []any) error) (int, coldScanStats, error) {
	tbl, err := c.loadForQuery(ctx)
	if err != nil {
		return 0, coldScanStats{}, err
	}
	return c.coldScanTable(ctx, tbl, q, cols, emit)
}

// loadForQuery loads the Iceberg table (nil when there is none yet).
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

// coldScanTable is coldScan on the loaded table tbl (nil: no rows).
func (c *Compactor) coldScanTable(ctx context.Context, tbl *itable.Table, q table.Query, cols []table.Column, emit func([]table.Column, []any) error) (int, coldScanStats, error) {
	var st coldScanStats
	name := strings.Join(c.ident, ".")
	if tbl == nil || tbl.CurrentSnapshot() == nil {
		return 0, st, nil
	}
	types := map[string]table.Type{}
	for _, col := range c.t.Schema() {
		types[col.Name] = col.Type
	}
	m, err := newMatcher(q, c.t.SortBy(), c.t.HashBy(), types)
	if err != nil {
		return 0, st, err
	}
	// The columns to read: output, predicates, time, hash; those the
	// Iceberg schema lacks (added since the last run) read as null.
	need := []string{}
	addNeed := func(n string) {
		if _, ok := tbl.Schema().FindFieldByName(n); ok && !slices.Contains(need, n) {
			need = append(need, n)
		}
	}
	for _, col := range cols {
		addNeed(col.Name)
	}
	for _, n := range m.columns() {
		addNeed(n)
	}
	scan := tbl.Scan(itable.WithRowFilter(m.filter()), itable.WithSelectedFields(need...))
	defer scan.Close()
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return 0, st, fmt.Errorf("coldtier: plan %s: %w", name, err)
	}
	st.Files = len(tasks)
	if len(tasks) == 0 {
		return 0, st, nil
	}
	r := &coldReader{m: m, cols: cols, need: need, types: types, schema: tbl.Schema(), name: name, newFS: tbl.FS}
	n := 0
	arrow := func(task itable.FileScanTask) error {
		k, err := arrowValues(ctx, scan, task, q, m, types, cols, n, emit)
		n += k
		return err
	}
	err = r.run(ctx, tasks, &st, arrow, func(vals []any) error {
		n++
		if err := emit(cols, vals); err != nil {
			return err
		}
		if q.Limit > 0 && n >= q.Limit {
			return errLimit
		}
		return nil
	})
	if errors.Is(err, errLimit) {
		err = nil
	}
	return n, st, err
}

// arrowValues reads one planned task through iceberg-go's Arrow path
// (deletes applied), with the same matcher; emitted counts rows emitted
// before it, for the limit.
func arrowValues(ctx context.Context, scan *itable.Scan, task itable.FileScanTask, q table.Query, m *matcher,
	types map[string]table.Type, cols []table.Column, emitted int, emit func([]table.Column, []any) error) (int, error) {
	_, batches, err := scan.ReadTasks(ctx, []itable.FileScanTask{task})
	if err != nil {
		return 0, fmt.Errorf("coldtier: data file %s: %w", task.File.FilePath(), err)
	}
	vals := make([]any, len(cols))
	n := 0
	for rec, err := range batches {
		if err != nil {
			return n, fmt.Errorf("coldtier: data file %s: %w", task.File.FilePath(), err)
		}
		err = func() error {
			defer rec.Release()
			// Column positions are resolved once per batch; a row is
			// read only through them (no map per row).
			byName := map[string]func(int) any{}
			for i, f := range rec.Schema().Fields() {
				byName[f.Name] = columnReader(rec.Column(i), types[f.Name])
			}
			null := func(int) any { return nil }
			get := func(name string) func(int) any {
				if f, ok := byName[name]; ok {
					return f
				}
				return null
			}
			out := make([]func(int) any, len(cols))
			for i, col := range cols {
				out[i] = get(col.Name)
			}
			timeOf, hashOf := get(m.timeCol), get(m.hashC)
			predOf := make([]func(int) any, len(m.preds))
			for i, p := range m.preds {
				predOf[i] = get(p.col)
			}
			for r := range int(rec.NumRows()) {
				if !m.match(r, timeOf, hashOf, predOf) {
					continue
				}
				for i, read := range out {
					vals[i] = read(r)
				}
				n++
				if err := emit(cols, vals); err != nil {
					return err
				}
				if q.Limit > 0 && emitted+n >= q.Limit {
					return errLimit
				}
			}
			return nil
		}()
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// stringReader is columnReader for Arrow's string arrays, both offset
// widths: text, or JSON text for a JSON column.
func stringReader(a interface {
	arrow.Array
	Value(int) string
}, typ table.Type) func(int) any {
	return func(r int) any {
		if a.IsNull(r) {
			return nil
		}
		if typ == table.JSON {
			return json.RawMessage(a.Value(r))
		}
		return a.Value(r)
	}
}

// columnReader returns the value of row r of an Arrow column as the store
// returns a value of sluice type typ.
func columnReader(a arrow.Array, typ table.Type) func(int) any {
	null := func(r int) bool { return a.IsNull(r) }
	switch x := a.(type) {
	case *array.Int64:
		return func(r int) any {
			if null(r) {
				return nil
			}
			return x.Value(r)
		}
	case *array.Float64:
		return func(r int) any {
			if null(r) {
				return nil
			}
			return x.Value(r)
		}
	case *array.Boolean:
		return func(r int) any {
			if null(r) {
				return nil
			}
			return x.Value(r)
		}
	case *array.Timestamp:
		unit := x.DataType().(*arrow.TimestampType).Unit
		return func(r int) any {
			if null(r) {
				return nil
			}
			return x.Value(r).ToTime(unit).UTC()
		}
	case *array.String:
		return stringReader(x, typ)
	case *array.LargeString:
		return stringReader(x, typ)
	}
	return func(r int) any {
		if null(r) {
			return nil
		}
		return a.ValueStr(r)
	}
}

// matcher applies a query's time range, hash values and predicates to a
// cold row with the store's semantics: values converted to the column's
// type, comparisons with null false, hash values compared by their text.
type matcher struct {
	q              table.Query
	timeCol, hashC string
	types          map[string]table.Type
	hashText       map[string]bool
	preds          []coldPred
}

type coldPred struct {
	col  string
	typ  table.Type
	op   table.Op
	v    any
	vals []any
}

func newMatcher(q table.Query, timeCol, hashCol string, types map[string]table.Type) (*matcher, error) {
	m := &matcher{q: q, timeCol: timeCol, hashC: hashCol, types: types}
	if q.HashIn != nil {
		m.hashText = map[string]bool{}
		for _, h := range q.HashIn {
			v, err := convert(h, types[hashCol])
			if err != nil {
				return nil, fmt.Errorf("coldtier: hash value %v: %w", h, err)
			}
			m.hashText[text(v)] = true
		}
	}
	for _, w := range q.Where {
		typ, ok := types[w.Column]
		if !ok {
			return nil, fmt.Errorf("coldtier: %w: %q", table.ErrUnknownColumn, w.Column)
		}
		p := coldPred{col: w.Column, typ: typ, op: w.Op}
		var err error
		switch w.Op {
		case table.IsNull, table.NotNull:
		case table.In:
			for _, v := range w.Values {
				cv, err := convert(v, typ)
				if err != nil {
					return nil, fmt.Errorf("coldtier: column %q: %w", w.Column, err)
				}
				p.vals = append(p.vals, cv)
			}
		default:
			if p.v, err = convert(w.Value, typ); err != nil {
				return nil, fmt.Errorf("coldtier: column %q: %w", w.Column, err)
			}
		}
		m.preds = append(m.preds, p)
	}
	return m, nil
}

// columns are the columns the matcher reads.
func (m *matcher) columns() []string {
	out := []string{m.timeCol}
	if m.hashText != nil {
		out = append(out, m.hashC)
	}
	for _, p := range m.preds {
		out = append(out, p.col)
	}
	return out
}

// filter is the Iceberg expression iceberg-go prunes partitions, files and
// row groups with: the time range, and the hash values when the hashBy
// column is a string or int64 (other conversions are left to match).
func (m *matcher) filter() iceberg.BooleanExpression {
	var parts []iceberg.BooleanExpression
	ref := iceberg.Reference(m.timeCol)
	if !m.q.From.IsZero() {
		parts = append(parts, iceberg.GreaterThanEqual(ref, iceberg.Timestamp(floorMicro(m.q.From))))
	}
	if !m.q.To.IsZero() {
		parts = append(parts, iceberg.LessThan(ref, iceberg.Timestamp(ceilMicro(m.q.To))))
	}
	if m.hashText != nil && len(m.hashText) > 0 {
		switch m.types[m.hashC] {
		case table.String:
			vals := make([]string, 0, len(m.hashText))
			for h := range m.hashText {
				vals = append(vals, h)
			}
			parts = append(parts, iceberg.IsIn(iceberg.Reference(m.hashC), vals...))
		case table.Int64:
			var vals []int64
			for h := range m.hashText {
				if i, err := strconv.ParseInt(h, 10, 64); err == nil {
					vals = append(vals, i)
				}
			}
			parts = append(parts, iceberg.IsIn(iceberg.Reference(m.hashC), vals...))
		}
	}
	switch len(parts) {
	case 0:
		return iceberg.AlwaysTrue{}
	case 1:
		return parts[0]
	}
	return iceberg.NewAnd(parts[0], parts[1], parts[2:]...)
}

// floorMicro and ceilMicro widen a bound to whole microseconds (the cold
// tier's unit); match applies the exact bound.
func floorMicro(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Before(time.UnixMicro(us)) {
		us--
	}
	return us
}

func ceilMicro(t time.Time) int64 {
	us := t.UnixMicro()
	if time.UnixMicro(us).Before(t) {
		us++
	}
	return us
}

// match reports whether row r, read through the column readers, matches.
func (m *matcher) match(r int, timeOf, hashOf func(int) any, predOf []func(int) any) bool {
	ts, ok := timeOf(r).(time.Time)
	if !ok {
		return false
	}
	if !m.q.From.IsZero() && ts.Before(m.q.From) || !m.q.To.IsZero() && !ts.Before(m.q.To) {
		return false
	}
	if m.hashText != nil {
		h := hashOf(r)
		if h == nil || !m.hashText[text(h)] {
			return false
		}
	}
	for i := range m.preds {
		if !m.preds[i].test(predOf[i](r)) {
			return false
		}
	}
	return true
}

// test applies p to one value of its column (nil: null).
func (p *coldPred) test(v any) bool {
	switch p.op {
	case table.IsNull:
		return v == nil
	case table.NotNull:
		return v != nil
	}
	if v == nil {
		return false
	}
	if p.op == table.In {
		return slices.ContainsFunc(p.vals, func(x any) bool { return compare(v, x) == 0 })
	}
	if p.typ == table.String && p.op != table.Eq && p.op != table.Ne {
		// A string column (an int64 one widened, files written before):
		// ordered as the hot tier orders it, numbers as numbers.
		c, ok := table.CompareText(text(v), text(p.v))
		return ok && opHolds(p.op, c)
	}
	return opHolds(p.op, compare(v, p.v))
}

// convert converts a query value to a column type as the store does
// (strings parse as the type; numbers widen).
func convert(v any, typ table.Type) (any, error) {
	switch typ {
	case table.Int64:
		switch x := v.(type) {
		case int64:
			return x, nil
		case int:
			return int64(x), nil
		case float64:
			if x == math.Trunc(x) {
				return int64(x), nil
			}
		case json.Number:
			return x.Int64()
		case string:
			return strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		}
	case table.Float64:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		case int:
			return float64(x), nil
		case json.Number:
			return x.Float64()
		case string:
			return strconv.ParseFloat(strings.TrimSpace(x), 64)
		}
	case table.Bool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			return strconv.ParseBool(strings.TrimSpace(x))
		}
	case table.Timestamp:
		ns, err := table.ParseTime(v)
		if err != nil {
			return nil, err
		}
		return time.Unix(0, ns).UTC(), nil
	case table.String, table.JSON:
		return text(v), nil
	}
	return nil, fmt.Errorf("cannot convert %v (%T) to %v", v, v, typ)
}

// text is a value's text, as a column widened to string holds it.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.RawMessage:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// compare orders two values of one column type.
func compare(a, b any) int {
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return cmpOrdered(x, y)
		}
	case float64:
		if y, ok := b.(float64); ok {
			return cmpOrdered(x, y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y)
		}
	}
	return strings.Compare(text(a), text(b))
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
