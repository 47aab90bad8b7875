package table

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/jsonw"
	"github.com/sluicedb/sluice/internal/slab"
)

// A JSON column holds a nested value (a record, an array, a map) as its
// JSON text. A Path addresses one value inside it: `.address.city`,
// `.items[0].sku`, `["k.8s"].name`. It is parsed once per query and looked
// up in each row's text by a scan that skips what it does not need (no
// unmarshal of the row, no allocation unless a key it compares has
// escapes): a where clause on a nested field costs one pass over the text
// up to the field.

// ErrBadPath is wrapped by the errors of ParsePath and SplitColumnPath.
var ErrBadPath = errors.New("bad path")

// Path is a parsed path into a JSON value. The zero Path is the value
// itself.
type Path struct {
	steps []pathStep
}

// pathStep is one key of an object or one index of an array.
type pathStep struct {
	key     string
	index   int
	isIndex bool
}

// ParsePath reads a path: steps `.name`, `."quoted name"`, `[N]` (an array
// index from 0) and `["quoted name"]`; the first step may omit its dot
// (`address.city`). An unquoted name is everything up to the next `.` or
// `[`; a quoted one is a JSON string, so any key can be named.
func ParsePath(s string) (Path, error) {
	var p Path
	rest := s
	first := true
	for rest != "" {
		switch {
		case rest[0] == '.':
			rest = rest[1:]
			fallthrough
		case first && rest[0] != '[':
			key, tail, err := pathName(rest)
			if err != nil {
				return Path{}, fmt.Errorf("%w %q: %w", ErrBadPath, s, err)
			}
			p.steps = append(p.steps, pathStep{key: key})
			rest = tail
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			inner := ""
			if end > 0 {
				inner = rest[1:end]
			}
			if strings.HasPrefix(inner, `"`) {
				key, tail, err := quotedName(rest[1:])
				if err != nil || !strings.HasPrefix(tail, "]") {
					return Path{}, fmt.Errorf("%w %q: want [\"name\"]", ErrBadPath, s)
				}
				p.steps = append(p.steps, pathStep{key: key})
				rest = tail[1:]
				break
			}
			n, err := strconv.Atoi(inner)
			if end < 0 || err != nil || n < 0 || inner[0] == '+' {
				return Path{}, fmt.Errorf("%w %q: want [index] with an index from 0, or [\"name\"]", ErrBadPath, s)
			}
			p.steps = append(p.steps, pathStep{index: n, isIndex: true})
			rest = rest[end+1:]
		default:
			return Path{}, fmt.Errorf("%w %q: want .name or [index] at %q", ErrBadPath, s, rest)
		}
		first = false
	}
	return p, nil
}

// pathName reads an unquoted or quoted name at the start of s.
func pathName(s string) (name, rest string, err error) {
	if strings.HasPrefix(s, `"`) {
		return quotedName(s)
	}
	end := strings.IndexAny(s, ".[")
	if end < 0 {
		end = len(s)
	}
	if strings.ContainsAny(s[:end], `]"`) {
		return "", "", fmt.Errorf("name %q: quote a key with ] or \" in it", s[:end])
	}
	if end == 0 {
		return "", "", errors.New("empty name (quote a key that is empty or has . or [ in it)")
	}
	return s[:end], s[end:], nil
}

// quotedName reads the JSON string at the start of s.
func quotedName(s string) (name, rest string, err error) {
	end, _, ok := jsonw.SkipString(s, 0)
	if !ok {
		return "", "", errors.New("unterminated quoted name")
	}
	if err := json.Unmarshal([]byte(s[:end]), &name); err != nil {
		return "", "", fmt.Errorf("quoted name %s: %w", s[:end], err)
	}
	return name, s[end:], nil
}

