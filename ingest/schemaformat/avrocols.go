package schemaformat

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/twmb/avro"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/jsonw"
)

// The Avro column decoder walks the binary encoding itself, from a plan
// compiled once per schema id: each top-level field is a column, each
// value goes into its cell without a map or a boxed value per row (a
// timestamp is the exception: the column's cell holds a time.Time), and a
// nested record, array or map is written as JSON text as it is read.
// twmb/avro only parses the schema.

// avroOp is what a plan node reads.
type avroOp uint8

const (
	avroNull avroOp = iota
	avroBool
	avroInt // int or long: one zigzag varint
	avroFloat
	avroDouble
	avroBytes
	avroString
	avroFixed
	avroEnum
	avroRecord
	avroArray
	avroMap
	avroUnion
	avroDate
	avroTimeMillis
	avroTimeMicros
	avroTimestampMillis
	avroTimestampMicros
	avroTimestampNanos
	avroDecimalBytes
	avroDecimalFixed
	avroUUIDFixed
	avroUUIDString // a string with the uuid logical type
	avroDuration
)

// avroNode is the plan of one schema node.
type avroNode struct {
	op        avroOp
	size      int // fixed's size
	scale     int // decimal's scale
	precision int // decimal's precision
	symbols   []string
	fields    []avroPlanField
	items     *avroNode // array items, map values
	// branches are a union's; nullable is the index of its null branch in
	// a ["null", T] union (-1 otherwise).
	branches []*avroNode
}

type avroPlanField struct {
	name string
	// key is the field's name as a JSON object key with its colon.
	key  []byte
	node *avroNode
}

// avroColumns is the plan of one writer schema: its top-level fields.
type avroColumns struct {
	fields []avroPlanField
}

// maxAvroDepth bounds the nesting a body may reach (a recursive schema
// could otherwise recurse once per byte of a hostile body).
const maxAvroDepth = 256

// maxZeroWidthItems bounds the items of one array or map block when they
// may take no bytes (nulls, empty records): other counts are bounded by
// the bytes left.
const maxZeroWidthItems = 1 << 16

// compileAvroColumns plans the column decoding of root (a record).
func compileAvroColumns(root *avro.SchemaNode) (*avroColumns, error) {
	c := avroCompiler{named: map[string]*avroNode{}}
	top, err := c.node(root, "")
	if err != nil {
		return nil, err
	}
	return &avroColumns{fields: top.fields}, nil
}

type avroCompiler struct {
	// named are the named types (records, enums, fixed) by full and short
	// name, for the nodes that refer to them.
	named map[string]*avroNode
}

func fullName(n *avro.SchemaNode) string {
	if strings.Contains(n.Name, ".") || n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "." + n.Name
}

func (c *avroCompiler) define(n *avro.SchemaNode, p *avroNode) {
	c.named[fullName(n)] = p
	short := n.Name[strings.LastIndexByte(n.Name, '.')+1:]
	if _, taken := c.named[short]; !taken {
		c.named[short] = p
	}
}

