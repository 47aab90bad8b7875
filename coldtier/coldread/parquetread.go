package coldread

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/table"
)

// The cold read path reads the data files iceberg-go planned with
// parquet-go, column by column into typed vectors, instead of through
// iceberg-go's Parquet-to-Arrow reader: that reader was 44 % of a cold
// query's profile, and reading Arrow values through per-row closures boxed
// every value into `any`. Here a row group is pruned by its column
// statistics before anything is decoded; the time range, the hash values
// and the predicates run on the typed values; only the rows emitted are
// boxed.

// vecKind is how a decoded column holds its values.
type vecKind uint8

const (
	vecInt    vecKind = iota + 1 // ints
	vecTime                      // ints, in unit
	vecFloat                     // floats
	vecBool                      // bools
	vecString                    // strs
)

// colVec is one column of one row group, decoded. A column the file lacks
// (added to the schema after the file was written) is absent: all null.
type colVec struct {
	name   string
	kind   vecKind
	json   bool          // a sluice JSON column: strings come out as json.RawMessage
	typ    table.Type    // the sluice column's type: how ints and strs box (a date's days, a uuid's bytes)
	unit   time.Duration // vecTime: the file's unit (ms, µs or ns)
	absent bool
	valid  []bool // valid[r]: row r is not null
	ints   []int64
	floats []float64
	bools  []bool
	strs   []string
}

func (v *colVec) null(r int) bool { return v.absent || !v.valid[r] }

// timeAt is a vecTime value as the store returns a timestamp.
func (v *colVec) timeAt(r int) time.Time {
	switch v.unit {
	case time.Millisecond:
		return time.UnixMilli(v.ints[r]).UTC()
	case time.Nanosecond:
		return time.Unix(0, v.ints[r]).UTC()
	}
	return time.UnixMicro(v.ints[r]).UTC()
}

// box is row r's value as the file holds it (nil for null), for the
// conversions and the tests the typed paths do not cover
// (table.Condition.Value); emitted rows are boxed through slabs (box.go).
func (v *colVec) box(r int) any {
	if v.null(r) {
		return nil
	}
	switch v.kind {
	case vecInt:
		if x, ok := nativeInt(v.typ, v.ints[r]); ok {
			return x
		}
		return v.ints[r]
	case vecTime:
		return v.timeAt(r)
	case vecFloat:
		return v.floats[r]
	case vecBool:
		return v.bools[r]
	}
	if v.json {
		return json.RawMessage(v.strs[r])
	}
	if x, ok := nativeText(v.typ, v.strs[r]); ok {
		return x
	}
	return v.strs[r]
}

// nativeInt is a file's integer as a value of sluice type typ when typ is
// one held as an integer other than int64: a date's days, a time of day's
// microseconds, a decimal's unscaled value (Iceberg never changes a
// decimal's scale, so the file's is the column's).
func nativeInt(typ table.Type, i int64) (any, bool) {
	switch {
	case typ == table.Date:
		return coltype.DateValue(i), true
	case typ == table.TimeOfDay:
		return coltype.TimeOfDayValue(i), true
	case typ.IsDecimal():
		return coltype.DecimalValue{Unscaled: i, Scale: typ.Scale()}, true
	}
	return nil, false
}

// nativeText is a file's bytes as a value of sluice type typ when typ is
// bytes, uuid or a decimal held as bytes (its unscaled value's big-endian
// two's complement, at the column's scale: Iceberg never changes it).
func nativeText(typ table.Type, s string) (any, bool) {
	if typ.IsDecimal() {
		d, ok := coltype.DecimalOfBigEndian([]byte(s), typ.Scale())
		return d, ok
	}
	switch typ {
	case table.Bytes:
		return []byte(s), true
	case table.UUID:
		var u coltype.UUIDValue
		if len(s) != len(u) {
			return nil, false
		}
		copy(u[:], s)
		return u, true
	}
	return nil, false
}

// intHeld reports whether a sluice type is held in a file as the integers
// table.Condition.Int takes: int64, date, time of day, a decimal of up to
// 18 digits. A wider decimal's condition compares the store's 16 bytes:
// the integers of a file written before its column widened are boxed.
func intHeld(typ table.Type) bool {
	return typ == table.Int64 || typ == table.Date || typ == table.TimeOfDay || (typ.IsDecimal() && !typ.IsWideDecimal())
}

// fileColumn is where a query column is in one data file.
type fileColumn struct {
	name   string
	index  int // leaf index in the file's row groups; -1: absent
	kind   vecKind
	unit   time.Duration
	maxDef int
	json   bool
	typ    table.Type
}

// errNoFieldIDs marks a data file without Parquet field ids (written by an
// engine that relies on Iceberg's name mapping): it is read through
// iceberg-go's Arrow path, which applies the mapping.
var errNoFieldIDs = errors.New("data file has no Parquet field ids")

// errArrowPath marks a data file with a column the fast read does not
// decode (a decimal as fixed_len_byte_array, as Spark writes them): it is
// read through iceberg-go's Arrow path too.
var errArrowPath = errors.New("read through the Arrow path")

