package table

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/coltype"
)

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
//
// Path, when set, addresses a value inside a json (or string) column's
// JSON text (ParsePath: `.address.city`, `.items[0].sku`); the condition
// is then on that value, with the semantics of pathCond.
type Predicate struct {
	Column string
	Path   string
	Op     Op
	Value  any
	Values []any
}

// String writes p as a where clause: `n >= "abc"`, `user IN ("a", "b")`,
// `address.city = "Oslo"` (a column whose name has a dot or a bracket is
// quoted before a path: `"a.b".c`).
func (p Predicate) String() string {
	col := p.Column
	if p.Path != "" {
		col = QuoteColumn(col)
		if !strings.HasPrefix(p.Path, ".") && !strings.HasPrefix(p.Path, "[") {
			col += "."
		}
		col += p.Path
	}
	switch p.Op {
	case IsNull, NotNull:
		return fmt.Sprintf("%s %s", col, p.Op)
	case In:
		vals := make([]string, len(p.Values))
		for i, v := range p.Values {
			vals[i] = fmt.Sprintf("%#v", v)
		}
		return fmt.Sprintf("%s IN (%s)", col, strings.Join(vals, ", "))
	}
	return fmt.Sprintf("%s %s %#v", col, p.Op, p.Value)
}

// Condition is a Predicate compiled for the type of its column: the one
// evaluator of a where clause on a value. The store's scans run it on
// decoded blocks and the cold tier's reads (coldtier/coldread) on decoded
// Parquet columns, so a row matches the same predicates in either tier.
//
// Its semantics: a comparison (=, !=, <, <=, >, >=, IN) with a null value
// is false, IS NULL and IS NOT NULL test for null; IN ignores the nulls of
// its list; a float NaN satisfies only !=; on a string column, = != IN
// compare text exactly and < <= > >= compare as CompareText does (numbers
// as numbers when the query's value is one: what an int64 or float64
// column widened to string holds); JSON and bool columns have only
// equality. The query's value was converted to the column's type by
// Predicate.Compile.
//
// A value is given as the column's type holds it: Int for Int64, Date
// (days), TimeOfDay (µs) and decimals (the unscaled value), Float for
// Float64, Text for String, JSON, Bytes and UUID (its 16 bytes), Bool for
// Bool, Time for Timestamp, Null for null. Dates, times of day, decimals,
// bytes and uuids have every comparison (bytes and uuids in byte order). Value takes any value, converting it as Convert does.
type Condition struct {
	Column string
	Type   Type
	Op     Op
	v      value // the comparison's value, of Type
	ints   map[int64]struct{}
	floats map[float64]struct{}
	strs   map[string]struct{}
	path   *pathCond // a condition on a value inside the column's JSON
}

// Compile checks p against its column's type typ and converts its values
// to that type.
func (p Predicate) Compile(typ Type) (*Condition, error) {
	c := &Condition{Column: p.Column, Type: typ, Op: p.Op}
	if p.Path != "" {
		pc, err := compilePath(p, typ)
		if err != nil {
			return nil, err
		}
		c.path = pc
		return c, nil
	}
	switch p.Op {
	case IsNull, NotNull:
		return c, nil
	case Eq, Ne, Lt, Le, Gt, Ge:
		if p.Value == nil {
			return nil, fmt.Errorf("%s with a null value (use IS NULL)", p.Op)
		}
		if (typ == JSON || typ == Bool) && p.Op != Eq && p.Op != Ne {
			return nil, fmt.Errorf("%s is not defined on %v", p.Op, typ)
		}
		v, err := coerce(p.Value, typ)
		if err != nil {
			return nil, err
		}
		c.v = v
		return c, nil
	case In:
		switch {
		case typ == Float64:
			c.floats = map[float64]struct{}{}
		case holdsText(typ):
			c.strs = map[string]struct{}{}
		default:
			c.ints = map[int64]struct{}{}
		}
		for _, x := range p.Values {
			if x == nil {
				continue // null is in no list
			}
			v, err := coerce(x, typ)
			if err != nil {
				return nil, err
			}
			switch {
			case c.floats != nil:
				c.floats[v.float()] = struct{}{}
			case c.strs != nil:
				c.strs[v.s] = struct{}{}
			default:
				c.ints[v.i] = struct{}{}
			}
		}
		return c, nil
	}
	return nil, fmt.Errorf("unknown operator %q", p.Op)
}

// Null is the condition on a null value.
func (c *Condition) Null() bool { return c.Op == IsNull }

// Int is the condition on a value of an Int64 column (and, as the store
// holds them, a Timestamp's unix nanoseconds or a Bool's 0 or 1).
func (c *Condition) Int(x int64) bool {
	switch c.Op {
	case IsNull:
		return false
	case NotNull:
		return true
	case In:
		_, ok := c.ints[x]
		return ok
	}
	return c.Op.holds(cmp.Compare(x, c.v.i))
}

// Float is the condition on a value of a Float64 column.
func (c *Condition) Float(x float64) bool {
	switch c.Op {
	case IsNull:
		return false
	case NotNull:
		return true
	case In:
		_, ok := c.floats[x]
		return ok
	}
	y := c.v.float()
	switch {
	case x < y:
		return c.Op.holds(-1)
	case x > y:
		return c.Op.holds(1)
	case x != y: // NaN: only != holds
		return c.Op == Ne
	}
	return c.Op.holds(0)
}