func (c *avroCompiler) node(n *avro.SchemaNode, ns string) (*avroNode, error) {
	switch n.Type {
	case "null":
		return &avroNode{op: avroNull}, nil
	case "boolean":
		return &avroNode{op: avroBool}, nil
	case "int":
		switch n.LogicalType {
		case "date":
			return &avroNode{op: avroDate}, nil
		case "time-millis":
			return &avroNode{op: avroTimeMillis}, nil
		}
		return &avroNode{op: avroInt}, nil
	case "long":
		switch n.LogicalType {
		case "time-micros":
			return &avroNode{op: avroTimeMicros}, nil
		case "timestamp-millis", "local-timestamp-millis":
			return &avroNode{op: avroTimestampMillis}, nil
		case "timestamp-micros", "local-timestamp-micros":
			return &avroNode{op: avroTimestampMicros}, nil
		case "timestamp-nanos", "local-timestamp-nanos":
			return &avroNode{op: avroTimestampNanos}, nil
		}
		return &avroNode{op: avroInt}, nil
	case "float":
		return &avroNode{op: avroFloat}, nil
	case "double":
		return &avroNode{op: avroDouble}, nil
	case "bytes":
		if n.LogicalType == "decimal" {
			return &avroNode{op: avroDecimalBytes, scale: n.Scale, precision: n.Precision}, nil
		}
		return &avroNode{op: avroBytes}, nil
	case "string":
		if n.LogicalType == "uuid" {
			return &avroNode{op: avroUUIDString}, nil
		}
		return &avroNode{op: avroString}, nil
	case "fixed":
		p := &avroNode{op: avroFixed, size: n.Size}
		switch {
		case n.LogicalType == "decimal":
			p.op, p.scale, p.precision = avroDecimalFixed, n.Scale, n.Precision
		case n.LogicalType == "uuid" && n.Size == 16:
			p.op = avroUUIDFixed
		case n.LogicalType == "duration" && n.Size == 12:
			p.op = avroDuration
		}
		c.define(n, p)
		return p, nil
	case "enum":
		p := &avroNode{op: avroEnum, symbols: n.Symbols}
		c.define(n, p)
		return p, nil
	case "record", "error":
		p := &avroNode{op: avroRecord}
		c.define(n, p) // before the fields: a field may refer to its record
		inner := n.Namespace
		for i := range n.Fields {
			f := &n.Fields[i]
			fn, err := c.node(&f.Type, inner)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name, err)
			}
			p.fields = append(p.fields, avroPlanField{name: f.Name, key: append(jsonw.AppendString(nil, f.Name), ':'), node: fn})
		}
		return p, nil
	case "array", "map":
		child := n.Items
		p := &avroNode{op: avroArray}
		if n.Type == "map" {
			child, p.op = n.Values, avroMap
		}
		if child == nil {
			return nil, fmt.Errorf("%s without its item type", n.Type)
		}
		it, err := c.node(child, ns)
		if err != nil {
			return nil, err
		}
		p.items = it
		return p, nil
	case "union":
		p := &avroNode{op: avroUnion}
		for i := range n.Branches {
			b, err := c.node(&n.Branches[i], ns)
			if err != nil {
				return nil, err
			}
			p.branches = append(p.branches, b)
		}
		return p, nil
	}
	// A reference to a named type defined before.
	for _, name := range []string{n.Type, ns + "." + n.Type} {
		if p, ok := c.named[name]; ok {
			return p, nil
		}
	}
	return nil, fmt.Errorf("avro type %q unknown", n.Type)
}

// errShort: the body ends inside a value.
var errShort = errors.New("unexpected end of the body")

// avroReader reads a body, keeping its offset for errors.
type avroReader struct {
	b     []byte
	p     int
	depth int
}

func (r *avroReader) fail(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", r.p, fmt.Sprintf(format, args...))
}

func (r *avroReader) long() (int64, error) {
	u, n := binary.Uvarint(r.b[r.p:])
	if n <= 0 {
		if n == 0 {
			return 0, fmt.Errorf("at byte %d: %w", r.p, errShort)
		}
		return 0, r.fail("varint over 64 bits")
	}
	r.p += n
	return int64(u>>1) ^ -int64(u&1), nil
}

// take returns the next n bytes.
func (r *avroReader) take(n int) ([]byte, error) {
	if n > len(r.b)-r.p {
		return nil, fmt.Errorf("at byte %d: %d bytes wanted, %d left: %w", r.p, n, len(r.b)-r.p, errShort)
	}
	b := r.b[r.p : r.p+n]
	r.p += n
	return b, nil
}

// lengthed reads a length and that many bytes.
func (r *avroReader) lengthed() ([]byte, error) {
	at := r.p
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.b)-r.p) {
		r.p = at
		return nil, r.fail("length %d with %d bytes left", n, len(r.b)-r.p)
	}
	return r.take(int(n))
}

// blockCount reads an array or map block's item count (a negative count
// is followed by the block's size in bytes).
func (r *avroReader) blockCount() (int64, error) {
	at := r.p
	n, err := r.long()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if n == math.MinInt64 {
			r.p = at
			return 0, r.fail("block count %d", n)
		}
		n = -n
		if _, err := r.long(); err != nil {
			return 0, err
		}
	}
	if n > int64(len(r.b)-r.p) && n > maxZeroWidthItems {
		r.p = at
		return 0, r.fail("block of %d items with %d bytes left", n, len(r.b)-r.p)
	}
	return n, nil
}