// SplitColumnPath splits a where clause's column text into a column and a
// path into it: `address.city` is column address, path .city;
// `"resource.attrs".city` (a quoted column name, for a column whose name
// has a dot or a bracket) is column resource.attrs, path .city. ok is
// false when s has no path (a plain column name). Which reading applies
// is the caller's: a text that names a column of the table is that column
// (a column named "address.city" is never a path).
func SplitColumnPath(s string) (column string, path Path, ok bool, err error) {
	rest := s
	if strings.HasPrefix(s, `"`) {
		column, rest, err = quotedName(s)
		if err != nil {
			return "", Path{}, false, fmt.Errorf("%w %q: %w", ErrBadPath, s, err)
		}
		if rest == "" {
			return column, Path{}, false, nil
		}
		if rest[0] != '.' && rest[0] != '[' {
			return "", Path{}, false, fmt.Errorf("%w %q: want .name or [index] after the quoted column", ErrBadPath, s)
		}
	} else {
		i := strings.IndexAny(s, ".[")
		if i <= 0 {
			return s, Path{}, false, nil
		}
		column, rest = s[:i], s[i:]
	}
	path, err = ParsePath(rest)
	if err != nil {
		return "", Path{}, false, err
	}
	return column, path, true, nil
}

// QuoteColumn writes a column name so that SplitColumnPath reads it as
// that column with no path: as it is, or as a JSON string when it has a
// dot or a bracket or starts with a quote.
func QuoteColumn(name string) string {
	if !strings.ContainsAny(name, ".[") && !strings.HasPrefix(name, `"`) {
		return name
	}
	q, _ := json.Marshal(name)
	return string(q)
}

// String writes p in the form ParsePath reads: `.address.city`,
// `.items[0]`, `["k.8s"]`.
func (p Path) String() string {
	var b strings.Builder
	for _, s := range p.steps {
		switch {
		case s.isIndex:
			fmt.Fprintf(&b, "[%d]", s.index)
		case s.key == "" || strings.ContainsAny(s.key, `.[]"\ `) || !strconv.CanBackquote(s.key):
			q, _ := json.Marshal(s.key)
			fmt.Fprintf(&b, "[%s]", q)
		default:
			b.WriteByte('.')
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// IsZero says whether p has no steps.
func (p Path) IsZero() bool { return len(p.steps) == 0 }

// Lookup returns the JSON text of the value p addresses in doc, or false
// when doc lacks it (a missing key, an index past the array's end, a step
// into a value of another kind, or text that is not JSON where the scan
// reads). The text is a slice of doc: a string value keeps its quotes. A
// JSON null is returned as "null". An object with a key twice gives the
// first one's value.
func (p Path) Lookup(doc string) (string, bool) {
	i := jsonw.SkipSpace(doc, 0)
	for _, s := range p.steps {
		var ok bool
		if s.isIndex {
			i, ok = arrayElem(doc, i, s.index)
		} else {
			i, ok = objectMember(doc, i, s.key)
		}
		if !ok {
			return "", false
		}
	}
	end, ok := jsonw.SkipValue(doc, i)
	if !ok {
		return "", false
	}
	return doc[i:end], true
}

// objectMember returns where the value of key starts in the object at i.
func objectMember(doc string, i int, key string) (int, bool) {
	if i >= len(doc) || doc[i] != '{' {
		return 0, false
	}
	i = jsonw.SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return 0, false
	}
	for i < len(doc) {
		end, escaped, ok := jsonw.SkipString(doc, i)
		if !ok {
			return 0, false
		}
		match := false
		if !escaped {
			match = doc[i+1:end-1] == key
		} else {
			k, ok := unquote(doc[i:end])
			match = ok && k == key
		}
		i = jsonw.SkipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return 0, false
		}
		i = jsonw.SkipSpace(doc, i+1)
		if match {
			return i, true
		}
		if i, ok = jsonw.SkipValue(doc, i); !ok {
			return 0, false
		}
		i = jsonw.SkipSpace(doc, i)
		if i >= len(doc) || doc[i] != ',' {
			return 0, false // '}': no such key, or not JSON
		}
		i = jsonw.SkipSpace(doc, i+1)
	}
	return 0, false
}

// arrayElem returns where element n starts in the array at i.
func arrayElem(doc string, i, n int) (int, bool) {
	if i >= len(doc) || doc[i] != '[' {
		return 0, false
	}
	i = jsonw.SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return 0, false
	}
	for k := 0; i < len(doc); k++ {
		if k == n {
			return i, true
		}
		var ok bool
		if i, ok = jsonw.SkipValue(doc, i); !ok {
			return 0, false
		}
		i = jsonw.SkipSpace(doc, i)
		if i >= len(doc) || doc[i] != ',' {
			return 0, false
		}
		i = jsonw.SkipSpace(doc, i+1)
	}
	return 0, false
}