// mapColumns finds each needed column of the Iceberg schema in a data file
// by its field id (the Parquet field_id), so a file written before a column
// was added reads it as null and a renamed column still reads. types are
// the sluice types (JSON-ness); schema is the table's current one.
func mapColumns(f *parquet.File, schema *iceberg.Schema, need []string, types map[string]table.Type) ([]fileColumn, error) {
	byID := map[int]*parquet.Column{}
	for _, c := range f.Root().Columns() {
		if c.ID() != 0 {
			byID[c.ID()] = c
		}
	}
	if len(byID) == 0 && len(f.Root().Columns()) > 0 {
		return nil, errNoFieldIDs
	}
	out := make([]fileColumn, len(need))
	for i, name := range need {
		fc := fileColumn{name: name, index: -1, json: types[name] == table.JSON, typ: types[name]}
		out[i] = fc
		field, ok := schema.FindFieldByName(name)
		if !ok {
			continue
		}
		c, ok := byID[field.ID]
		if !ok {
			// Written before the column existed, or before it took the
			// name from a column of another type (RetiredDoc): the file
			// holds the retired column's values.
			if c, ok = retired(schema, name, byID); !ok {
				continue
			}
		}
		if !c.Leaf() || c.MaxRepetitionLevel() > 0 {
			return nil, fmt.Errorf("column %q (field id %d) is not a flat primitive column", name, field.ID)
		}
		fc.index, fc.maxDef = c.Index(), c.MaxDefinitionLevel()
		typ := c.Type()
		switch typ.Kind() {
		case parquet.Int64, parquet.Int32:
			fc.kind = vecInt
			if unit, ok := timestampUnit(typ); ok {
				fc.kind, fc.unit = vecTime, unit
			}
		case parquet.Double, parquet.Float:
			fc.kind = vecFloat
		case parquet.Boolean:
			fc.kind = vecBool
		case parquet.ByteArray:
			fc.kind = vecString
		case parquet.FixedLenByteArray:
			// A uuid's 16 bytes, or a decimal's unscaled value in
			// big-endian two's complement (a decimal of over 18 digits as
			// iceberg-go writes it, or another engine's decimal).
			if !(typ.Length() == 16 && fc.typ == table.UUID) && !(fc.typ.IsDecimal() && typ.Length() <= 16) {
				return nil, fmt.Errorf("column %q: Parquet fixed_len_byte_array(%d) for a %v column: %w", name, typ.Length(), fc.typ, errArrowPath)
			}
			fc.kind = vecString
		default:
			return nil, fmt.Errorf("column %q: Parquet type %v is not one sluice writes", name, typ.Kind())
		}
		out[i] = fc
	}
	return out, nil
}

// RetiredDoc is the Iceberg doc of a column that gave its name name to a
// column of another type (coldtier's schema evolution: Iceberg cannot turn
// a long column into a double or string one). Its field id stays that of
// the files written before, so a data file holds either it or the column
// that took the name.
func RetiredDoc(name string) string {
	return "sluice: the values of column " + strconv.Quote(name) + " before its type changed"
}

// retired finds, among a data file's columns (by field id), one of the
// columns retired from name.
func retired(schema *iceberg.Schema, name string, byID map[int]*parquet.Column) (*parquet.Column, bool) {
	doc := RetiredDoc(name)
	for _, f := range schema.Fields() {
		if f.Doc != doc {
			continue
		}
		if c, ok := byID[f.ID]; ok {
			return c, true
		}
	}
	return nil, false
}

// timestampUnit is the unit of a Parquet timestamp column.
func timestampUnit(typ parquet.Type) (time.Duration, bool) {
	if lt := typ.LogicalType(); lt != nil {
		if ts, ok := lt.Value.(*format.TimestampType); ok {
			switch ts.Unit.Value.(type) {
			case *format.MilliSeconds:
				return time.Millisecond, true
			case *format.NanoSeconds:
				return time.Nanosecond, true
			}
			return time.Microsecond, true
		}
	}
	if ct := typ.ConvertedType(); ct != nil {
		switch *ct {
		case deprecated.TimestampMillis:
			return time.Millisecond, true
		case deprecated.TimestampMicros:
			return time.Microsecond, true
		}
	}
	return 0, false
}