func (r *avroReader) double() (float64, error) {
	b, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
}

// float reads a float as its shortest decimal form widened (0.1f is 0.1).
func (r *avroReader) float() (float64, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return widenFloat32(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
}

func widenFloat32(f float32) float64 {
	x, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return x
}

func (r *avroReader) boolean() (bool, error) {
	b, err := r.take(1)
	if err != nil {
		return false, err
	}
	return b[0] == 1, nil // another byte is false, as Java's reader takes it
}

func (r *avroReader) int32() (int64, error) {
	at := r.p
	v, err := r.long()
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		r.p = at
		return 0, r.fail("int %d over 32 bits", v)
	}
	return v, err
}

// branch reads a union's branch index.
func (r *avroReader) branch(n *avroNode) (*avroNode, error) {
	at := r.p
	i, err := r.long()
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= int64(len(n.branches)) {
		r.p = at
		return nil, r.fail("union branch %d of %d", i, len(n.branches))
	}
	return n.branches[i], nil
}

// appendRow decodes body into row row of cb.
func (a *avroColumns) appendRow(body []byte, cb *colbatch.Batch, row int, cache *columnCache) error {
	cols := cache.columns(a, a.names, cb)
	r := avroReader{b: body}
	for i := range a.fields {
		f := &a.fields[i]
		cell, err := r.cell(f.node, cb, cache)
		if err != nil {
			return fmt.Errorf("field %s: %w", f.name, err)
		}
		cb.Cols[cols[i]].Cells[row] = cell
	}
	if r.p < len(body) {
		return fmt.Errorf("at byte %d: %d bytes after the record", r.p, len(body)-r.p)
	}
	return nil
}

// names yields the columns' names.
func (a *avroColumns) names(yield func(string) bool) {
	for i := range a.fields {
		if !yield(a.fields[i].name) {
			return
		}
	}
}

// cell reads one top-level field's value as its column's cell.
func (r *avroReader) cell(n *avroNode, cb *colbatch.Batch, cache *columnCache) (colbatch.Cell, error) {
	switch n.op {
	case avroNull:
		return colbatch.Cell{Kind: colbatch.Null}, nil
	case avroBool:
		v, err := r.boolean()
		if v {
			return colbatch.Cell{Kind: colbatch.Bool, I: 1}, err
		}
		return colbatch.Cell{Kind: colbatch.Bool}, err
	case avroInt:
		v, err := r.long()
		return colbatch.Cell{Kind: colbatch.Int, I: v}, err
	case avroFloat:
		v, err := r.float()
		return colbatch.Cell{Kind: colbatch.Float, I: int64(math.Float64bits(v))}, err
	case avroDouble:
		v, err := r.double()
		return colbatch.Cell{Kind: colbatch.Float, I: int64(math.Float64bits(v))}, err
	case avroString:
		b, err := r.lengthed()
		return colbatch.Cell{Kind: colbatch.String, S: cache.str(b)}, err
	case avroEnum:
		s, err := r.enum(n)
		return colbatch.Cell{Kind: colbatch.String, S: s}, err
	case avroUnion:
		b, err := r.branch(n)
		if err != nil {
			return colbatch.Cell{}, err
		}
		return r.cell(b, cb, cache)
	case avroDate:
		// A date column's value (a timestamp column created before date
		// columns takes it as its midnight, as before).
		v, err := r.int32()
		if err != nil {
			return colbatch.Cell{}, err
		}
		return cb.CellOf(coltype.DateValue(v)), nil
	case avroTimestampMillis, avroTimestampMicros, avroTimestampNanos:
		t, err := r.time(n)
		if err != nil {
			return colbatch.Cell{}, err
		}
		return cache.timeCell(cb, t), nil
	case avroTimeMillis, avroTimeMicros, avroBytes, avroFixed, avroUUIDFixed, avroUUIDString, avroDecimalBytes, avroDecimalFixed:
		v, err := r.native(n)
		if err != nil {
			return colbatch.Cell{}, err
		}
		if s, ok := v.(string); ok {
			return colbatch.Cell{Kind: colbatch.String, S: s}, nil
		}
		return cb.CellOf(v), nil
	case avroRecord, avroArray, avroMap, avroDuration:
		buf, err := r.json(nil, n)
		if err != nil {
			return colbatch.Cell{}, err
		}
		return cb.CellOf(jsonRaw(buf)), nil
	}
	// The rest are text: bytes, fixed, decimals, times, uuids.
	var scratch [64]byte
	buf, err := r.text(scratch[:0], n)
	return colbatch.Cell{Kind: colbatch.String, S: string(buf)}, err
}

