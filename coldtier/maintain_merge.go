package coldtier

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"
)

// The rewrite's k-way merge (docs/cold-tier.md, "Maintenance"): a day
// partition's small files are each sorted by the table's sort order (the
// hashBy key; a compaction run writes a day's rows key by key, each key's
// rows in time order), so one merge of them by (key, time) writes files
// whose row groups hold tight key ranges, as a file one run wrote does, and
// a key-filtered read prunes all but a key's own row groups.
//
// The inputs are read one page per column at a time (parquet-go's row
// reader over a local copy of each file), not decoded whole: iceberg-go's
// ReadTasks runs ahead and holds every task's batches, 411 MiB for 40
// files of 40k rows. A file that is not sorted by key (written by an
// older rewrite, batch by batch, or by another engine) is read as the
// sorted runs it holds, found by a first pass over its key column. A merge
// reads at most fanIn runs at once (each holds a page per column); more
// runs are merged fanIn at a time into local temporary Parquet
// files first, which the last merge reads like the inputs.

// errNoMerge: the group is not one the merge handles (a table without a
// sort order, equality deletes or deletion vectors, files without field
// ids, a column type sluice does not write); it is rewritten in file order
// instead.
var errNoMerge = errors.New("not mergeable")

// mergeFanIn, when not 0, is how many runs one merge reads at once
// (tests force the merge through its temporary files with a small one);
// otherwise fanIn derives it from mergePageBudget.
var mergeFanIn int

// mergePageBudget bounds the memory of the runs one merge reads at once:
// each holds a decompressed page (up to 128 KiB, the pool's size class for
// the writer's 64 KiB pages), its decoded values and a dictionary per
// column. Measured in TestMaintainMemoryBound (7 columns, 40 files of 40k
// rows, 2026-11-26, load average ~20): 64 runs at once peak at 156 MiB
// anonymous, 32 at 140, 16 at 113; a lower fan-in costs CPU (16 runs: 20 %
// more than 32, for the pass of 26 of the 40 files through a temporary
// file).
const mergePageBudget = 16 << 20

// fanIn is how many runs one merge of a table of ncols columns reads at
// once: mergePageBudget / (ncols × 128 KiB), from 4 to 64.
func fanIn(ncols int) int {
	if mergeFanIn > 0 {
		return mergeFanIn
	}
	return min(max(mergePageBudget/(max(ncols, 1)*128<<10), 4), 64)
}

// Merge settings.
const (
	// mergeReadRows is how many rows a run reads from its file at once.
	mergeReadRows = 128
	// mergeTempRowGroup is the row group size of the temporary files.
	mergeTempRowGroup = 16384
)

// mergeColumn is a column of the table's schema as the merge reads and
// writes it.
type mergeColumn struct {
	name string
	id   int
	kind parquet.Kind // the Parquet physical type of the column
}

// mergeLayout is what a merge of one table's files needs: its columns, the
// sort key and the time column, the Arrow schema of the output and the
// Parquet schema of the temporary files.
type mergeLayout struct {
	cols      []mergeColumn
	key, time int // indexes in cols; time -1: no time column
	nullsLast bool
	arrow     *arrow.Schema
	temp      *parquet.Schema
	tempLeaf  []int // cols[i] is leaf tempLeaf[i] of temp
}