// decodeChunk decodes the column chunk of fc in a row group of rows rows
// into v, page by page, reusing v's buffers.
func decodeChunk(chunk parquet.ColumnChunk, r io.ReaderAt, fc fileColumn, rows int, v *colVec) (err error) {
	*v = colVec{name: fc.name, kind: fc.kind, unit: fc.unit, json: fc.json, typ: fc.typ,
		valid: v.valid[:0], ints: v.ints[:0], floats: v.floats[:0], bools: v.bools[:0], strs: v.strs[:0]}
	if fc.index < 0 {
		v.absent = true
		return nil
	}
	v.valid = slices.Grow(v.valid, rows)[:rows]
	switch fc.kind {
	case vecInt, vecTime:
		v.ints = slices.Grow(v.ints, rows)[:rows]
	case vecFloat:
		v.floats = slices.Grow(v.floats, rows)[:rows]
	case vecBool:
		v.bools = slices.Grow(v.bools, rows)[:rows]
	case vecString:
		clear(v.strs[:cap(v.strs)]) // drop the previous row group's strings
		v.strs = slices.Grow(v.strs, rows)[:rows]
	}
	fcc, ok := chunk.(*parquet.FileColumnChunk)
	if !ok {
		return fmt.Errorf("column chunk %T is not a file's", chunk)
	}
	pages := fcc.PagesFrom(r)
	defer pages.Close()
	var (
		dict     parquet.Dictionary
		dictStrs []string
	)
	at := 0
	for pageNo := 0; at < rows; pageNo++ {
		page, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("page %d (row %d): %w", pageNo, at, err)
		}
		if d := page.Dictionary(); d != nil && d != dict {
			dict, dictStrs = d, nil
			if fc.kind == vecString {
				dictStrs = byteArrayStrings(d.Page().Data())
			}
		}
		n, err := decodePage(page, fc, v, at, rows, dictStrs)
		parquet.Release(page)
		if err != nil {
			return fmt.Errorf("page %d (row %d): %w", pageNo, at, err)
		}
		at += n
	}
	if at != rows {
		return fmt.Errorf("%d values for a row group of %d rows", at, rows)
	}
	return nil
}

// errBadIndex is a dictionary index out of range (a corrupt page).
var errBadIndex = errors.New("dictionary index out of range")

// decodePage copies one page's values into v from row at.
func decodePage(page parquet.Page, fc fileColumn, v *colVec, at, rows int, dictStrs []string) (int, error) {
	n := int(page.NumRows())
	if at+n > rows {
		return 0, fmt.Errorf("page of %d rows past the row group's %d", n, rows)
	}
	defs := page.DefinitionLevels()
	valid := v.valid[at : at+n]
	present := n
	if fc.maxDef > 0 && len(defs) > 0 {
		if len(defs) != n {
			return 0, fmt.Errorf("%d definition levels for %d rows", len(defs), n)
		}
		present = 0
		for i, d := range defs {
			valid[i] = int(d) == fc.maxDef
			if valid[i] {
				present++
			}
		}
	} else {
		for i := range valid {
			valid[i] = true
		}
	}
	data := page.Data()
	dict := page.Dictionary()
	var idx []int32
	if dict != nil {
		if data.Kind() != encoding.Int32 {
			return 0, fmt.Errorf("dictionary indexes of kind %v", data.Kind())
		}
		idx = data.Int32()
		if len(idx) < present {
			return 0, fmt.Errorf("%d dictionary indexes for %d values", len(idx), present)
		}
	}
	j := 0 // index of the next non-null value in the page's data
	switch fc.kind {
	case vecInt, vecTime:
		out := v.ints[at : at+n]
		var src []int64
		var src32 []int32
		if dict != nil {
			dd := dict.Page().Data()
			if dd.Kind() == encoding.Int32 {
				src32 = dd.Int32()
			} else {
				src = dd.Int64()
			}
		} else if data.Kind() == encoding.Int32 {
			src32 = data.Int32()
		} else {
			src = data.Int64()
		}
		if err := fillNumbers(out, valid, idx, src, src32); err != nil {
			return 0, err
		}
	case vecFloat:
		out := v.floats[at : at+n]
		var src []float64
		var src32 []float32
		if dict != nil {
			dd := dict.Page().Data()
			if dd.Kind() == encoding.Float {
				src32 = dd.Float()
			} else {
				src = dd.Double()
			}
		} else if data.Kind() == encoding.Float {
			src32 = data.Float()
		} else {
			src = data.Double()
		}
		if err := fillNumbers(out, valid, idx, src, src32); err != nil {
			return 0, err
		}
	case vecBool:
		out := v.bools[at : at+n]
		if dict != nil {
			return 0, errors.New("dictionary-encoded booleans")
		}
		bits := data.Boolean()
		if len(bits)*8 < present {
			return 0, fmt.Errorf("%d bytes of booleans for %d values", len(bits), present)
		}
		for i := range out {
			if !valid[i] {
				out[i] = false
				continue
			}
			out[i] = bits[j>>3]>>(j&7)&1 != 0
			j++
		}
	case vecString:
		out := v.strs[at : at+n]
		var plain []string
		if dict == nil {
			plain = byteArrayStrings(data)
			if len(plain) < present {
				return 0, fmt.Errorf("%d strings for %d values", len(plain), present)
			}
		}
		for i := range out {
			if !valid[i] {
				out[i] = ""
				continue
			}
			if dict != nil {
				k := int(idx[j])
				if uint(k) >= uint(len(dictStrs)) {
					return 0, errBadIndex
				}
				out[i] = dictStrs[k]
			} else {
				out[i] = plain[j]
			}
			j++
		}
	}
	return n, nil
}