func (r *avroReader) enum(n *avroNode) (string, error) {
	at := r.p
	i, err := r.long()
	if err != nil {
		return "", err
	}
	if i < 0 || i >= int64(len(n.symbols)) {
		r.p = at
		return "", r.fail("enum index %d of %d symbols", i, len(n.symbols))
	}
	return n.symbols[i], nil
}

// native reads a top-level field's time of day, bytes, uuid or decimal
// as the value of its native column (coltype's; a string column created
// before those columns takes their old text from it: base64, the uuid's,
// HH:MM:SS.ffffff, the exact decimal). A decimal sluice cannot hold as one
// (a schema's precision over coltype.MaxDecimalPrecision digits, or an
// unscaled value over 16 bytes) stays its exact text, and a uuid string
// that is not one its text.
func (r *avroReader) native(n *avroNode) (any, error) {
	switch n.op {
	case avroTimeMillis:
		v, err := r.int32()
		if err == nil && (v < 0 || v >= 86_400_000) {
			return nil, r.fail("time-millis %d is outside a day", v)
		}
		return coltype.TimeOfDayValue(v * 1000), err
	case avroTimeMicros:
		v, err := r.long()
		if err == nil && (v < 0 || v >= coltype.MicrosPerDay) {
			return nil, r.fail("time-micros %d is outside a day", v)
		}
		return coltype.TimeOfDayValue(v), err
	case avroBytes:
		b, err := r.lengthed()
		return coltype.BytesValue(b), err
	case avroFixed:
		b, err := r.take(n.size)
		return coltype.BytesValue(b), err
	case avroUUIDFixed:
		b, err := r.take(16)
		if err != nil {
			return nil, err
		}
		return coltype.UUIDValue(b), nil
	case avroUUIDString:
		b, err := r.lengthed()
		if err != nil {
			return nil, err
		}
		if u, err := coltype.ParseUUID(string(b)); err == nil {
			return u, nil
		}
		return string(b), nil
	}
	// A decimal.
	var b []byte
	var err error
	if n.op == avroDecimalBytes {
		b, err = r.lengthed()
	} else {
		b, err = r.take(n.size)
	}
	if err != nil {
		return nil, err
	}
	if coltype.CheckDecimal(n.precision, n.scale) == nil {
		d, ok := coltype.DecimalOfBigEndian(b, n.scale)
		if v, narrow := unscaled(b); narrow {
			d, ok = coltype.DecimalValue{Unscaled: v, Scale: n.scale}, true
		}
		// More digits than the schema's precision (bytes can hold them)
		// are its text, as the map decoder gives them.
		if _, err := d.Rescale(n.precision, n.scale); ok && err == nil {
			d.Precision = n.precision
			return d, nil
		}
	}
	text, err := r.decimal(nil, b, n.scale)
	return string(text), err
}

// unscaled is the big-endian two's complement integer b when it fits an
// int64.
func unscaled(b []byte) (int64, bool) {
	if len(b) > 8 {
		return 0, false
	}
	var u uint64
	for _, x := range b {
		u = u<<8 | uint64(x)
	}
	v := int64(u)
	if len(b) > 0 && len(b) < 8 && b[0]&0x80 != 0 {
		v -= 1 << (8 * len(b)) // sign-extend
	}
	return v, true
}

// time reads a date or timestamp as UTC time.
func (r *avroReader) time(n *avroNode) (time.Time, error) {
	if n.op == avroDate {
		v, err := r.int32()
		return time.Unix(v*86400, 0).UTC(), err
	}
	v, err := r.long()
	if err != nil {
		return time.Time{}, err
	}
	switch n.op {
	case avroTimestampMillis:
		return time.UnixMilli(v).UTC(), nil
	case avroTimestampMicros:
		return time.UnixMicro(v).UTC(), nil
	}
	return time.Unix(v/1e9, v%1e9).UTC(), nil
}

