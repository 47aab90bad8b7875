package table

import (
	"cmp"
	"context"
	"fmt"
	"github.com/sluicedb/sluice/coltype"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble"
)

// Query selects rows of a table. The zero Query returns every row.
type Query struct {
	// From and To bound the event time: From <= t < To. A zero time is
	// unbounded.
	From, To time.Time
	// HashIn restricts the query to the partitions whose hashBy value is
	// one of these (equality for one value). Values are converted to the
	// column's type (so "42" finds partition 42 of an int64 column). Each
	// partition is one range scan.
	HashIn []any
	// Columns is the projection, in output order; empty means every column
	// in schema order. A name Paths has is not a column but a value inside
	// one.
	Columns []string
	// Paths makes names of Columns values inside a json (or string)
	// column's JSON text: the output column of that name answers, per row,
	// the value its path addresses (ColumnPath). A name both a column of
	// the table and a key of Paths is the path: the caller decides which
	// reading a name has (the server lets a column's own name win).
	Paths map[string]ColumnPath
	// Where holds predicates, all of which must hold (AND).
	Where []Predicate
	// Limit caps the rows emitted; 0 means no limit.
	Limit int
	// ByKey emits the partitions in order of their hashBy value (nulls
	// first) instead of their hash, so that the rows of a range come out
	// sorted by key (two keys whose 64-bit hashes collide share a
	// partition and stay interleaved in time order). It costs a first pass
	// over the range that decodes one block per partition and holds one
	// key per partition; the compaction uses it so that the files it
	// writes are sorted by key and readers can skip row groups by key.
	ByKey bool
	// Serial decodes the blocks one at a time on the caller's goroutine
	// instead of on up to GOMAXPROCS workers (scan.go): for a reader that
	// bounds its memory rather than its time (a compaction run).
	Serial bool
}

// ColumnPath is an output column that is the value a path addresses
// inside a json or string column's JSON text (docs/streams.md, "Nested
// values"). Its type is json and its values are the JSON value's own
// kind: a string (the JSON string's text, unescaped), a json.Number (a
// number's text as stored), a bool, or a json.RawMessage (an object or an
// array as its JSON text); a missing path, a JSON null and text that is
// not JSON where the path goes are null. The path is parsed once per
// query and looked up by a scan of each matching row's text.
type ColumnPath struct {
	Column string `json:"column"`
	Path   string `json:"path"` // ParsePath's form: `.city`, `[0].sku`
}

// outCol is one projected column.
type outCol struct {
	name string
	typ  Type
	// src is the column a path column is read from (name itself for a
	// plain column); path is non-nil for a path column.
	src  string
	path *Path
}

// plan is a compiled query.
type plan struct {
	from, to   int64 // event time bounds, [from, to)
	span       int64
	timeName   string
	hashes     []uint64 // nil: all partitions
	out        []outCol
	preds      []*Condition
	types      map[string]Type // schema type of each needed column
	limit      int
	empty      bool // nothing can match
	tableID    uint32
	tableName  string
	hashColumn string
	hashType   Type // the hashBy column's type; valid when hasHashType
	hasHash    bool // the schema has the hashBy column (some row had a value)
	byKey      bool
	seqLimit   uint64 // blocks with a sequence at or above it are skipped (0: none are)
	seqFrom    uint64 // blocks with a sequence below it are skipped
	serial     bool   // Query.Serial
	borrow     bool   // an encoded query: values live only during encode (scan.go)
	// snap, when set, is the store's view the scan reads (View); nil:
	// the store as it is when the scan starts.
	snap *pebble.Snapshot
}