// fillNumbers writes a page's numbers into out: a valid row takes the next
// value (through its dictionary index when idx is set) from wide, or from
// narrow when the column is stored narrower (INT32, FLOAT); a null row
// takes 0. An index past the values is errBadIndex.
func fillNumbers[T int64 | float64, N int32 | float32](out []T, valid []bool, idx []int32, wide []T, narrow []N) error {
	j := 0 // index of the next non-null value in the page's data
	for i := range out {
		if !valid[i] {
			out[i] = 0
			continue
		}
		k := j
		if idx != nil {
			k = int(idx[j])
		}
		j++
		if narrow != nil {
			if uint(k) >= uint(len(narrow)) {
				return errBadIndex
			}
			out[i] = T(narrow[k])
		} else {
			if uint(k) >= uint(len(wide)) {
				return errBadIndex
			}
			out[i] = wide[k]
		}
	}
	return nil
}

// byteArrayStrings makes the strings of a BYTE_ARRAY page (or dictionary)
// with one allocation for their bytes: each string is a slice of one copy,
// which lives as long as a value emitted from it.
func byteArrayStrings(vals encoding.Values) []string {
	if vals.Kind() == encoding.FixedLenByteArray {
		// A uuid column's 16 bytes a value.
		data, size := vals.FixedLenByteArray()
		if size <= 0 {
			return nil
		}
		all := string(data)
		out := make([]string, len(all)/size)
		for i := range out {
			out[i] = all[i*size : (i+1)*size]
		}
		return out
	}
	if vals.Kind() != encoding.ByteArray {
		return nil
	}
	data, offsets := vals.ByteArray()
	if len(offsets) < 2 {
		return nil
	}
	all := string(data)
	out := make([]string, len(offsets)-1)
	for i := range out {
		lo, hi := offsets[i], offsets[i+1]
		if hi < lo || int(hi) > len(all) {
			return out[:i] // corrupt offsets: the caller sees too few values
		}
		out[i] = all[lo:hi]
	}
	return out
}

// unitCeil is the first instant of unit at or after t, in unit since the
// epoch: an integer timestamp x is >= t iff x >= unitCeil(t).
func unitCeil(t time.Time, unit time.Duration) int64 {
	switch unit {
	case time.Millisecond:
		ms := t.UnixMilli()
		if time.UnixMilli(ms).Before(t) {
			ms++
		}
		return ms
	case time.Nanosecond:
		return t.UnixNano()
	}
	return ceilMicro(t)
}

// timeTest is the matcher's time range on a decoded time column: an
// integer timestamp in the file's unit against the range's bounds rounded
// up to that unit (x >= from iff x >= ceil(from)). A null or non-timestamp
// time matches nothing, as in matcher.match.
func (m *matcher) timeTest(v *colVec) func(int) bool {
	if v.kind != vecTime || v.absent {
		return func(int) bool { return false }
	}
	lo, hi, hasHi := m.timeBounds(v.unit)
	ts, valid := v.ints, v.valid
	return func(r int) bool {
		x := ts[r]
		return valid[r] && x >= lo && (!hasHi || x < hi)
	}
}

// timeBounds are the query's range in unit: rows with lo <= x (< hi).
func (m *matcher) timeBounds(unit time.Duration) (lo, hi int64, hasHi bool) {
	lo = math.MinInt64
	if !m.q.From.IsZero() {
		lo = unitCeil(m.q.From, unit)
	}
	if !m.q.To.IsZero() {
		hi, hasHi = unitCeil(m.q.To, unit), true
	}
	return lo, hi, hasHi
}

// restTests are the hash and predicate tests on decoded columns (already
// converted to their sluice types, colVec.convert); with timeTest, a row
// passes them all iff matcher.match accepts it.
func (m *matcher) restTests(hashV *colVec, predV []*colVec) []func(int) bool {
	var tests []func(int) bool
	if m.hash != nil {
		tests = append(tests, test(m.hash, hashV))
	}
	for i, p := range m.preds {
		tests = append(tests, test(p, predV[i]))
	}
	return tests
}

// test returns condition c on the rows of column vector v: the typed
// entry of table.Condition for v's kind, or its Value on boxed values when
// the file holds another type than the column's (which convert leaves
// only for types a column cannot widen to).
func test(c *table.Condition, v *colVec) func(int) bool {
	null := c.Null()
	if v.absent {
		return func(int) bool { return null }
	}
	valid := v.valid
	switch {
	case v.kind == vecInt && intHeld(c.Type) && c.Type == v.typ:
		ints := v.ints
		return func(r int) bool { return valid[r] && c.Int(ints[r]) || !valid[r] && null }
	case v.kind == vecFloat && c.Type == table.Float64:
		floats := v.floats
		return func(r int) bool { return valid[r] && c.Float(floats[r]) || !valid[r] && null }
	case v.kind == vecString && (c.Type == table.String || c.Type == table.JSON || c.Type == table.Bytes || c.Type == table.UUID) && c.Type == v.typ:
		strs := v.strs
		return func(r int) bool { return valid[r] && c.Text(strs[r]) || !valid[r] && null }
	case v.kind == vecBool && c.Type == table.Bool:
		bools := v.bools
		return func(r int) bool { return valid[r] && c.Bool(bools[r]) || !valid[r] && null }
	case v.kind == vecTime && c.Type == table.Timestamp:
		// The store's timestamps are unix nanoseconds: a value in the
		// file's unit converts exactly unless it lies beyond them, which
		// Condition.Time orders.
		ns := int64(v.unit)
		limit := math.MaxInt64 / ns
		ints := v.ints
		return func(r int) bool {
			if !valid[r] {
				return null
			}
			if x := ints[r]; -limit <= x && x <= limit {
				return c.Int(x * ns)
			}
			return c.Time(v.timeAt(r))
		}
	}
	return func(r int) bool { return c.Value(v.box(r)) }
}