// text appends the text of a value whose column or JSON value is a string
// (unquoted).
func (r *avroReader) text(buf []byte, n *avroNode) ([]byte, error) {
	switch n.op {
	case avroBytes:
		b, err := r.lengthed()
		return base64.StdEncoding.AppendEncode(buf, b), err
	case avroFixed:
		b, err := r.take(n.size)
		return base64.StdEncoding.AppendEncode(buf, b), err
	case avroUUIDFixed:
		b, err := r.take(16)
		if err != nil {
			return buf, err
		}
		return appendUUID(buf, b), nil
	case avroDecimalBytes:
		b, err := r.lengthed()
		if err != nil {
			return buf, err
		}
		return r.decimal(buf, b, n.scale)
	case avroDecimalFixed:
		b, err := r.take(n.size)
		if err != nil {
			return buf, err
		}
		return r.decimal(buf, b, n.scale)
	case avroTimeMillis:
		v, err := r.int32()
		return appendTimeOfDay(buf, time.Duration(v)*time.Millisecond), err
	case avroTimeMicros:
		at := r.p
		v, err := r.long()
		if err != nil {
			return buf, err
		}
		if v > math.MaxInt64/int64(time.Microsecond) || v < math.MinInt64/int64(time.Microsecond) {
			r.p = at
			return buf, r.fail("time-micros %d overflows", v)
		}
		return appendTimeOfDay(buf, time.Duration(v)*time.Microsecond), nil
	}
	return buf, r.fail("no text for avro op %d", n.op)
}

// maxDecimalBytes bounds a decimal's unscaled value (as twmb/avro does):
// a longer one would be a costly base conversion of a hostile body.
const maxDecimalBytes = 1 << 10

func (r *avroReader) decimal(buf []byte, b []byte, scale int) ([]byte, error) {
	if len(b) > maxDecimalBytes {
		return buf, r.fail("decimal of %d bytes, over %d", len(b), maxDecimalBytes)
	}
	return appendDecimal(buf, b, scale), nil
}

// appendDecimal appends the unscaled big-endian two's complement integer
// b divided by 10^scale, as big.Rat's FloatString(scale) writes it.
func appendDecimal(buf []byte, b []byte, scale int) []byte {
	if len(b) <= 8 {
		var u uint64
		for _, x := range b {
			u = u<<8 | uint64(x)
		}
		v := int64(u)
		if len(b) > 0 && len(b) < 8 && b[0]&0x80 != 0 {
			v -= 1 << (8 * len(b)) // sign-extend
		}
		if v != math.MinInt64 {
			return appendScaled(buf, v, scale)
		}
	}
	i := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		i.Sub(i, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	return append(buf, new(big.Rat).SetFrac(i, den).FloatString(scale)...)
}

// appendScaled appends v/10^scale with scale digits after the point.
func appendScaled(buf []byte, v int64, scale int) []byte {
	if scale <= 0 {
		return strconv.AppendInt(buf, v, 10)
	}
	neg := v < 0
	if neg {
		v = -v
	}
	var digits [24]byte
	d := strconv.AppendInt(digits[:0], v, 10)
	if neg {
		buf = append(buf, '-')
	}
	if len(d) <= scale {
		buf = append(buf, '0', '.')
		for range scale - len(d) {
			buf = append(buf, '0')
		}
		return append(buf, d...)
	}
	buf = append(buf, d[:len(d)-scale]...)
	buf = append(buf, '.')
	return append(buf, d[len(d)-scale:]...)
}

const hexDigits = "0123456789abcdef"

// appendUUID appends the canonical text of a 16-byte uuid.
func appendUUID(buf []byte, b []byte) []byte {
	for i, x := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			buf = append(buf, '-')
		}
		buf = append(buf, hexDigits[x>>4], hexDigits[x&15])
	}
	return buf
}