// pathCond is a condition on the value a path addresses in a JSON text.
// Its semantics, as a where clause on a nested field has them:
//   - a missing path, a JSON null, a null column and text that is not
//     JSON where the path goes are null: IS NULL holds, every comparison
//     (=, !=, <, <=, >, >=, IN) is false, as on a null column;
//   - the value found decides how it compares (the query's value is text
//     in a URL; one in double quotes is the JSON string inside them, which
//     compares only with strings): a number compares as a number (exactly, as integers, when
//     both are integers that fit 64 bits), and only with a query value that
//     is a number; a string compares as a string column's value does
//     (CompareText); true and false only with = != IN and a query value
//     true or false; an object or an array only with = != IN, as its JSON
//     text exactly as stored;
//   - a value of a kind the query's value cannot compare with satisfies no
//     comparison, != included (as a failed cast in SQL).
type pathCond struct {
	path     Path
	operand  pathOperand   // the value of =, !=, <, <=, >, >=
	operands []pathOperand // the values of IN, nulls left out
}

// pathOperand is a query's value in each form a found value may compare
// with.
type pathOperand struct {
	text   string
	num    float64
	i      int64
	isNum  bool
	isInt  bool
	b      bool
	isBool bool
}

func compilePath(p Predicate, typ Type) (*pathCond, error) {
	if typ != JSON && typ != String {
		return nil, fmt.Errorf("path %s into column %q of type %v: only json and string columns hold nested values", p.Path, p.Column, typ)
	}
	path, err := ParsePath(p.Path)
	if err != nil {
		return nil, err
	}
	pc := &pathCond{path: path}
	switch p.Op {
	case IsNull, NotNull:
	case Eq, Ne, Lt, Le, Gt, Ge:
		if p.Value == nil {
			return nil, fmt.Errorf("%s with a null value (use IS NULL)", p.Op)
		}
		if pc.operand, err = newPathOperand(p.Value); err != nil {
			return nil, err
		}
	case In:
		for _, v := range p.Values {
			if v == nil {
				continue
			}
			o, err := newPathOperand(v)
			if err != nil {
				return nil, err
			}
			pc.operands = append(pc.operands, o)
		}
	default:
		return nil, fmt.Errorf("unknown operator %q", p.Op)
	}
	return pc, nil
}

func newPathOperand(v any) (pathOperand, error) {
	var o pathOperand
	switch x := v.(type) {
	case string:
		if len(x) >= 2 && x[0] == '"' && x[len(x)-1] == '"' {
			// A JSON string (`"Oslo"`, `"10"`): that text, and only text.
			if s, ok := unquote(x); ok {
				o.text = s
				return o, nil
			}
		}
		o.text = x
	case json.Number:
		o.text = x.String()
	case float64:
		o.text = strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		o.text = strconv.FormatFloat(float64(x), 'f', -1, 32)
	case int:
		o.text = strconv.Itoa(x)
	case int64:
		o.text = strconv.FormatInt(x, 10)
	case bool:
		o.text = strconv.FormatBool(x)
	default:
		return o, fmt.Errorf("%T %v cannot be compared with a nested value (want a string, number or bool)", v, v)
	}
	if f, ok := decimalNumber(o.text); ok {
		o.num, o.isNum = f, true
		if i, err := strconv.ParseInt(o.text, 10, 64); err == nil {
			o.i, o.isInt = i, true
		}
	}
	if b, err := strconv.ParseBool(o.text); err == nil && (o.text == "true" || o.text == "false") {
		o.b, o.isBool = b, true
	}
	return o, nil
}

// holds evaluates op on the value the path addresses in doc.
func (pc *pathCond) holds(op Op, doc string) bool {
	raw, ok := pc.path.Lookup(doc)
	if !ok || raw == "null" {
		return op == IsNull
	}
	switch op {
	case IsNull:
		return false
	case NotNull:
		return true
	case In:
		for i := range pc.operands {
			if d, ok := compareFound(raw, &pc.operands[i], true); ok && d == 0 {
				return true
			}
		}
		return false
	}
	d, ok := compareFound(raw, &pc.operand, op == Eq || op == Ne)
	return ok && op.holds(d)
}