// convert makes v hold values of sluice type to, as the store converts a
// block written before its column widened (table.Convert): an int64
// column read as float64, a scalar one as its text. Iceberg's schema
// evolution follows neither widening (coldtier retires the column: the
// files written before hold it under another name, RetiredDoc), and those
// files read as the store's rows.
func (v *colVec) convert(to table.Type) {
	if v.absent {
		return
	}
	rows := len(v.valid)
	switch {
	case to == table.Float64 && v.kind == vecInt:
		v.floats = slices.Grow(v.floats[:0], rows)[:rows]
		for r, x := range v.ints[:rows] {
			v.floats[r] = float64(x)
		}
		v.kind = vecFloat
	case to == table.String && v.kind != vecString:
		strs := make([]string, rows)
		for r := range rows {
			if x, err := table.Convert(v.box(r), table.String); err == nil && x != nil {
				strs[r] = x.(string)
			}
		}
		v.strs, v.kind = strs, vecString
	}
}

// coldReader reads planned data files with parquet-go for one query.
type coldReader struct {
	m      *matcher
	cols   []table.Column // the output columns, in emit's order
	need   []string       // the columns read (output, time, hash, predicates) the Iceberg schema has
	types  map[string]table.Type
	schema *iceberg.Schema
	name   string                                      // the Iceberg table's, for errors
	newFS  func(context.Context) (icebergio.IO, error) // the table's file IO (Table.FS)
	fs     icebergio.IO                                // made by run, bound to its context
	// deleted is the positions the plan's position delete files delete,
	// by data file, sorted (read by run before the files).
	deleted map[string][]int64
}

// rgUnit is one row group to decode, or one task for the Arrow path.
type rgUnit struct {
	task  *itable.FileScanTask
	arrow bool // read the task through iceberg-go's Arrow path
	err   error
	file  string
	rg    int
	first int64   // the position in the file of the row group's first row
	dead  []int64 // the file's deleted positions, sorted
	group parquet.RowGroup
	meta  *format.RowGroup
	data  io.ReaderAt // the row group's needed column chunks, read in one request
	cols  []fileColumn
	out   chan rowChunk
}

// rowChunk is up to chunkRows matched rows of a row group: the values of
// each output column in a slab, boxed by the consumer as it emits.
type rowChunk struct {
	slabs []slab
	n     int
	err   error
}

const chunkRows = 4096

// workers decode row groups in parallel; at most 2*workers units wait
// ahead of the one being emitted, which bounds memory.
func coldWorkers() int { return min(max(runtime.GOMAXPROCS(0), 1), 4) }

// run reads the tasks: a dispatcher opens the files (footer, row-group
// pruning, one read of each kept row group's column chunks), workers
// decode and match row groups, and the caller's goroutine emits each row
// group's rows in order. arrow reads a task through iceberg-go instead.
func (cr *coldReader) run(ctx context.Context, tasks []itable.FileScanTask, st *Stats,
	arrow func(itable.FileScanTask) error, emit func([]any) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The file IO's requests follow ctx: when the query ends early (a
	// limit, an error), the GETs of the files opened ahead are aborted
	// instead of awaited.
	fs, err := cr.newFS(ctx)
	if err != nil {
		return fmt.Errorf("coldtier: file IO of %s: %w", cr.name, err)
	}
	cr.fs = fs
	if cr.deleted, err = readDeletes(ctx, fs, tasks, st); err != nil {
		return fmt.Errorf("coldtier: %s: %w", cr.name, err)
	}
	w := coldWorkers()
	units := make(chan *rgUnit, 2*w)
	work := make(chan *rgUnit, 2*w)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		for range units { // let the dispatcher finish
		}
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(units)
		defer close(work)
		cr.dispatch(ctx, tasks, st, units, work)
	}()
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var vecs []colVec
			for u := range work {
				cr.decode(ctx, u, &vecs)
			}
		}()
	}
	vals := make([]any, len(cr.cols))
	for u := range units {
		if u.err != nil {
			return u.err
		}
		if u.arrow {
			if err := arrow(*u.task); err != nil {
				return err
			}
			continue
		}
		for ch := range u.out {
			if ch.err != nil {
				return ch.err
			}
			for k := range ch.n {
				for i := range ch.slabs {
					vals[i] = ch.slabs[i].at(k)
				}
				if err := emit(vals); err != nil {
					return err
				}
			}
		}
	}
	return ctx.Err()
}