// appendTimeOfDay appends d as timeOfDay writes it.
func appendTimeOfDay(buf []byte, d time.Duration) []byte {
	return time.Unix(0, 0).UTC().Add(d).AppendFormat(buf, "15:04:05.000000")
}

// json appends the JSON of one value of n.
func (r *avroReader) json(buf []byte, n *avroNode) ([]byte, error) {
	switch n.op {
	case avroNull:
		return append(buf, "null"...), nil
	case avroBool:
		v, err := r.boolean()
		return strconv.AppendBool(buf, v), err
	case avroInt:
		v, err := r.long()
		return strconv.AppendInt(buf, v, 10), err
	case avroFloat, avroDouble:
		var v float64
		var err error
		if n.op == avroFloat {
			v, err = r.float()
		} else {
			v, err = r.double()
		}
		if err != nil {
			return buf, err
		}
		at := r.p
		buf, err = jsonw.AppendFloat(buf, v, 64)
		if err != nil {
			r.p = at
			return buf, r.fail("%v", err)
		}
		return buf, nil
	case avroString, avroUUIDString:
		b, err := r.lengthed()
		return jsonw.AppendString(buf, unsafeString(b)), err
	case avroEnum:
		s, err := r.enum(n)
		return jsonw.AppendString(buf, s), err
	case avroUnion:
		b, err := r.branch(n)
		if err != nil {
			return buf, err
		}
		return r.json(buf, b)
	case avroDate, avroTimestampMillis, avroTimestampMicros, avroTimestampNanos:
		t, err := r.time(n)
		if err != nil {
			return buf, err
		}
		buf = append(buf, '"')
		buf = t.AppendFormat(buf, time.RFC3339Nano)
		return append(buf, '"'), nil
	case avroDuration:
		b, err := r.take(12)
		if err != nil {
			return buf, err
		}
		buf = append(buf, `{"months":`...)
		buf = strconv.AppendUint(buf, uint64(binary.LittleEndian.Uint32(b)), 10)
		buf = append(buf, `,"days":`...)
		buf = strconv.AppendUint(buf, uint64(binary.LittleEndian.Uint32(b[4:])), 10)
		buf = append(buf, `,"milliseconds":`...)
		buf = strconv.AppendUint(buf, uint64(binary.LittleEndian.Uint32(b[8:])), 10)
		return append(buf, '}'), nil
	case avroRecord, avroArray, avroMap:
		if r.depth >= maxAvroDepth {
			return buf, r.fail("nested over %d levels", maxAvroDepth)
		}
		r.depth++
		defer func() { r.depth-- }()
		switch n.op {
		case avroRecord:
			buf = append(buf, '{')
			for i := range n.fields {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, n.fields[i].key...)
				var err error
				if buf, err = r.json(buf, n.fields[i].node); err != nil {
					return buf, fmt.Errorf("%s: %w", n.fields[i].name, err)
				}
			}
			return append(buf, '}'), nil
		case avroArray:
			return r.jsonBlocks(buf, n, '[', ']')
		default:
			return r.jsonBlocks(buf, n, '{', '}')
		}
	}
	buf = append(buf, '"')
	buf, err := r.text(buf, n)
	return append(buf, '"'), err
}

// jsonBlocks appends an array's or a map's blocks as a JSON array or
// object.
func (r *avroReader) jsonBlocks(buf []byte, n *avroNode, open, close byte) ([]byte, error) {
	buf = append(buf, open)
	first := true
	for {
		count, err := r.blockCount()
		if err != nil {
			return buf, err
		}
		if count == 0 {
			return append(buf, close), nil
		}
		for range count {
			if !first {
				buf = append(buf, ',')
			}
			first = false
			if n.op == avroMap {
				k, err := r.lengthed()
				if err != nil {
					return buf, err
				}
				buf = jsonw.AppendString(buf, unsafeString(k))
				buf = append(buf, ':')
			}
			if buf, err = r.json(buf, n.items); err != nil {
				return buf, err
			}
		}
	}
}

// unsafeString is b as a string for a call that only reads it (appending
// its JSON): no copy per value.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// jsonRaw is JSON text as a cell value: the table takes it as a json
// column's value.
func jsonRaw(b []byte) json.RawMessage { return json.RawMessage(b) }
