package table

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
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
	// in schema order.
	Columns []string
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
}

// Op is a predicate operator.
type Op string

// Predicate operators.
const (
	Eq      Op = "="
	Ne      Op = "!="
	Lt      Op = "<"
	Le      Op = "<="
	Gt      Op = ">"
	Ge      Op = ">="
	In      Op = "IN"
	IsNull  Op = "IS NULL"
	NotNull Op = "IS NOT NULL"
)

// ParseOp accepts the operators above case-insensitively, plus "==" and
// "<>".
func ParseOp(s string) (Op, error) {
	switch u := strings.Join(strings.Fields(strings.ToUpper(s)), " "); u {
	case "=", "==":
		return Eq, nil
	case "!=", "<>":
		return Ne, nil
	case "<", "<=", ">", ">=", "IN", "IS NULL", "IS NOT NULL":
		return Op(u), nil
	}
	return "", fmt.Errorf("table: unknown operator %q (want =, !=, <, <=, >, >=, IN, IS NULL, IS NOT NULL)", s)
}

// Predicate is one condition on a column. Comparisons with a null column
// value are false (as in SQL); use IsNull. Value (or Values, for In) is
// converted to the column's type.
type Predicate struct {
	Column string
	Op     Op
	Value  any
	Values []any
}

// String writes p as a where clause: `n >= "abc"`, `user IN ("a", "b")`.
func (p Predicate) String() string {
	switch p.Op {
	case IsNull, NotNull:
		return fmt.Sprintf("%s %s", p.Column, p.Op)
	case In:
		vals := make([]string, len(p.Values))
		for i, v := range p.Values {
			vals[i] = fmt.Sprintf("%#v", v)
		}
		return fmt.Sprintf("%s IN (%s)", p.Column, strings.Join(vals, ", "))
	}
	return fmt.Sprintf("%s %s %#v", p.Column, p.Op, p.Value)
}

// pred is a compiled predicate.
type pred struct {
	name   string
	typ    Type
	op     Op
	v      value
	ints   map[int64]struct{}
	floats map[float64]struct{}
	strs   map[string]struct{}
}

// outCol is one projected column.
type outCol struct {
	name string
	typ  Type
}