// compareFound orders the found JSON value raw against o; ok is false
// when they do not compare (equality: only = != IN are asked).
func compareFound(raw string, o *pathOperand, equality bool) (int, bool) {
	switch raw[0] {
	case '"':
		s := raw[1 : len(raw)-1]
		if strings.IndexByte(s, '\\') >= 0 {
			var ok bool
			if s, ok = unquote(raw); !ok {
				return 0, false
			}
		}
		if equality {
			return strings.Compare(s, o.text), true
		}
		return CompareText(s, o.text)
	case 't', 'f':
		if !equality || !o.isBool {
			return 0, false
		}
		if (raw == "true") == o.b {
			return 0, true
		}
		return 1, true
	case '{', '[':
		if !equality {
			return 0, false
		}
		return strings.Compare(raw, o.text), true
	}
	if !o.isNum {
		return 0, false
	}
	if o.isInt {
		if x, ok := jsonInt(raw); ok {
			return cmp.Compare(x, o.i), true
		}
	}
	x, ok := decimalNumber(raw)
	if !ok {
		return 0, false
	}
	switch {
	case x < o.num:
		return -1, true
	case x > o.num:
		return 1, true
	}
	return 0, true
}

// unquote decodes a JSON string that has escapes (kept apart so that the
// common case, no escapes, does not move a string to the heap).
func unquote(raw string) (string, bool) {
	var s string
	err := json.Unmarshal([]byte(raw), &s)
	return s, err == nil
}

// jsonInt parses raw when it is an integer that fits 64 bits, checking its
// characters first: ParseInt's error allocates, and a fraction is common.
func jsonInt(raw string) (int64, bool) {
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; (c < '0' || c > '9') && !(i == 0 && c == '-') {
			return 0, false
		}
	}
	x, err := strconv.ParseInt(raw, 10, 64)
	return x, err == nil
}

// parse is cp's path, checked against the type of its column.
func (cp ColumnPath) parse(typ Type) (*Path, error) {
	if typ != JSON && typ != String {
		return nil, fmt.Errorf("path %s into column %q of type %v: only json and string columns hold nested values", cp.Path, cp.Column, typ)
	}
	path, err := ParsePath(cp.Path)
	if err != nil {
		return nil, err
	}
	return &path, nil
}

// foundKind is the kind of the value a path column found in a row.
type foundKind uint8

const (
	foundNull foundKind = iota
	foundString
	foundNumber
	foundTrue
	foundFalse
	foundRaw // an object or an array
)

// foundValues are one path column's values for the matching rows of a
// block, by row: each kind's values in an array of its own, boxed from a
// slab (internal/slab) as a plain column's are, so that a row costs its
// lookup and nothing more (a string with escapes: its unescaped copy).
type foundValues struct {
	kinds []foundKind
	strs  []string
	nums  []json.Number
	raws  []json.RawMessage
	// The slabs over the arrays above, made once the arrays are filled.
	strSlab, numSlab, rawSlab slab.Slab
}

// fill looks path up in the text of column c at each of rows (the block
// has n rows). The arrays are f's, grown when short: a caller whose
// values outlive the block's job gives a new f for each block.
func (f *foundValues) fill(c *decodedCol, n int, rows []int32, path *Path) {
	// Each kind's array is grown when a row first needs it: a column of
	// strings makes no array of numbers.
	f.kinds = grow(f.kinds, n)
	f.strs, f.nums, f.raws = f.strs[:0], f.nums[:0], f.raws[:0]
	// The text of a string column was never checked as JSON: an object or
	// an array found in it is answered only when it is JSON (the answer
	// embeds it as it is); a json column's text was checked when stored.
	checkRaw := c != nil && c.typ != JSON
	for _, r := range rows {
		f.kinds[r] = foundNull
		if c == nil || c.isNull(int(r)) {
			continue
		}
		kind, text := found(path, c.strs[r], checkRaw)
		switch kind {
		case foundString:
			if len(f.strs) < n {
				f.strs = grow(f.strs, n)
			}
			f.strs[r] = text
		case foundNumber:
			if len(f.nums) < n {
				f.nums = grow(f.nums, n)
			}
			f.nums[r] = json.Number(text)
		case foundRaw:
			if len(f.raws) < n {
				f.raws = grow(f.raws, n)
			}
			f.raws[r] = json.RawMessage(text)
		}
		f.kinds[r] = kind
	}
	f.strSlab, f.numSlab, f.rawSlab = slab.Of(f.strs), slab.Of(f.nums), slab.Of(f.raws)
}