func (t *Table) plan(q Query) (*plan, error) {
	t.mu.Lock()
	schema, idx, ttl := t.meta.Schema, t.colIndex, t.meta.TTL
	t.mu.Unlock()
	p := &plan{
		from: math.MinInt64, to: math.MaxInt64, span: t.span, timeName: t.sortBy,
		types: map[string]Type{t.sortBy: Timestamp}, limit: q.Limit,
		tableID: t.id, tableName: t.name, hashColumn: t.hashBy,
	}
	if q.Limit < 0 {
		return nil, fmt.Errorf("table %s: %w: negative limit %d", p.tableName, ErrBadQuery, q.Limit)
	}
	if !q.From.IsZero() {
		p.from = q.From.UnixNano()
	}
	if !q.To.IsZero() {
		p.to = q.To.UnixNano()
	}
	if ttl > 0 {
		p.from = max(p.from, t.store.opts.Now().Add(-ttl).UnixNano())
	}
	column := func(name, what string) (Type, error) {
		i, ok := idx[name]
		if !ok {
			return 0, fmt.Errorf("table %s: %s: %w %q", p.tableName, what, ErrUnknownColumn, name)
		}
		return schema[i].Type, nil
	}
	if len(q.Columns) == 0 {
		for _, c := range schema {
			if Hidden(c.Name) {
				continue // named in Columns only (see Hidden)
			}
			p.out = append(p.out, outCol{name: c.Name, typ: c.Type, src: c.Name})
		}
	}
	for _, name := range q.Columns {
		if cp, ok := q.Paths[name]; ok {
			typ, err := column(cp.Column, "projection")
			if err != nil {
				return nil, err
			}
			path, err := cp.parse(typ)
			if err != nil {
				return nil, fmt.Errorf("table %s: %w: column %q: %w", p.tableName, ErrBadQuery, name, err)
			}
			p.out = append(p.out, outCol{name: name, typ: JSON, src: cp.Column, path: path})
			p.types[cp.Column] = typ
			continue
		}
		typ, err := column(name, "projection")
		if err != nil {
			return nil, err
		}
		p.out = append(p.out, outCol{name: name, typ: typ, src: name})
	}
	for _, c := range p.out {
		if c.path == nil {
			p.types[c.name] = c.typ
		}
	}
	for _, w := range q.Where {
		typ, err := column(w.Column, "predicate")
		if err != nil {
			return nil, err
		}
		pr, err := w.Compile(typ)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w: where %s: %w", p.tableName, ErrBadQuery, w, err)
		}
		p.types[w.Column] = typ
		p.preds = append(p.preds, pr)
		if w.Column == p.timeName { // narrow the scan too (the predicate still filters rows)
			switch v := pr.v.i; w.Op {
			case Eq:
				p.from, p.to = max(p.from, v), min(p.to, next(v))
			case Ge:
				p.from = max(p.from, v)
			case Gt:
				p.from = max(p.from, next(v))
			case Lt:
				p.to = min(p.to, v)
			case Le:
				p.to = min(p.to, next(v))
			}
		}
	}
	if i, ok := idx[p.hashColumn]; ok && p.hashColumn != "" {
		p.hashType, p.hasHash = schema[i].Type, true
	}
	p.byKey = q.ByKey && p.hasHash
	p.serial = q.Serial
	if len(q.HashIn) > 0 {
		if p.hashColumn == "" {
			return nil, fmt.Errorf("table %s: %w: HashIn given but the table has no hashBy column", p.tableName, ErrBadQuery)
		}
		i, ok := idx[p.hashColumn]
		if !ok { // no row has had a partition value yet
			p.empty = true
			return p, nil
		}
		typ := schema[i].Type
		pr, err := Predicate{Column: p.hashColumn, Op: In, Values: q.HashIn}.Compile(typ)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w: hashBy value: %w", p.tableName, ErrBadQuery, err)
		}
		p.types[p.hashColumn] = typ
		p.preds = append(p.preds, pr) // hashes collide: check the value
		seen := map[uint64]bool{}
		for _, v := range q.HashIn {
			cv, _ := coerce(v, typ) // checked by Compile
			h := partitionHash(typ, cv, v == nil)
			if !seen[h] {
				seen[h] = true
				p.hashes = append(p.hashes, h)
			}
		}
	}
	if p.from >= p.to {
		p.empty = true
	}
	return p, nil
}

// next is v+1 without overflowing.
func next(v int64) int64 {
	if v == math.MaxInt64 {
		return v
	}
	return v + 1
}