// newMergeLayout reads the layout from tbl's metadata: the first field of
// its sort order (identity, ascending) is the key, the source column of
// its partition spec's first field (day(ts)) the time.
func newMergeLayout(tbl *itable.Table) (*mergeLayout, error) {
	meta := tbl.Metadata()
	if meta.Version() >= 3 {
		return nil, fmt.Errorf("%w: format version %d (row lineage)", errNoMerge, meta.Version())
	}
	schema := tbl.Schema()
	keyID, nullsLast := -1, false
	for _, f := range tbl.SortOrder().Fields() {
		if _, ok := f.Transform.(iceberg.IdentityTransform); !ok || f.Direction != itable.SortASC || len(f.SourceIDs) != 1 {
			return nil, fmt.Errorf("%w: sort order %v", errNoMerge, tbl.SortOrder())
		}
		keyID, nullsLast = f.SourceIDs[0], f.NullOrder == itable.NullsLast
		break
	}
	if keyID < 0 {
		return nil, fmt.Errorf("%w: the table declares no sort order", errNoMerge)
	}
	timeID := -1
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		timeID = f.SourceID()
		break
	}
	l := &mergeLayout{key: -1, time: -1, nullsLast: nullsLast}
	group := parquet.Group{}
	for _, f := range schema.Fields() {
		var kind parquet.Kind
		var typ parquet.Type
		switch f.Type.(type) {
		case iceberg.Int32Type, iceberg.DateType:
			kind, typ = parquet.Int32, parquet.Int32Type
		case iceberg.Int64Type, iceberg.TimestampType, iceberg.TimestampTzType:
			kind, typ = parquet.Int64, parquet.Int64Type
		case iceberg.Float32Type:
			kind, typ = parquet.Float, parquet.FloatType
		case iceberg.Float64Type:
			kind, typ = parquet.Double, parquet.DoubleType
		case iceberg.BooleanType:
			kind, typ = parquet.Boolean, parquet.BooleanType
		case iceberg.StringType:
			kind, typ = parquet.ByteArray, parquet.ByteArrayType
		default:
			return nil, fmt.Errorf("%w: column %q is %v", errNoMerge, f.Name, f.Type)
		}
		if f.ID == keyID {
			l.key = len(l.cols)
		}
		if f.ID == timeID {
			l.time = len(l.cols)
		}
		l.cols = append(l.cols, mergeColumn{name: f.Name, id: f.ID, kind: kind})
		group[f.Name] = parquet.Optional(parquet.FieldID(parquet.Leaf(typ), f.ID))
	}
	if l.key < 0 {
		return nil, fmt.Errorf("%w: the sort key (field %d) is not a primitive column", errNoMerge, keyID)
	}
	var err error
	if l.arrow, err = itable.SchemaToArrowSchema(schema, nil, true, false); err != nil {
		return nil, fmt.Errorf("arrow schema: %w", err)
	}
	l.temp = parquet.NewSchema("rewrite", group)
	for _, c := range l.cols {
		leaf, ok := l.temp.Lookup(c.name)
		if !ok {
			return nil, fmt.Errorf("temporary schema lacks column %q", c.name)
		}
		l.tempLeaf = append(l.tempLeaf, leaf.ColumnIndex)
	}
	return l, nil
}

