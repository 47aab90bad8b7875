package coldread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/table"
)

// errLimit ends a cold scan at the query's limit.
var errLimit = errors.New("limit reached")

// Stats say what a cold scan read; the row-group figures show the pruning
// at work (tests check them).
type Stats struct {
	Files, ArrowFiles        int // data files planned; those read through iceberg-go's Arrow path
	RowGroups, RowGroupsRead int // row groups in the files read here; those not pruned by statistics
	// DeleteFiles counts the position delete files read here (applied to
	// the data files of the plan by position, deletes.go); of those,
	// DeleteFilesCached came decoded from an earlier query (cache.go).
	DeleteFiles, DeleteFilesCached int
	// Manifests counts the manifests of the snapshot planned here (plan.go;
	// 0 when iceberg-go planned it); of those, ManifestsCached came
	// decoded from an earlier query.
	Manifests, ManifestsCached int
}

// Query emits the rows of the Iceberg table tbl (its current snapshot)
// that match q, a query of the sluice table t, with the store's semantics,
// and returns how many it emitted. emit gets cols (the
// columns of t.Columns(q)) and the row's values in that order; vals is
// reused.
//
// It plans the scan from the snapshot's manifests, decoded once and kept
// between queries (plan.go: file-statistics pruning on the time range and
// hash values; iceberg-go plans what that does not handle), then reads each planned data file
// with parquet-go (parquetread.go), row groups decoded in parallel and
// emitted in the plan's order, less the rows the position delete files of
// the plan delete (deletes.go). A file with equality deletes or a
// deletion vector (written by another engine), in another format than
// Parquet, or without Parquet field ids is read through iceberg-go's Arrow
// path instead, which applies those deletes and name mapping.
func Query(ctx context.Context, tbl *itable.Table, t *table.Table, q table.Query, cols []table.Column, emit func([]table.Column, []any) error) (int, Stats, error) {
	var st Stats
	name := strings.Join(tbl.Identifier(), ".")
	if tbl.CurrentSnapshot() == nil {
		return 0, st, nil
	}
	types := map[string]table.Type{}
	for _, f := range tbl.Schema().Fields() {
		// A column of the Iceberg table the store lacks (another node's)
		// is read with its Iceberg type.
		if typ, ok := TypeOf(f.Type); ok {
			types[f.Name] = typ
		}
	}
	for _, col := range t.Schema() {
		types[col.Name] = col.Type
	}
	// Path columns (q.Paths) are read as their json columns, and each
	// row's values looked up in their text (table.PathReader).
	if paths, err := table.NewPathReader(q, cols, types); err != nil || paths != nil {
		if err != nil {
			return 0, st, err
		}
		plain := q
		plain.Paths = nil
		var row []any
		return Query(ctx, tbl, t, plain, paths.Read, func(_ []table.Column, vals []any) error {
			row = paths.Row(row, vals)
			return emit(cols, row)
		})
	}
	m, err := newMatcher(q, t.SortBy(), t.HashBy(), types)
	if err != nil || m.empty {
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
	tasks, planned, err := planScan(ctx, tbl, m, &st)
	if err == nil && !planned {
		tasks, err = scan.PlanFiles(ctx)
	}
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
				predOf[i] = get(p.Column)
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
// returns a value of sluice type typ: a column written before it widened
// (an int64 one now float64 or string) reads converted, as the store
// converts its own older blocks (table.Convert).
func columnReader(a arrow.Array, typ table.Type) func(int) any {
	read := arrowValue(a, typ)
	if arrowHolds(a, typ) {
		return read
	}
	return func(r int) any {
		v := read(r)
		if v == nil {
			return nil
		}
		if x, err := table.Convert(v, typ); err == nil {
			return x
		}
		return v
	}
}

// arrowHolds tells whether an Arrow column's values are already those of
// sluice type typ.
func arrowHolds(a arrow.Array, typ table.Type) bool {
	switch a.(type) {
	case *array.Int64:
		return typ == table.Int64
	case *array.Float64:
		return typ == table.Float64
	case *array.Boolean:
		return typ == table.Bool
	case *array.Timestamp:
		return typ == table.Timestamp
	case *array.String, *array.LargeString:
		return typ == table.String || typ == table.JSON
	case *array.Date32:
		return typ == table.Date
	case *array.Time64:
		return typ == table.TimeOfDay
	case *array.Decimal128:
		return typ.IsDecimal()
	case *array.Binary:
		return typ == table.Bytes
	case *extensions.UUIDArray, *array.FixedSizeBinary:
		return typ == table.UUID
	}
	return false
}

// arrowValue reads row r of an Arrow column as the Go value of its own
// type (JSON text as json.RawMessage when typ is JSON).
func arrowValue(a arrow.Array, typ table.Type) func(int) any {
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
	case *array.Date32:
		return func(r int) any {
			if null(r) {
				return nil
			}
			return coltype.DateValue(x.Value(r))
		}
	case *array.Time64:
		div := int64(1)
		if x.DataType().(*arrow.Time64Type).Unit == arrow.Nanosecond {
			div = 1000
		}
		return func(r int) any {
			if null(r) {
				return nil
			}
			return coltype.TimeOfDayValue(int64(x.Value(r)) / div)
		}
	case *array.Decimal128:
		scale := int(x.DataType().(*arrow.Decimal128Type).Scale)
		return func(r int) any {
			if null(r) {
				return nil
			}
			n := x.Value(r)
			return coltype.DecimalOfInt128(n.HighBits(), n.LowBits(), scale)
		}
	case *array.Binary:
		return func(r int) any {
			if null(r) {
				return nil
			}
			return slices.Clone(x.Value(r))
		}
	case *extensions.UUIDArray:
		return func(r int) any {
			if null(r) {
				return nil
			}
			return coltype.UUIDValue(x.Value(r))
		}
	case *array.FixedSizeBinary:
		return func(r int) any {
			if null(r) {
				return nil
			}
			var u coltype.UUIDValue
			if b := x.Value(r); len(b) == len(u) {
				copy(u[:], b)
				return u
			}
			return slices.Clone(x.Value(r))
		}
	}
	return func(r int) any {
		if null(r) {
			return nil
		}
		return a.ValueStr(r)
	}
}

// matcher applies a query's time range, hash values and predicates to a
// cold row with the store's semantics: the hash values and predicates are
// table.Conditions, the evaluator the store's own scans run, on values
// converted to the column's sluice type as the store converts them.
type matcher struct {
	q              table.Query
	timeCol, hashC string
	types          map[string]table.Type
	// hash is hashC IN q.HashIn (nil: the query names no hash values);
	// hashVals are those values converted to the column's type, for
	// pruning.
	hash     *table.Condition
	hashVals []any
	preds    []*table.Condition
	// empty: no row can match (the query names hash values of a column
	// no row has had a value in).
	empty bool
}

func newMatcher(q table.Query, timeCol, hashCol string, types map[string]table.Type) (*matcher, error) {
	m := &matcher{q: q, timeCol: timeCol, hashC: hashCol, types: types}
	if len(q.HashIn) > 0 {
		typ, ok := types[hashCol]
		if !ok {
			m.empty = true
			return m, nil
		}
		hash, err := table.Predicate{Column: hashCol, Op: table.In, Values: q.HashIn}.Compile(typ)
		if err != nil {
			return nil, fmt.Errorf("coldtier: hash value: %w", err)
		}
		m.hash = hash
		for _, h := range q.HashIn {
			if h == nil {
				continue // null is in no list
			}
			v, err := table.Convert(h, typ)
			if err != nil {
				return nil, fmt.Errorf("coldtier: hash value %v: %w", h, err)
			}
			m.hashVals = append(m.hashVals, v)
		}
	}
	for _, w := range q.Where {
		typ, ok := types[w.Column]
		if !ok {
			return nil, fmt.Errorf("coldtier: %w: %q", table.ErrUnknownColumn, w.Column)
		}
		p, err := w.Compile(typ)
		if err != nil {
			return nil, fmt.Errorf("coldtier: where %s: %w", w, err)
		}
		m.preds = append(m.preds, p)
	}
	return m, nil
}

// columns are the columns the matcher reads.
func (m *matcher) columns() []string {
	out := []string{m.timeCol}
	if m.hash != nil {
		out = append(out, m.hashC)
	}
	for _, p := range m.preds {
		out = append(out, p.Column)
	}
	return out
}

// filter is the Iceberg expression iceberg-go prunes partitions, files and
// row groups with: the time range, and the hash values when the hashBy
// column is a string or int64 (other types are left to match).
func (m *matcher) filter() iceberg.BooleanExpression {
	var parts []iceberg.BooleanExpression
	ref := iceberg.Reference(m.timeCol)
	if !m.q.From.IsZero() {
		parts = append(parts, iceberg.GreaterThanEqual(ref, iceberg.Timestamp(floorMicro(m.q.From))))
	}
	if !m.q.To.IsZero() {
		parts = append(parts, iceberg.LessThan(ref, iceberg.Timestamp(ceilMicro(m.q.To))))
	}
	if m.hash != nil {
		switch m.types[m.hashC] {
		case table.String:
			vals := []string{}
			for _, h := range m.hashVals {
				vals = append(vals, h.(string))
			}
			parts = append(parts, iceberg.IsIn(iceberg.Reference(m.hashC), vals...))
		case table.Int64:
			vals := []int64{}
			for _, h := range m.hashVals {
				vals = append(vals, h.(int64))
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
	if m.hash != nil && !m.hash.Value(hashOf(r)) {
		return false
	}
	for i, p := range m.preds {
		if !p.Value(predOf[i](r)) {
			return false
		}
	}
	return true
}

// TypeOf is the sluice type of an Iceberg column sluice writes (a string
// column reads as string: sluice's json is written as its text).
func TypeOf(t iceberg.Type) (table.Type, bool) {
	switch t := t.(type) {
	case iceberg.Int64Type, iceberg.Int32Type:
		return table.Int64, true
	case iceberg.Float64Type, iceberg.Float32Type:
		return table.Float64, true
	case iceberg.BooleanType:
		return table.Bool, true
	case iceberg.StringType:
		return table.String, true
	case iceberg.TimestampTzType, iceberg.TimestampType:
		return table.Timestamp, true
	case iceberg.DateType:
		return table.Date, true
	case iceberg.TimeType:
		return table.TimeOfDay, true
	case iceberg.UUIDType:
		return table.UUID, true
	case iceberg.BinaryType:
		return table.Bytes, true
	case iceberg.DecimalType:
		if coltype.CheckDecimal(t.Precision(), t.Scale()) == nil {
			return coltype.Decimal(t.Precision(), t.Scale()), true
		}
	}
	return 0, false
}