// convert turns c into type to (a block written before the column widened).
func (c *decodedCol) convert(to Type, rows int) {
	if c.typ == to {
		return
	}
	if to.IsWideDecimal() && c.typ.IsDecimal() && !c.typ.IsWideDecimal() {
		// A decimal of up to 18 digits kept in 64 bits, before a value of
		// more digits widened its column.
		c.strs = grow(c.strs, rows)
		for r := range rows {
			if !c.isNull(r) {
				c.strs[r] = wideDecimal(coltype.DecimalValue{Unscaled: c.ints[r], Scale: c.typ.Scale()})
			}
		}
		c.typ = to
		return
	}
	switch to {
	case Float64:
		c.floats = grow(c.floats, rows)
		for r := range rows {
			c.floats[r] = float64(c.ints[r])
		}
	case String:
		c.strs = grow(c.strs, rows)
		var buf []byte
		for r := range rows {
			if c.isNull(r) {
				continue
			}
			switch {
			case c.typ == String || c.typ == JSON:
				continue
			case holdsText(c.typ): // bytes, uuid
				buf = appendText(buf[:0], c.typ, value{s: c.strs[r]})
			case c.typ == Float64:
				buf = appendText(buf[:0], c.typ, floatValue(c.floats[r]))
			default:
				buf = appendText(buf[:0], c.typ, value{i: c.ints[r]})
			}
			c.strs[r] = string(buf)
		}
	}
	c.typ = to
}

// Query streams the rows matching q to emit, partition by partition (in
// partition hash order), within a partition block by block (blocks in
// order of their first event time; rows of a block in event time order).
// It stops at the first error emit returns and returns it unchanged.
//
// The Row passed to emit is reused for the next row: emit must not keep it
// (copy it with maps.Clone). Every projected column is present in it, nil
// for null. A projected or predicate column the table lacks is an error
// wrapping ErrUnknownColumn.
func (t *Table) Query(ctx context.Context, q Query, emit func(Row) error) error {
	var row Row
	return t.query(ctx, q, func(p *plan, vals []any) error {
		if row == nil {
			row = make(Row, len(p.out))
		}
		for i, v := range vals {
			row[p.out[i].name] = v
		}
		return emit(row)
	})
}

// QueryValues is Query without the map: emit gets the projected columns
// (the same slice for every call of one query) and the row's values in
// that order. vals is reused for the next row: emit must not keep it.
// Encoders (NDJSON, CSV) use it to write columns in a fixed order without
// iterating or sorting a map per row.
func (t *Table) QueryValues(ctx context.Context, q Query, emit func(cols []Column, vals []any) error) error {
	var cols []Column
	return t.query(ctx, q, func(p *plan, vals []any) error {
		if cols == nil {
			cols = make([]Column, len(p.out))
			for i, c := range p.out {
				cols[i] = Column{Name: c.name, Type: c.typ}
			}
		}
		return emit(cols, vals)
	})
}

// Columns returns the columns a query would produce, in order (for a CSV
// header before the first row), or the error the query would return for
// an unknown column.
func (t *Table) Columns(q Query) ([]Column, error) {
	p, err := t.plan(q)
	if err != nil {
		return nil, err
	}
	cols := make([]Column, len(p.out))
	for i, c := range p.out {
		cols[i] = Column{Name: c.name, Type: c.typ}
	}
	return cols, nil
}

// QueryEncoded is QueryValues for an encoder of the answer (NDJSON in the
// server): encode is called on the scan's workers, which encode each
// block's rows into a chunk of their own, and write gets the chunks on the
// caller's goroutine, in the order QueryValues emits their rows, with the
// number of rows in each. encode must be safe to call on several
// goroutines at once and must not keep vals or its values. An error from
// encode ends the query after the rows before it are written, as from
// QueryValues' emit; an error from write ends it unchanged.
func (t *Table) QueryEncoded(ctx context.Context, q Query, encode EncodeFunc, write func(chunk []byte, rows int) error) error {
	return t.scan(ctx, q, 0, 0, &scanner{encode: encode, write: write})
}

func (t *Table) query(ctx context.Context, q Query, emit func(*plan, []any) error) error {
	return t.queryBelow(ctx, q, 0, emit)
}