// at is row r's value (r one of the rows fill was given).
func (f *foundValues) at(r int) any {
	switch f.kinds[r] {
	case foundString:
		return f.strSlab.At(r)
	case foundNumber:
		return f.numSlab.At(r)
	case foundTrue:
		return true
	case foundFalse:
		return false
	case foundRaw:
		return f.rawSlab.At(r)
	}
	return nil
}

// found is the kind of the value path addresses in doc, and its text: a
// string's unescaped, a number's, an object's or an array's JSON text
// (checked as JSON when checkRaw: the text of a string column). A missing
// path, a JSON null and text that is not JSON are foundNull.
func found(path *Path, doc string, checkRaw bool) (foundKind, string) {
	raw, ok := path.Lookup(doc)
	if !ok {
		return foundNull, ""
	}
	switch raw[0] {
	case '"':
		s := raw[1 : len(raw)-1]
		if strings.IndexByte(s, '\\') >= 0 {
			if s, ok = unquote(raw); !ok {
				return foundNull, ""
			}
		}
		return foundString, s
	case '{', '[':
		if checkRaw && !json.Valid([]byte(raw)) {
			return foundNull, ""
		}
		return foundRaw, raw
	case 't', 'f', 'n':
		switch raw {
		case "true":
			return foundTrue, ""
		case "false":
			return foundFalse, ""
		}
		return foundNull, ""
	}
	if jsonw.IsNumber(raw) {
		return foundNumber, raw
	}
	return foundNull, ""
}

// PathReader answers a query's path columns for a reader of plain columns
// (the cold read, which reads the Iceberg table's columns as they are):
// Read are the columns to read instead of the answer's (each path column's
// json column in its place, or after them when the answer has it
// already), and Row makes the answer's row from a row of Read. The paths
// are parsed once; a row costs a lookup in its text per path column.
type PathReader struct {
	Read []Column
	out  []pathOut
}

// pathOut is where an answer's column comes from in a row of Read.
type pathOut struct {
	at       int   // its index in Read
	path     *Path // nil: the value itself
	checkRaw bool
}

// NewPathReader is the reader of cols (the answer's columns of q) from
// plain columns, whose types types gives; nil when q has no path column.
func NewPathReader(q Query, cols []Column, types map[string]Type) (*PathReader, error) {
	if len(q.Paths) == 0 {
		return nil, nil
	}
	r := &PathReader{}
	index := func(name string, typ Type) int {
		for i, c := range r.Read {
			if c.Name == name {
				return i
			}
		}
		r.Read = append(r.Read, Column{Name: name, Type: typ})
		return len(r.Read) - 1
	}
	hasPath := false
	for _, c := range cols {
		if _, ok := q.Paths[c.Name]; !ok {
			r.out = append(r.out, pathOut{at: index(c.Name, c.Type)})
		}
	}
	k := 0
	for _, c := range cols {
		cp, ok := q.Paths[c.Name]
		if !ok {
			k++
			continue
		}
		hasPath = true
		typ, known := types[cp.Column]
		if !known {
			typ = JSON // a column no file has: read as null
		}
		path, err := cp.parse(typ)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %w", ErrBadQuery, c.Name, err)
		}
		o := pathOut{at: index(cp.Column, typ), path: path, checkRaw: typ != JSON}
		r.out = slices.Insert(r.out, k, o)
		k++
	}
	if !hasPath {
		return nil, nil
	}
	return r, nil
}

// Row is the answer's row for a row of Read, in dst (reused).
func (r *PathReader) Row(dst, read []any) []any {
	dst = dst[:0]
	for _, o := range r.out {
		v := read[o.at]
		if o.path == nil || v == nil {
			dst = append(dst, v)
			continue
		}
		var doc string
		switch x := v.(type) {
		case string:
			doc = x
		case json.RawMessage:
			doc = string(x)
		default:
			dst = append(dst, nil)
			continue
		}
		kind, text := found(o.path, doc, o.checkRaw)
		switch kind {
		case foundString:
			dst = append(dst, text)
		case foundNumber:
			dst = append(dst, json.Number(text))
		case foundTrue:
			dst = append(dst, true)
		case foundFalse:
			dst = append(dst, false)
		case foundRaw:
			dst = append(dst, json.RawMessage(text))
		default:
			dst = append(dst, nil)
		}
	}
	return dst
}