// compareValues orders two values of a column of kind k, nulls first (or
// last with nullsLast).
func compareValues(k parquet.Kind, a, b parquet.Value, nullsLast bool) int {
	if an, bn := a.IsNull(), b.IsNull(); an || bn {
		switch {
		case an && bn:
			return 0
		case an != nullsLast:
			return -1
		}
		return 1
	}
	switch k {
	case parquet.ByteArray:
		return bytes.Compare(a.ByteArray(), b.ByteArray())
	case parquet.Int64:
		return cmp.Compare(a.Int64(), b.Int64())
	case parquet.Int32:
		return cmp.Compare(a.Int32(), b.Int32())
	case parquet.Double:
		return cmp.Compare(a.Double(), b.Double())
	case parquet.Float:
		return cmp.Compare(a.Float(), b.Float())
	case parquet.Boolean:
		return cmp.Compare(b2i(a.Boolean()), b2i(b.Boolean()))
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mergeInput is one file the merge reads: an input data file (a local
// copy) or a temporary file of an earlier merge.
type mergeInput struct {
	name    string // for errors: the data file's path
	osf     *os.File
	f       *parquet.File
	leaves  []int   // layout column i is leaf leaves[i] of f; -1: absent (null)
	rgStart []int64 // first row of each row group, and the row count last
	// dead is the positions of the rows the table's position deletes
	// delete (sorted): the merge leaves them out.
	dead []int64
}

// openMergeInput opens a local Parquet file and maps the layout's columns
// to its leaves by field id.
func openMergeInput(path, name string, l *mergeLayout) (*mergeInput, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := osf.Stat()
	if err != nil {
		osf.Close()
		return nil, err
	}
	f, err := parquet.OpenFile(osf, fi.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		osf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	in := &mergeInput{name: name, osf: osf, f: f, leaves: make([]int, len(l.cols))}
	byID := map[int]*parquet.Column{}
	for _, c := range f.Root().Columns() {
		if !c.Leaf() || c.MaxRepetitionLevel() > 0 {
			osf.Close()
			return nil, fmt.Errorf("%w: %s: column %q is not a flat primitive column", errNoMerge, name, c.Name())
		}
		if c.ID() != 0 {
			byID[c.ID()] = c
		}
	}
	if len(byID) == 0 && len(f.Root().Columns()) > 0 {
		osf.Close()
		return nil, fmt.Errorf("%w: %s has no Parquet field ids", errNoMerge, name)
	}
	for i, col := range l.cols {
		in.leaves[i] = -1
		c, ok := byID[col.id]
		if !ok {
			continue // written before the column was added: null
		}
		if c.Type().Kind() != col.kind {
			osf.Close()
			return nil, fmt.Errorf("%w: %s: column %q is %v, the table's type is %v", errNoMerge, name, col.name, c.Type().Kind(), col.kind)
		}
		in.leaves[i] = c.Index()
	}
	var n int64
	for _, rg := range f.RowGroups() {
		in.rgStart = append(in.rgStart, n)
		n += rg.NumRows()
	}
	in.rgStart = append(in.rgStart, n)
	return in, nil
}

func (in *mergeInput) rows() int64 { return in.rgStart[len(in.rgStart)-1] }

// sortedRuns reads the key column of in and returns the row ranges
// [start, end) in which the key never decreases: one for a file a
// compaction run or a merge wrote.
func (in *mergeInput) sortedRuns(l *mergeLayout) ([][2]int64, error) {
	total := in.rows()
	leaf := in.leaves[l.key]
	if leaf < 0 || total == 0 {
		return [][2]int64{{0, total}}, nil
	}
	kind := l.cols[l.key].kind
	var runs [][2]int64
	var start, row int64
	var prev parquet.Value
	havePrev := false
	buf := make([]parquet.Value, 1024)
	for _, rg := range in.f.RowGroups() {
		pages := rg.ColumnChunks()[leaf].Pages()
		for {
			page, err := pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				pages.Close()
				return nil, fmt.Errorf("%s: key column, row %d: %w", in.name, row, err)
			}
			vr := page.Values()
			for {
				n, err := vr.ReadValues(buf)
				for _, v := range buf[:n] {
					if havePrev && compareValues(kind, prev, v, l.nullsLast) > 0 {
						runs = append(runs, [2]int64{start, row})
						start = row
					}
					prev, havePrev = v, true
					row++
				}
				if n > 0 {
					prev = prev.Clone() // the page's memory goes with it
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					parquet.Release(page)
					pages.Close()
					return nil, fmt.Errorf("%s: key column, row %d: %w", in.name, row, err)
				}
			}
			parquet.Release(page)
		}
		pages.Close()
	}
	if row != total {
		return nil, fmt.Errorf("%s: key column has %d values for %d rows", in.name, row, total)
	}
	return append(runs, [2]int64{start, total}), nil
}

// mergeStream reads rows [next, end) of an input, mergeReadRows at a time,
// through parquet-go's row reader of one row group at a time.
type mergeStream struct {
	in        *mergeInput
	next, end int64
	rg        int
	rows      parquet.Rows
	buf       []parquet.Row
	pos, n    int
	head      parquet.Row // the current row (valid until the next refill)
	seq       int         // tie-break: the order the streams were made in
}

// advance moves to the stream's next row; false at its end. The rows read
// before reference the reader's pages: beforeRefill is called first when
// it has to read more.
func (s *mergeStream) advance(beforeRefill func() error) (bool, error) {
	s.pos++
	if s.pos < s.n {
		s.head = s.buf[s.pos]
		return true, nil
	}
	if beforeRefill != nil {
		if err := beforeRefill(); err != nil {
			return false, err
		}
	}
	s.pos, s.n, s.head = 0, 0, nil
	for s.next < s.end {
		if s.rows == nil {
			for s.in.rgStart[s.rg+1] <= s.next {
				s.rg++
			}
			s.rows = s.in.f.RowGroups()[s.rg].Rows()
			if off := s.next - s.in.rgStart[s.rg]; off > 0 {
				if err := s.rows.SeekToRow(off); err != nil {
					return false, fmt.Errorf("%s: seek to row %d: %w", s.in.name, s.next, err)
				}
			}
		}
		if s.buf == nil {
			s.buf = make([]parquet.Row, mergeReadRows)
		}
		want := min(int64(len(s.buf)), s.end-s.next, s.in.rgStart[s.rg+1]-s.next)
		n, err := s.rows.ReadRows(s.buf[:want])
		s.next += int64(n)
		if err != nil && err != io.EOF {
			return false, fmt.Errorf("%s: row %d: %w", s.in.name, s.next, err)
		}
		if s.next >= s.in.rgStart[s.rg+1] || err == io.EOF || s.next >= s.end {
			s.rows.Close()
			s.rows = nil
			if n == 0 && s.next < s.in.rgStart[s.rg+1] {
				return false, fmt.Errorf("%s: row group %d ends at row %d of %d", s.in.name, s.rg, s.next, s.in.rgStart[s.rg+1])
			}
		}
		if len(s.in.dead) > 0 {
			n = s.dropDead(s.next-int64(n), n)
		}
		if n > 0 {
			s.n, s.head = n, s.buf[0]
			return true, nil
		}
	}
	s.close()
	return false, nil
}

// dropDead removes from the n rows just read into buf (the first at
// position first) those the input's position deletes delete, and returns
// how many are left. Rows are swapped, not copied: each slot keeps a
// buffer of its own for the next read.
func (s *mergeStream) dropDead(first int64, n int) int {
	dead := s.in.dead
	i, _ := slices.BinarySearch(dead, first)
	if i == len(dead) || dead[i] >= first+int64(n) {
		return n
	}
	kept := 0
	for k := range n {
		pos := first + int64(k)
		for i < len(dead) && dead[i] < pos {
			i++
		}
		if i < len(dead) && dead[i] == pos {
			continue
		}
		s.buf[kept], s.buf[k] = s.buf[k], s.buf[kept]
		kept++
	}
	return kept
}

func (s *mergeStream) close() {
	if s.rows != nil {
		s.rows.Close()
		s.rows = nil
	}
	s.buf = nil
}

// value is layout column i of the stream's current row.
func (s *mergeStream) value(i int) parquet.Value {
	if leaf := s.in.leaves[i]; leaf >= 0 {
		return s.head[leaf]
	}
	return parquet.Value{}
}

// merger merges streams by (key, time) of a layout.
type merger struct {
	l *mergeLayout
	h []*mergeStream // a binary min-heap of the streams with a current row
}

func (m *merger) less(a, b *mergeStream) bool {
	l := m.l
	if c := compareValues(l.cols[l.key].kind, a.value(l.key), b.value(l.key), l.nullsLast); c != 0 {
		return c < 0
	}
	if l.time >= 0 {
		if c := compareValues(l.cols[l.time].kind, a.value(l.time), b.value(l.time), false); c != 0 {
			return c < 0
		}
	}
	return a.seq < b.seq
}

func (m *merger) down(i int) {
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(m.h) && m.less(m.h[l], m.h[least]) {
			least = l
		}
		if r < len(m.h) && m.less(m.h[r], m.h[least]) {
			least = r
		}
		if least == i {
			return
		}
		m.h[i], m.h[least] = m.h[least], m.h[i]
		i = least
	}
}

// run emits every row of streams in (key, time) order; emit must copy
// what it keeps before beforeRefill returns.
func (m *merger) run(ctx context.Context, streams []*mergeStream, emit func(s *mergeStream) error, beforeRefill func() error) error {
	m.h = m.h[:0]
	for _, s := range streams {
		ok, err := s.advance(beforeRefill)
		if err != nil {
			return err
		}
		if ok {
			m.h = append(m.h, s)
		}
	}
	for i := len(m.h)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	for n := 0; len(m.h) > 0; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		s := m.h[0]
		if err := emit(s); err != nil {
			return err
		}
		ok, err := s.advance(beforeRefill)
		if err != nil {
			return err
		}
		if !ok {
			last := len(m.h) - 1
			m.h[0] = m.h[last]
			m.h = m.h[:last]
		}
		m.down(0)
	}
	return nil
}

// mergeWork is one group's merge: its temporary directory, inputs and
// streams.
type mergeWork struct {
	l       *mergeLayout
	dir     string
	inputs  []*mergeInput
	streams []*mergeStream
	temps   int
}

func (w *mergeWork) close() {
	for _, s := range w.streams {
		s.close()
	}
	for _, in := range w.inputs {
		in.osf.Close()
	}
}

// addInput opens a local file and adds its sorted runs as streams
// (sorted: a temporary file this merge wrote, one run).
func (w *mergeWork) addInput(path, name string, sorted bool) error {
	in, err := openMergeInput(path, name, w.l)
	if err != nil {
		return err
	}
	w.inputs = append(w.inputs, in)
	runs := [][2]int64{{0, in.rows()}}
	if !sorted {
		if runs, err = in.sortedRuns(w.l); err != nil {
			return err
		}
	}
	for _, r := range runs {
		if r[1] > r[0] {
			w.streams = append(w.streams, &mergeStream{in: in, next: r[0], end: r[1], pos: -1, seq: len(w.streams)})
		}
	}
	return nil
}

// reduce merges streams into temporary files until at most fanIn are
// left.
func (w *mergeWork) reduce(ctx context.Context) error {
	fan := fanIn(len(w.l.cols))
	for len(w.streams) > fan {
		k := min(fan, len(w.streams)-fan+1)
		part, rest := w.streams[:k], w.streams[k:]
		w.temps++
		path := filepath.Join(w.dir, "merge-"+strconv.Itoa(w.temps)+".parquet")
		if err := w.mergeToFile(ctx, part, path); err != nil {
			return err
		}
		for _, s := range part {
			s.close()
		}
		w.streams = append([]*mergeStream(nil), rest...)
		if err := w.addInput(path, path, true); err != nil {
			return err
		}
	}
	return nil
}

// mergeToFile merges streams into a temporary Parquet file at path
// (snappy, the layout's columns with their field ids).
func (w *mergeWork) mergeToFile(ctx context.Context, streams []*mergeStream, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	pw := parquet.NewWriter(f, w.l.temp, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(mergeTempRowGroup),
		parquet.PageBufferSize(64<<10))
	ncols := len(w.l.cols)
	pending := make([]parquet.Row, 0, mergeReadRows)
	spare := make([]parquet.Row, mergeReadRows)
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if _, err := pw.WriteRows(pending); err != nil {
			return fmt.Errorf("temporary file: %w", err)
		}
		pending = pending[:0]
		return nil
	}
	emit := func(s *mergeStream) error {
		i := len(pending)
		row := spare[i][:0]
		if cap(row) < ncols {
			row = make(parquet.Row, 0, ncols)
		}
		row = row[:ncols]
		for c := range w.l.cols {
			v := s.value(c)
			def := 1
			if v.IsNull() {
				def = 0
			}
			row[w.l.tempLeaf[c]] = v.Level(0, def, w.l.tempLeaf[c])
		}
		spare[i] = row
		pending = append(pending, row)
		if len(pending) == cap(pending) {
			return flush()
		}
		return nil
	}
	var m merger
	m.l = w.l
	if err := m.run(ctx, streams, emit, flush); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("temporary file: %w", err)
	}
	return f.Close()
}