// queryBelow is query limited to the blocks whose sequence is below
// seqLimit (0: no limit).
func (t *Table) queryBelow(ctx context.Context, q Query, seqLimit uint64, emit func(*plan, []any) error) error {
	return t.querySeqs(ctx, q, 0, seqLimit, emit)
}

// querySeqs is query limited to the blocks whose sequence is at least
// seqFrom and below seqLimit (0: no upper bound).
func (t *Table) querySeqs(ctx context.Context, q Query, seqFrom, seqLimit uint64, emit func(*plan, []any) error) error {
	return t.scan(ctx, q, seqFrom, seqLimit, &scanner{emit: emit})
}

// scan runs q through s (its emit or its encode and write set), limited to
// the blocks whose sequence is at least seqFrom and below seqLimit.
func (t *Table) scan(ctx context.Context, q Query, seqFrom, seqLimit uint64, s *scanner) error {
	return t.scanView(ctx, q, seqFrom, seqLimit, nil, false, s) // keyed_deletes.go
}

// scanBlocks feeds the plan's blocks to s in key order.
func (t *Table) scanBlocks(ctx context.Context, p *plan, s blockFeeder) error {
	lo, hi := tableBounds(p.tableID)
	newIter := t.store.db.NewIterWithContext
	if p.snap != nil {
		newIter = p.snap.NewIterWithContext
	}
	it, err := newIter(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("table %s: query: %w", p.tableName, err)
	}
	defer it.Close()
	lowKey := floorTime(p.from, p.span)
	if p.from == math.MinInt64 {
		lowKey = math.MinInt64
	}
	if scanOpenedHook != nil {
		scanOpenedHook()
	}
	deadOf, closeMarks, err := t.deadMarks(it)
	if err != nil {
		return fmt.Errorf("table %s: query: %w", p.tableName, err)
	}
	defer closeMarks()
	if p.byKey && p.hashes == nil {
		if p.hashes, err = t.partitionsByKey(ctx, it, p, lowKey); err != nil {
			return err
		}
	}
	if p.hashes != nil {
		for _, h := range p.hashes {
			end := partitionKey(p.tableID, h, p.to)
			for it.SeekGE(partitionKey(p.tableID, h, lowKey)); it.Valid(); it.Next() {
				if string(it.Key()) >= string(end) {
					break
				}
				dead, err := deadOf(it.Key())
				if err != nil {
					return fmt.Errorf("table %s: query: %w", p.tableName, err)
				}
				if allDead(dead) {
					continue // every row superseded or deleted: not read
				}
				if done, err := s.block(ctx, it.Key(), it.Value(), dead); done || err != nil {
					return err
				}
			}
		}
		return it.Error()
	}
	// All partitions: skip scan, seeking past the blocks out of range.
	for it.First(); it.Valid(); {
		_, h, minTime, _, ok := parseBlockKey(it.Key())
		if !ok {
			return &CorruptionError{Key: slices.Clone(it.Key()), Reason: "not a block key"}
		}
		switch {
		case minTime < lowKey:
			it.SeekGE(partitionKey(p.tableID, h, lowKey))
			continue
		case minTime >= p.to:
			if h == math.MaxUint64 {
				return it.Error()
			}
			it.SeekGE(partitionKey(p.tableID, h+1, math.MinInt64))
			continue
		}
		dead, err := deadOf(it.Key())
		if err != nil {
			return fmt.Errorf("table %s: query: %w", p.tableName, err)
		}
		if !allDead(dead) { // else every row superseded or deleted: not read
			if done, err := s.block(ctx, it.Key(), it.Value(), dead); done || err != nil {
				return err
			}
		}
		it.Next()
	}
	return it.Error()
}

// scanOpenedHook, when set (tests only), runs after a scan opened its
// block iterator and before it reads the dead-row marks: a test commits an
// append there to check that the marks are read as of the blocks' view.
var scanOpenedHook func()