// send hands u to the consumer (and to a worker); false when cancelled.
func send(ctx context.Context, ch chan<- *rgUnit, u *rgUnit) bool {
	select {
	case ch <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

// forceArrow sends every file through iceberg-go's Arrow path: tests
// compare the two paths' rows.
var forceArrow bool

// openedFile is a data file with its footer read: a small file wholly in
// memory (the GET that opens it reads it all), a large one still open for
// ranged reads of the row groups kept.
type openedFile struct {
	path   string
	pf     *parquet.File
	cols   []fileColumn
	data   io.ReaderAt
	memory bool
	close  func() error
	err    error
}

// wholeFileMax is the size up to which a data file is read in one request
// (with filesAhead of them at most in memory: 64 MiB); larger files are
// read by ranges: the footer, then each kept row group's column chunks.
// (A variable so tests can read small files by ranges too.)
var wholeFileMax int64 = 8 << 20

// filesAhead is how many files are opened ahead of the one dispatched:
// against versitygw on the loaded 2-core machine, 8 gave 3.9-7.3M rows/s
// wall at 3M rows where 4 gave 3.1-6.7M, run for run.
const filesAhead = 8

func (cr *coldReader) dispatch(ctx context.Context, tasks []itable.FileScanTask, st *Stats, units, work chan<- *rgUnit) {
	// Files open up to filesAhead ahead of the one being dispatched: on
	// an object store, a file's first bytes are a round trip away, and
	// the workers would otherwise wait for each in turn.
	opened := make([]chan *openedFile, len(tasks))
	sem := make(chan struct{}, filesAhead)
	var fetches sync.WaitGroup
	defer func() {
		fetches.Wait()
		for _, ch := range opened { // release files opened but not dispatched
			if ch == nil {
				continue
			}
			select {
			case of := <-ch:
				if of.close != nil {
					of.close()
				}
			default:
			}
		}
	}()
	direct := func(task *itable.FileScanTask) bool {
		return !forceArrow && len(task.EqualityDeleteFiles) == 0 && len(task.DeletionVectorFiles) == 0 &&
			task.File.FileFormat() == iceberg.ParquetFile
	}
	next := 0 // the next task to start opening
	startOpens := func(upto int) {
		for ; next < len(tasks) && next <= upto; next++ {
			task := &tasks[next]
			if !direct(task) {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			ch := make(chan *openedFile, 1)
			opened[next] = ch
			fetches.Add(1)
			go func() {
				defer fetches.Done()
				ch <- cr.open(task)
			}()
		}
	}
	for i := range tasks {
		task := &tasks[i]
		startOpens(i + filesAhead - 1)
		if ctx.Err() != nil {
			return
		}
		if !direct(task) {
			st.ArrowFiles++
			if !send(ctx, units, &rgUnit{task: task, arrow: true}) {
				return
			}
			continue
		}
		of := <-opened[i]
		opened[i] = nil
		<-sem
		ok, err := cr.dispatchFile(ctx, of, st, units, work)
		if of.close != nil {
			of.close()
		}
		if errors.Is(err, errNoFieldIDs) || errors.Is(err, errArrowPath) {
			st.ArrowFiles++
			ok = send(ctx, units, &rgUnit{task: task, arrow: true})
		} else if err != nil {
			send(ctx, units, &rgUnit{err: fmt.Errorf("coldtier: data file %s: %w", of.path, err)})
			return
		}
		if !ok {
			return
		}
	}
}

// open opens a data file and reads its footer (a small file wholly).
func (cr *coldReader) open(task *itable.FileScanTask) (of *openedFile) {
	of = &openedFile{path: task.File.FilePath()}
	f, err := cr.fs.Open(of.path)
	if err != nil {
		of.err = err
		return of
	}
	of.data, of.close = f, f.Close
	defer func() {
		if p := recover(); p != nil {
			of.err = fmt.Errorf("corrupt file: %v", p)
		}
		if of.err != nil && of.close != nil {
			of.close()
			of.close = nil
		}
	}()
	size := task.File.FileSizeBytes()
	if size <= wholeFileMax {
		buf := make([]byte, size)
		if _, err := io.ReadFull(f, buf); err != nil {
			of.err = fmt.Errorf("read %d bytes (the size the manifest gives): %w", size, err)
			return of
		}
		f.Close()
		of.data, of.memory, of.close = bytes.NewReader(buf), true, nil
	}
	of.pf, of.err = parquet.OpenFile(of.data, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true),
		parquet.OptimisticRead(true), parquet.ReadBufferSize(64<<10))
	if of.err != nil {
		return of
	}
	of.cols, of.err = mapColumns(of.pf, cr.schema, cr.need, cr.types)
	return of
}

// rowGroupsAhead is how many kept row groups of a large file (read by
// ranges) are fetched at once: a one-file table (a day the maintenance
// rewrote into one 30 MB file) was read one GET after another, 1.6-1.9×
// the wall time of the same rows in four files opened in parallel at the
// same CPU.
const rowGroupsAhead = 4

// fetched is a row group's column chunks read by range.
type fetched struct {
	data io.ReaderAt
	err  error
}

// dispatchFile queues the row groups of an opened data file that the
// statistics do not rule out; those of a file read by ranges are fetched
// rowGroupsAhead at a time.
func (cr *coldReader) dispatchFile(ctx context.Context, of *openedFile, st *Stats, units, work chan<- *rgUnit) (ok bool, err error) {
	if of.err != nil {
		return false, of.err
	}
	defer func() {
		if p := recover(); p != nil {
			ok, err = false, fmt.Errorf("corrupt file: %v", p)
		}
	}()
	var kept []int
	firsts := make([]int64, 0, len(of.pf.RowGroups()))
	var rowsBefore int64
	for rg, group := range of.pf.RowGroups() {
		firsts = append(firsts, rowsBefore)
		rowsBefore += group.NumRows()
		st.RowGroups++
		if cr.prune(group, of.cols) {
			continue
		}
		st.RowGroupsRead++
		kept = append(kept, rg)
	}
	dead := cr.deleted[of.path]
	var fetches sync.WaitGroup
	defer fetches.Wait() // the file closes after its fetches
	results := make([]chan fetched, len(kept))
	started := 0
	fetchUpTo := func(upto int) {
		for ; started < len(kept) && started <= upto; started++ {
			ch := make(chan fetched, 1)
			results[started] = ch
			meta := &of.pf.Metadata().RowGroups[kept[started]]
			fetches.Add(1)
			go func() {
				defer fetches.Done()
				data, err := readChunks(of.data, meta, of.cols)
				ch <- fetched{data, err}
			}()
		}
	}
	groups := of.pf.RowGroups()
	for i, rg := range kept {
		meta := &of.pf.Metadata().RowGroups[rg]
		data := of.data
		if !of.memory {
			fetchUpTo(i + rowGroupsAhead - 1)
			var f fetched
			select {
			case f = <-results[i]:
			case <-ctx.Done():
				return false, nil
			}
			if f.err != nil {
				return false, fmt.Errorf("row group %d: %w", rg, f.err)
			}
			data = f.data
		}
		u := &rgUnit{file: of.path, rg: rg, first: firsts[rg], dead: dead, group: groups[rg], meta: meta, data: data, cols: of.cols, out: make(chan rowChunk, 2)}
		if !send(ctx, units, u) || !send(ctx, work, u) {
			return false, nil
		}
	}
	return true, nil
}

// chunkReader serves the byte range [off, off+len(buf)) of a file from
// memory: a row group's column chunks, fetched with one request.
type chunkReader struct {
	off int64
	buf []byte
}

func (r *chunkReader) ReadAt(p []byte, off int64) (int, error) {
	if off < r.off || off > r.off+int64(len(r.buf)) {
		return 0, fmt.Errorf("read at offset %d outside the fetched range [%d, %d)", off, r.off, r.off+int64(len(r.buf)))
	}
	n := copy(p, r.buf[off-r.off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readChunks fetches the byte span of a row group's needed column chunks.
func readChunks(f io.ReaderAt, group *format.RowGroup, cols []fileColumn) (io.ReaderAt, error) {
	lo, hi := int64(math.MaxInt64), int64(0)
	chunks := group.Columns
	for _, fc := range cols {
		if fc.index < 0 {
			continue
		}
		if fc.index >= len(chunks) {
			return nil, fmt.Errorf("column %q: leaf %d of %d", fc.name, fc.index, len(chunks))
		}
		meta := &chunks[fc.index].MetaData
		start := meta.DataPageOffset
		if meta.DictionaryPageOffset > 0 && meta.DictionaryPageOffset < start {
			start = meta.DictionaryPageOffset
		}
		if start < 0 || meta.TotalCompressedSize < 0 {
			return nil, fmt.Errorf("column %q: chunk at offset %d, %d bytes", fc.name, start, meta.TotalCompressedSize)
		}
		lo, hi = min(lo, start), max(hi, start+meta.TotalCompressedSize)
	}
	if hi <= lo {
		return &chunkReader{}, nil
	}
	if hi-lo > 1<<31 {
		return nil, fmt.Errorf("column chunks span %d bytes", hi-lo)
	}
	buf := make([]byte, hi-lo)
	if n, err := f.ReadAt(buf, lo); n < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %d bytes at offset %d: %w", len(buf), lo, err)
	}
	return &chunkReader{off: lo, buf: buf}, nil
}

// prune tells whether a row group's statistics rule out every row: its
// time range misses the query's, or (when the query names hash values) no
// hash value lies within the hash column's bounds. A row group without
// statistics is read.
func (cr *coldReader) prune(group parquet.RowGroup, cols []fileColumn) bool {
	m := cr.m
	chunks := group.ColumnChunks()
	find := func(name string) *fileColumn {
		for i := range cols {
			if cols[i].name == name {
				return &cols[i]
			}
		}
		return nil
	}
	tc := find(m.timeCol)
	if tc == nil || tc.index < 0 || tc.kind != vecTime {
		return true // no time in the file: no row is in any range
	}
	if lo, hi, ok := chunkBounds(chunks[tc.index]); ok {
		from, to, hasTo := m.timeBounds(tc.unit)
		if intValue(hi) < from || hasTo && intValue(lo) >= to {
			return true
		}
	}
	if m.hash == nil {
		return false
	}
	hc := find(m.hashC)
	if hc == nil || hc.index < 0 {
		return true // null hash values match nothing
	}
	lo, hi, ok := chunkBounds(chunks[hc.index])
	if !ok {
		return false
	}
	// The hash values as the file holds them: text for a string column,
	// numbers for an int64 one (the text of a string hashBy column that
	// was int64 when the file was written, when it is one).
	switch hc.kind {
	case vecString:
		minS, maxS := string(lo.ByteArray()), string(hi.ByteArray())
		for _, h := range m.hashVals {
			s, ok := textOf(h)
			if !ok || minS <= s && s <= maxS {
				return false
			}
		}
		return true
	case vecInt:
		minI, maxI := intValue(lo), intValue(hi)
		for _, h := range m.hashVals {
			i, ok := h.(int64)
			if !ok {
				s, isText := textOf(h)
				if !isText {
					return false
				}
				var err error
				if i, err = strconv.ParseInt(s, 10, 64); err != nil || strconv.FormatInt(i, 10) != s {
					continue // no int64's text: matches no row of this file
				}
			}
			if minI <= i && i <= maxI {
				return false
			}
		}
		return true
	}
	return false
}

// textOf is the text of a string or JSON value.
func textOf(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.RawMessage:
		return string(x), true
	}
	return "", false
}

// chunkBounds are a column chunk's min and max from its statistics.
func chunkBounds(c parquet.ColumnChunk) (lo, hi parquet.Value, ok bool) {
	if fc, isFile := c.(*parquet.FileColumnChunk); isFile {
		return fc.Bounds()
	}
	return lo, hi, false
}

func intValue(v parquet.Value) int64 {
	if v.Kind() == parquet.Int32 {
		return int64(v.Int32())
	}
	return v.Int64()
}

// absentVec is a column no data file has: all null.
var absentVec = &colVec{absent: true}

// decode decodes, matches and boxes one row group, handing its rows to the
// consumer in chunks; an error (or a panic of the Parquet decoder on a
// corrupt file) ends the unit with an error naming the file and row group.
func (cr *coldReader) decode(ctx context.Context, u *rgUnit, vecs *[]colVec) {
	defer close(u.out)
	if ctx.Err() != nil {
		return // the query ended: no one reads this unit
	}
	if err := cr.decodeUnit(ctx, u, vecs); err != nil && ctx.Err() == nil {
		err = fmt.Errorf("coldtier: data file %s: row group %d: %w", u.file, u.rg, err)
		select {
		case u.out <- rowChunk{err: err}:
		case <-ctx.Done():
		}
	}
}

func (cr *coldReader) decodeUnit(ctx context.Context, u *rgUnit, vecs *[]colVec) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt data: %v", p)
		}
	}()
	if len(*vecs) < len(cr.need) {
		*vecs = make([]colVec, len(cr.need))
	}
	vs := *vecs
	rows := int(u.group.NumRows())
	chunks := u.group.ColumnChunks()
	decoded := make([]bool, len(cr.need))
	get := func(name string) (*colVec, error) {
		i := slices.Index(cr.need, name)
		if i < 0 {
			return absentVec, nil
		}
		if !decoded[i] {
			fc := u.cols[i]
			var chunk parquet.ColumnChunk
			if fc.index >= 0 {
				chunk = chunks[fc.index]
			}
			if err := decodeChunk(chunk, u.data, fc, rows, &vs[i]); err != nil {
				meta := &u.meta.Columns[fc.index].MetaData
				start := meta.DataPageOffset
				if meta.DictionaryPageOffset > 0 {
					start = min(start, meta.DictionaryPageOffset)
				}
				return nil, fmt.Errorf("column %q (chunk at byte %d, %d bytes): %w", name, start, meta.TotalCompressedSize, err)
			}
			vs[i].convert(cr.types[name])
			decoded[i] = true
		}
		return &vs[i], nil
	}
	m := cr.m
	// The time range first: a row group the range only grazes decodes
	// nothing else.
	tv, err := get(m.timeCol)
	if err != nil {
		return err
	}
	inRange := m.timeTest(tv)
	sel := make([]int32, 0, rows)
	for r := range rows {
		if inRange(r) {
			sel = append(sel, int32(r))
		}
	}
	sel = dropDeleted(sel, u.dead, u.first)
	if len(sel) == 0 {
		return nil
	}
	hv := absentVec
	if m.hash != nil {
		if hv, err = get(m.hashC); err != nil {
			return err
		}
	}
	pv := make([]*colVec, len(m.preds))
	for i, p := range m.preds {
		if pv[i], err = get(p.Column); err != nil {
			return err
		}
	}
	for _, test := range m.restTests(hv, pv) {
		kept := sel[:0]
		for _, r := range sel {
			if test(int(r)) {
				kept = append(kept, r)
			}
		}
		sel = kept
	}
	if len(sel) == 0 {
		return nil
	}
	width := len(cr.cols)
	out := make([]*colVec, width)
	for i, col := range cr.cols {
		if out[i], err = get(col.Name); err != nil {
			return err
		}
	}
	for start := 0; start < len(sel); start += chunkRows {
		part := sel[start:min(start+chunkRows, len(sel))]
		slabs := make([]slab, width)
		for i, v := range out {
			slabs[i].fill(v, part)
		}
		select {
		case u.out <- rowChunk{slabs: slabs, n: len(part)}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