// appender appends a Parquet value to an Arrow column builder.
type appender func(b array.Builder, v parquet.Value)

func appenderFor(dt arrow.DataType) (appender, error) {
	switch dt.ID() {
	case arrow.INT32:
		return func(b array.Builder, v parquet.Value) { b.(*array.Int32Builder).Append(v.Int32()) }, nil
	case arrow.DATE32:
		return func(b array.Builder, v parquet.Value) { b.(*array.Date32Builder).Append(arrow.Date32(v.Int32())) }, nil
	case arrow.INT64:
		return func(b array.Builder, v parquet.Value) { b.(*array.Int64Builder).Append(v.Int64()) }, nil
	case arrow.TIMESTAMP:
		if dt.(*arrow.TimestampType).Unit != arrow.Microsecond {
			return nil, fmt.Errorf("%w: timestamp unit %v", errNoMerge, dt)
		}
		return func(b array.Builder, v parquet.Value) {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.Int64()))
		}, nil
	case arrow.FLOAT32:
		return func(b array.Builder, v parquet.Value) { b.(*array.Float32Builder).Append(v.Float()) }, nil
	case arrow.FLOAT64:
		return func(b array.Builder, v parquet.Value) { b.(*array.Float64Builder).Append(v.Double()) }, nil
	case arrow.BOOL:
		return func(b array.Builder, v parquet.Value) { b.(*array.BooleanBuilder).Append(v.Boolean()) }, nil
	case arrow.STRING:
		return func(b array.Builder, v parquet.Value) { b.(*array.StringBuilder).BinaryBuilder.Append(v.ByteArray()) }, nil
	}
	return nil, fmt.Errorf("%w: Arrow type %v", errNoMerge, dt)
}