// deadMarks returns, for a keyed table, the dead-row mark of a block (nil:
// none) as of blocks' view: a clone of the blocks' iterator reads the
// marks, so that a query sees the marks and the blocks of the same
// commits (a row superseded by a block it does not see stays visible, and
// one superseded by a block it sees is hidden), as a bitmap (markBits).
// The mark is valid until the next call. Append-only tables have no marks.
func (t *Table) deadMarks(blocks *pebble.Iterator) (deadOf func(blockKey []byte) ([]byte, error), closeMarks func(), err error) {
	if t.key == nil {
		return func([]byte) ([]byte, error) { return nil, nil }, func() {}, nil
	}
	lo, hi := deadBounds(t.id)
	marks, err := blocks.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{LowerBound: lo, UpperBound: hi}})
	if err != nil {
		return nil, nil, err
	}
	var dk, listed []byte
	return func(blockKey []byte) ([]byte, error) {
		dk = deadKey(dk[:0], blockKey)
		if !marks.SeekGE(dk) || string(marks.Key()) != string(dk) {
			return nil, nil
		}
		mark, err := markBits(listed, marks.Value())
		if err != nil {
			return nil, &CorruptionError{Key: slices.Clone(dk), Reason: err.Error()}
		}
		if listedMark(marks.Value()) {
			listed = mark // decoded into it: reused for the next list
		}
		return mark, nil
	}, func() { marks.Close() }, nil
}

// partitionsByKey lists the partitions that have blocks in the plan's
// range, ordered by their hashBy value: the value of the first row of the
// first such block (every row of a partition has it, unless two keys'
// hashes collide), then by hash.
func (t *Table) partitionsByKey(ctx context.Context, it *pebble.Iterator, p *plan, lowKey int64) ([]uint64, error) {
	type partition struct {
		hash uint64
		null bool
		i    int64
		f    float64
		s    string
	}
	var parts []partition
	var dec blockDecoder
	want := func(name string) bool { return name == p.hashColumn }
	for it.First(); it.Valid(); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		_, h, minTime, seq, ok := parseBlockKey(it.Key())
		if !ok {
			return nil, &CorruptionError{Key: slices.Clone(it.Key()), Reason: "not a block key"}
		}
		switch {
		case minTime < lowKey:
			it.SeekGE(partitionKey(p.tableID, h, lowKey))
			continue
		case minTime >= p.to:
		case p.seqLimit != 0 && seq >= p.seqLimit, seq < p.seqFrom:
			it.Next()
			continue
		default:
			if err := dec.decode(it.Key(), it.Value(), want); err != nil {
				return nil, fmt.Errorf("table %s: %w", p.tableName, err)
			}
			part := partition{hash: h, null: true}
			for i := range dec.n {
				c := &dec.cols[i]
				if c.name != p.hashColumn || dec.rows == 0 || c.isNull(0) {
					continue
				}
				c.convert(p.hashType, dec.rows)
				part.null = false
				switch {
				case p.hashType == Float64:
					part.f = c.floats[0]
				case holdsText(p.hashType):
					part.s = c.strs[0]
				default:
					part.i = c.ints[0]
				}
			}
			parts = append(parts, part)
		}
		if h == math.MaxUint64 {
			break
		}
		it.SeekGE(partitionKey(p.tableID, h+1, math.MinInt64))
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	slices.SortFunc(parts, func(a, b partition) int {
		if a.null != b.null {
			if a.null {
				return -1
			}
			return 1
		}
		c := 0
		switch {
		case p.hashType == Float64:
			c = cmp.Compare(a.f, b.f)
		case holdsText(p.hashType):
			c = strings.Compare(a.s, b.s)
		default:
			c = cmp.Compare(a.i, b.i)
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a.hash, b.hash)
	})
	hashes := make([]uint64, len(parts))
	for i, part := range parts {
		hashes[i] = part.hash
	}
	return hashes, nil
}

// scanner decodes blocks and emits their matching rows (scan.go).
type scanner struct {
	t    *Table
	p    *plan
	emit func(*plan, []any) error
	// encode and write replace emit in an encoded query (QueryEncoded).
	encode  EncodeFunc
	write   func(chunk []byte, rows int) error
	vals    []any // the current row, in p.out order
	emitted int
}