// plan is a compiled query.
type plan struct {
	from, to   int64 // event time bounds, [from, to)
	span       int64
	timeName   string
	hashes     []uint64 // nil: all partitions
	out        []outCol
	preds      []pred
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
			p.out = append(p.out, outCol{c.Name, c.Type})
		}
	}
	for _, name := range q.Columns {
		typ, err := column(name, "projection")
		if err != nil {
			return nil, err
		}
		p.out = append(p.out, outCol{name, typ})
	}
	for _, c := range p.out {
		p.types[c.name] = c.typ
	}
	for _, w := range q.Where {
		typ, err := column(w.Column, "predicate")
		if err != nil {
			return nil, err
		}
		pr, err := compilePred(w, typ)
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
		pr, err := compilePred(Predicate{Column: p.hashColumn, Op: In, Values: q.HashIn}, typ)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w: hashBy value: %w", p.tableName, ErrBadQuery, err)
		}
		p.types[p.hashColumn] = typ
		p.preds = append(p.preds, pr) // hashes collide: check the value
		seen := map[uint64]bool{}
		for _, v := range q.HashIn {
			cv, _ := coerce(v, typ) // checked by compilePred
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

func compilePred(w Predicate, typ Type) (pred, error) {
	pr := pred{name: w.Column, typ: typ, op: w.Op}
	switch w.Op {
	case IsNull, NotNull:
		return pr, nil
	case Eq, Ne, Lt, Le, Gt, Ge:
		if w.Value == nil {
			return pr, fmt.Errorf("%s with a null value (use IS NULL)", w.Op)
		}
		if (typ == JSON || typ == Bool) && w.Op != Eq && w.Op != Ne {
			return pr, fmt.Errorf("%s is not defined on %v", w.Op, typ)
		}
		v, err := coerce(w.Value, typ)
		if err != nil {
			return pr, err
		}
		pr.v = v
		return pr, nil
	case In:
		switch typ {
		case Float64:
			pr.floats = map[float64]struct{}{}
		case String, JSON:
			pr.strs = map[string]struct{}{}
		default:
			pr.ints = map[int64]struct{}{}
		}
		for _, x := range w.Values {
			if x == nil {
				continue // null is in no list
			}
			v, err := coerce(x, typ)
			if err != nil {
				return pr, err
			}
			switch {
			case pr.floats != nil:
				pr.floats[v.float()] = struct{}{}
			case pr.strs != nil:
				pr.strs[v.s] = struct{}{}
			default:
				pr.ints[v.i] = struct{}{}
			}
		}
		return pr, nil
	}
	return pr, fmt.Errorf("unknown operator %q", w.Op)
}

// match evaluates p on row r of c (already converted to p.typ).
func (p *pred) match(c *decodedCol, r int) bool {
	null := c == nil || c.isNull(r)
	switch p.op {
	case IsNull:
		return null
	case NotNull:
		return !null
	}
	if null {
		return false
	}
	if p.op == In {
		var ok bool
		switch {
		case p.floats != nil:
			_, ok = p.floats[c.floats[r]]
		case p.strs != nil:
			_, ok = p.strs[c.strs[r]]
		default:
			_, ok = p.ints[c.ints[r]]
		}
		return ok
	}
	var d int
	switch p.typ {
	case Float64:
		f := c.floats[r]
		switch {
		case f < p.v.float():
			d = -1
		case f > p.v.float():
			d = 1
		case f != p.v.float(): // NaN: only != holds
			return p.op == Ne
		}
	case String, JSON:
		if p.op == Eq || p.op == Ne || p.typ == JSON {
			d = strings.Compare(c.strs[r], p.v.s)
		} else {
			var ok bool
			if d, ok = CompareText(c.strs[r], p.v.s); !ok {
				return false
			}
		}
	default:
		i := c.ints[r]
		switch {
		case i < p.v.i:
			d = -1
		case i > p.v.i:
			d = 1
		}
	}
	switch p.op {
	case Eq:
		return d == 0
	case Ne:
		return d != 0
	case Lt:
		return d < 0
	case Le:
		return d <= 0
	case Gt:
		return d > 0
	}
	return d >= 0 // Ge
}

// CompareText orders value a of a string column against a query's value b
// for <, <=, > and >=. When b is a decimal number, a is compared as a number
// (what an int64 or float64 column widened to string holds: "1000" > "900"),
// and a value that is not one matches no ordering (ok false), as a failed
// cast would in SQL; otherwise both compare as text. Equality (=, !=, IN)
// stays exact text, as partition hashes are.
func CompareText(a, b string) (c int, ok bool) {
	y, num := decimalNumber(b)
	if !num {
		return strings.Compare(a, b), true
	}
	x, num := decimalNumber(a)
	if !num {
		return 0, false
	}
	switch {
	case x < y:
		return -1, true
	case x > y:
		return 1, true
	}
	return 0, true
}

// decimalNumber parses s when it is a JSON-style decimal number (optional
// minus, digits, fraction, exponent): not "Inf", "NaN", hex or "1_000",
// which strconv.ParseFloat would take.
func decimalNumber(s string) (float64, bool) {
	if s == "" {
		return 0, false
	}
	digits := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = true
		case c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E':
		default:
			return 0, false
		}
	}
	if !digits {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// convert turns c into type to (a block written before the column widened).
func (c *decodedCol) convert(to Type, rows int) {
	if c.typ == to {
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
			switch c.typ {
			case String, JSON:
				continue
			case Float64:
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
	release, err := t.store.use()
	if err != nil {
		return err
	}
	defer release()
	t.queries.Add(1)
	p, err := t.plan(q)
	if err != nil || p.empty {
		return err
	}
	p.seqLimit, p.seqFrom = seqLimit, seqFrom
	s := scanner{t: t, p: p, emit: emit, vals: make([]any, len(p.out))}
	lo, hi := tableBounds(p.tableID)
	it, err := t.store.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("table %s: query: %w", p.tableName, err)
	}
	defer it.Close()
	lowKey := floorTime(p.from, p.span)
	if p.from == math.MinInt64 {
		lowKey = math.MinInt64
	}
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
				if done, err := s.block(ctx, it.Key(), it.Value()); done || err != nil {
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
		if done, err := s.block(ctx, it.Key(), it.Value()); done || err != nil {
			return err
		}
		it.Next()
	}
	return it.Error()
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
				switch p.hashType {
				case Float64:
					part.f = c.floats[0]
				case String, JSON:
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
		switch p.hashType {
		case Float64:
			c = cmp.Compare(a.f, b.f)
		case String, JSON:
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

// scanner decodes blocks and emits their matching rows.
type scanner struct {
	t       *Table
	p       *plan
	emit    func(*plan, []any) error
	vals    []any // the current row, in p.out order
	dec     blockDecoder
	emitted int
	// byName maps a needed column to its decoded column in the current
	// block (nil: the block lacks it).
	byName map[string]*decodedCol
	// boxes[i] makes the values of output column i of the current block.
	boxes []boxer
}

// block processes one block; done is true when the limit is reached.
func (s *scanner) block(ctx context.Context, key, val []byte) (done bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	p := s.p
	if p.seqLimit != 0 || p.seqFrom != 0 {
		if _, _, _, seq, _ := parseBlockKey(key); (p.seqLimit != 0 && seq >= p.seqLimit) || seq < p.seqFrom {
			return false, nil
		}
	}
	if err := s.dec.decode(key, val, func(name string) bool { _, ok := p.types[name]; return ok }); err != nil {
		return true, fmt.Errorf("table %s: %w", p.tableName, err)
	}
	s.t.blocksRead.Add(1)
	s.t.rowsScanned.Add(int64(s.dec.rows))
	if s.byName == nil {
		s.byName = make(map[string]*decodedCol, len(p.types))
	}
	clear(s.byName)
	for i := range s.dec.n {
		c := &s.dec.cols[i]
		c.convert(p.types[c.name], s.dec.rows)
		s.byName[c.name] = c
	}
	timeCol := s.byName[p.timeName]
	if timeCol == nil {
		return true, fmt.Errorf("table %s: %w", p.tableName, &CorruptionError{Key: slices.Clone(key), Reason: "block lacks the time column"})
	}
	preds := make([]*decodedCol, len(p.preds))
	for i := range p.preds {
		preds[i] = s.byName[p.preds[i].name]
	}
	outs := make([]*decodedCol, len(p.out))
	for i := range p.out {
		outs[i] = s.byName[p.out[i].name]
	}
	boxed := false
	emitted := 0
	defer func() { s.t.rowsEmitted.Add(int64(emitted)) }()
rows:
	for r := range s.dec.rows {
		if ts := timeCol.ints[r]; ts < p.from || ts >= p.to {
			continue
		}
		for i := range p.preds {
			if !p.preds[i].match(preds[i], r) {
				continue rows
			}
		}
		if !boxed { // first matching row of the block
			boxed = true
			if len(s.boxes) < len(outs) {
				s.boxes = make([]boxer, len(outs))
			}
			for i, c := range outs {
				s.boxes[i].reset(c, s.dec.rows)
			}
		}
		for i := range outs {
			s.vals[i] = s.boxes[i].at(r)
		}
		emitted++
		if err := s.emit(p, s.vals); err != nil {
			return true, err
		}
		s.emitted++
		if p.limit > 0 && s.emitted >= p.limit {
			return true, nil
		}
	}
	return false, nil
}