// mergeToBatches merges the streams (at most fanIn) into Arrow batches
// of at most batchRows rows, which a rowReader hands to the writer: the
// writer holds at most two of them, as in a compaction run (records.go).
func (w *mergeWork) mergeToBatches(ctx context.Context, batchRows int) (*rowReader, error) {
	fields := w.l.arrow.Fields()
	appenders := make([]appender, len(fields))
	for i, f := range fields {
		a, err := appenderFor(f.Type)
		if err != nil {
			return nil, err
		}
		appenders[i] = a
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &rowReader{schema: w.l.arrow, ch: make(chan arrow.RecordBatch, 1), errCh: make(chan error, 1), cancel: cancel}
	r.refs.Store(1)
	go func() {
		defer close(r.ch)
		var (
			mem    *batchMemory
			handed []*batchMemory
			b      *array.RecordBuilder
			n      int
		)
		defer func() {
			if b != nil {
				b.Release()
			}
		}()
		start := func() error {
			var err error
			mem, b, err = r.startBatch(ctx, &handed)
			return err
		}
		flush := func() error {
			if n == 0 {
				return nil
			}
			err := r.sendBatch(ctx, b, mem, &handed)
			b, n = nil, 0
			return err
		}
		emit := func(s *mergeStream) error {
			if b == nil {
				if err := start(); err != nil {
					return err
				}
			}
			for i, a := range appenders {
				v := s.value(i)
				if v.IsNull() {
					b.Field(i).AppendNull()
				} else {
					a(b.Field(i), v)
				}
			}
			n++
			r.rows.Add(1)
			if n >= batchRows {
				return flush()
			}
			return nil
		}
		var m merger
		m.l = w.l
		err := m.run(ctx, w.streams, emit, nil)
		if err == nil {
			err = flush()
		}
		r.errCh <- err
	}()
	return r, nil
}

// mergeGroup rewrites a group's files by the k-way merge into new files of
// about target bytes (iceberg-go's clustered writer, rolled at target);
// an error wrapping errNoMerge means nothing was written and the group can
// be rewritten another way.
func (c *Compactor) mergeGroup(ctx context.Context, tbl *itable.Table, group itable.CompactionTaskGroup, target int64, dir string) (res itable.CompactionGroupResult, err error) {
	res.PartitionKey = group.PartitionKey
	l, err := newMergeLayout(tbl)
	if err != nil {
		return res, err
	}
	var want int64
	for _, t := range group.Tasks {
		if len(t.EqualityDeleteFiles) > 0 || len(t.DeletionVectorFiles) > 0 {
			return res, fmt.Errorf("%w: %s has equality deletes or deletion vectors", errNoMerge, t.File.FilePath())
		}
		want += t.File.Count()
	}
	if err := os.RemoveAll(dir); err != nil {
		return res, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	w := &mergeWork{l: l, dir: dir}
	defer w.close()
	fs, err := tbl.FS(ctx)
	if err != nil {
		return res, err
	}
	// The position deletes of the group's files: their rows are left out.
	dead, err := groupDeletes(ctx, fs, group.Tasks)
	if err != nil {
		return res, err
	}
	for i, t := range group.Tasks {
		local := filepath.Join(dir, "input-"+strconv.Itoa(i)+".parquet")
		if err := download(fs, t.File.FilePath(), local); err != nil {
			return res, err
		}
		if err := w.addInput(local, t.File.FilePath(), false); err != nil {
			return res, err
		}
		in := w.inputs[len(w.inputs)-1]
		if got := in.rows(); got != t.File.Count() {
			return res, fmt.Errorf("%s holds %d rows, its manifest entry says %d", t.File.FilePath(), got, t.File.Count())
		}
		in.dead = dead[t.File.FilePath()]
		if n := len(in.dead); n > 0 && in.dead[n-1] >= t.File.Count() {
			return res, fmt.Errorf("%s: a position delete names row %d of its %d", t.File.FilePath(), in.dead[n-1], t.File.Count())
		}
		want -= int64(len(in.dead))
	}
	if err := w.reduce(ctx); err != nil {
		return res, err
	}
	rdr, err := w.mergeToBatches(ctx, maxBatchRows)
	if err != nil {
		return res, err
	}
	defer rdr.Release()
	for df, err := range itable.WriteRecords(ctx, tbl, rdr.Schema(), handOver(rdr), itable.WithClusteredWrite(),
		itable.WithTargetFileSize(target)) {
		if err != nil {
			return res, fmt.Errorf("write merged files: %w", err)
		}
		res.NewDataFiles = append(res.NewDataFiles, df)
		res.BytesAfter += df.FileSizeBytes()
	}
	if err := rdr.Err(); err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	var got int64
	for _, df := range res.NewDataFiles {
		got += df.Count()
	}
	if got != want || rdr.rows.Load() != want {
		return res, fmt.Errorf("merge wrote %d rows (read %d) of the %d in its %d files", got, rdr.rows.Load(), want, len(group.Tasks))
	}
	for _, t := range group.Tasks {
		res.OldDataFiles = append(res.OldDataFiles, t.File)
	}
	res.SafePosDeletes = itable.CollectSafePositionDeletes(group.Tasks)
	res.BytesBefore = group.TotalSizeBytes
	return res, nil
}

// groupDeletes reads the position delete files of tasks: each task's
// file's deleted positions, sorted, without duplicates. A delete file
// applies to a task's file only if planning attached it (its sequence
// number is not older than the file's).
func groupDeletes(ctx context.Context, fs icebergio.IO, tasks []itable.FileScanTask) (map[string][]int64, error) {
	rows := map[string]map[string][]int64{} // delete file -> data file -> positions
	dead := map[string][]int64{}
	for _, t := range tasks {
		path := t.File.FilePath()
		for _, d := range t.DeleteFiles {
			byFile, ok := rows[d.FilePath()]
			if !ok {
				byFile = map[string][]int64{}
				if err := readDeleteRows(ctx, fs, d, func(p string, pos int64) { byFile[p] = append(byFile[p], pos) }); err != nil {
					return nil, err
				}
				rows[d.FilePath()] = byFile
			}
			dead[path] = append(dead[path], byFile[path]...)
		}
	}
	for path, pos := range dead {
		slices.Sort(pos)
		dead[path] = slices.Compact(pos)
	}
	return dead, nil
}

// safeDeletes keeps of res.SafePosDeletes the position delete files whose
// rows all name files res replaces: a partition's delete file may also
// delete rows of a file of the partition the rewrite leaves alone, and
// dropping it would bring those rows back.
func safeDeletes(ctx context.Context, tbl *itable.Table, res itable.CompactionGroupResult) ([]iceberg.DataFile, error) {
	if len(res.SafePosDeletes) == 0 {
		return nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	replaced := map[string]bool{}
	for _, df := range res.OldDataFiles {
		replaced[df.FilePath()] = true
	}
	var safe []iceberg.DataFile
	for _, d := range res.SafePosDeletes {
		if ref := d.ReferencedDataFile(); ref != nil {
			if replaced[*ref] {
				safe = append(safe, d)
			}
			continue
		}
		all := true
		if err := readDeleteRows(ctx, fs, d, func(p string, _ int64) { all = all && replaced[p] }); err != nil {
			return nil, err
		}
		if all {
			safe = append(safe, d)
		}
	}
	return safe, nil
}

// download copies a file of the table's IO to a local path, streaming.
func download(fs icebergio.IO, from, to string) error {
	src, err := fs.Open(from)
	if err != nil {
		return fmt.Errorf("open %s: %w", from, err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(dst, struct{ io.Reader }{src}, make([]byte, 1<<20)); err != nil {
		dst.Close()
		return fmt.Errorf("read %s: %w", from, err)
	}
	return dst.Close()
}