// Text is the condition on a value of a String or JSON column.
func (c *Condition) Text(s string) bool {
	if c.path != nil {
		return c.path.holds(c.Op, s)
	}
	switch c.Op {
	case IsNull:
		return false
	case NotNull:
		return true
	case In:
		_, ok := c.strs[s]
		return ok
	case Eq, Ne:
		return c.Op.holds(strings.Compare(s, c.v.s))
	}
	if c.Type != String {
		// JSON text, and bytes, uuids and wide decimals in byte order (a
		// uuid's order is its canonical text's, a wide decimal's bytes are
		// kept so that their order is the numbers').
		return c.Op.holds(strings.Compare(s, c.v.s))
	}
	d, ok := CompareText(s, c.v.s)
	return ok && c.Op.holds(d)
}

// Bool is the condition on a value of a Bool column.
func (c *Condition) Bool(b bool) bool {
	if b {
		return c.Int(1)
	}
	return c.Int(0)
}

// minNanoTime and maxNanoTime bound the times a Timestamp column holds
// (unix nanoseconds in an int64).
var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

// Time is the condition on a value of a Timestamp column. A time outside
// the nanoseconds an int64 holds (another engine's file may have one)
// compares before or after every query value.
func (c *Condition) Time(t time.Time) bool {
	if !t.Before(minNanoTime) && !t.After(maxNanoTime) {
		return c.Int(t.UnixNano())
	}
	switch c.Op {
	case IsNull, In:
		return false
	case NotNull:
		return true
	}
	if t.Before(minNanoTime) {
		return c.Op.holds(-1)
	}
	return c.Op.holds(1)
}

// Value is the condition on any value: nil is null; a value of another
// type than the column's (a file written before the column widened) is
// converted as Convert does, and one that does not convert satisfies only
// IS NOT NULL.
func (c *Condition) Value(v any) bool {
	if v == nil {
		return c.Null()
	}
	switch c.Type {
	case Int64:
		if x, ok := v.(int64); ok {
			return c.Int(x)
		}
	case Float64:
		if x, ok := v.(float64); ok {
			return c.Float(x)
		}
	case String, JSON:
		switch x := v.(type) {
		case string:
			return c.Text(x)
		case json.RawMessage:
			return c.Text(string(x))
		}
	case Bool:
		if x, ok := v.(bool); ok {
			return c.Bool(x)
		}
	case Timestamp:
		if x, ok := v.(time.Time); ok {
			return c.Time(x)
		}
	case Date:
		if x, ok := v.(coltype.DateValue); ok {
			return c.Int(int64(x))
		}
	case TimeOfDay:
		if x, ok := v.(coltype.TimeOfDayValue); ok {
			return c.Int(int64(x))
		}
	case UUID:
		if x, ok := v.(coltype.UUIDValue); ok {
			return c.Text(string(x[:]))
		}
	case Bytes:
		if x, ok := v.([]byte); ok {
			return c.Text(string(x))
		}
	default:
		if x, ok := v.(coltype.DecimalValue); ok && c.Type.IsDecimal() && x.Scale == c.Type.Scale() {
			if c.Type.IsWideDecimal() {
				return c.Text(wideDecimal(x))
			}
			if x.High == 0 {
				return c.Int(x.Unscaled)
			}
		}
	}
	x, err := Convert(v, c.Type)
	if err != nil || x == nil {
		return c.Op == NotNull
	}
	return c.Value(x)
}

// match evaluates c on row r of col (already converted to c.Type; nil: the
// block lacks the column).
func (c *Condition) match(col *decodedCol, r int) bool {
	if col == nil || col.isNull(r) {
		return c.Null()
	}
	switch {
	case c.Type == Float64:
		return c.Float(col.floats[r])
	case holdsText(c.Type):
		return c.Text(col.strs[r])
	}
	return c.Int(col.ints[r])
}

// holds tells whether comparison result d (-1, 0, 1) satisfies op.
func (op Op) holds(d int) bool {
	switch op {
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
	case Ge:
		return d >= 0
	}
	return false
}

// Convert converts v to column type typ as a predicate's value is
// converted, and returns it as Query returns a value of typ (int64,
// float64, string, bool, time.Time, json.RawMessage, []byte, or coltype's
// DateValue, TimeOfDayValue, UUIDValue, DecimalValue). It is also how a
// value written before its column widened reads back: int64 5 is float64
// 5 in a float64 column and "5" in a string one.
func Convert(v any, typ Type) (any, error) {
	x, err := coerce(v, typ)
	if err != nil {
		return nil, err
	}
	switch typ {
	case Int64:
		return x.i, nil
	case Float64:
		return x.float(), nil
	case String:
		return x.s, nil
	case JSON:
		return json.RawMessage(x.s), nil
	case Bool:
		return x.i != 0, nil
	case Timestamp:
		return time.Unix(0, x.i).UTC(), nil
	case Date:
		return coltype.DateValue(x.i), nil
	case TimeOfDay:
		return coltype.TimeOfDayValue(x.i), nil
	case UUID:
		var u coltype.UUIDValue
		copy(u[:], x.s)
		return u, nil
	case Bytes:
		return []byte(x.s), nil
	}
	if typ.IsDecimal() {
		return decimalOf(typ, x), nil
	}
	return nil, fmt.Errorf("unknown type %v", typ)
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
