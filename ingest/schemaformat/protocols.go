package schemaformat

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// The Protobuf column decoder reads the wire format itself (protowire),
// from a plan made once per message type: a field of a scalar type, an
// enum, a google.protobuf.Timestamp or a wrapper goes into its column's
// cell as it is read. A message that sets a field the plan does not read
// itself (a repeated field, a map, another message type, or a second
// occurrence of a Timestamp or a wrapper, which Protobuf merges) is
// decoded by dynamicpb as a whole, as the map decoder does, and so is
// every message of a file that is not proto3 (proto2's required fields,
// defaults and closed enums, editions' features).

// protoOp is how a planned field is read.
type protoOp uint8

const (
	protoSlow protoOp = iota // through dynamicpb
	protoBool
	protoInt32 // int32, enum (varint, as int32)
	protoInt64
	protoUint32
	protoUint64
	protoSint32
	protoSint64
	protoFixed32
	protoSfixed32
	protoFixed64
	protoSfixed64
	protoFloat
	protoDouble
	protoString
	protoBytes
	protoEnum
	protoTimestamp
	protoWrapper
	protoDate      // google.type.Date (googletype.go)
	protoTimeOfDay // google.type.TimeOfDay
)

// protoCol is the plan of one field.
type protoCol struct {
	name string
	op   protoOp
	wire protowire.Type
	// zero is the cell of the field when the message does not set it.
	zero colbatch.Cell
	// enums are an enum's names by number.
	enums map[int32]string
	// inner is a wrapper's value field.
	inner *protoCol
	// oneof are the other members of the field's oneof: setting the field
	// clears them.
	oneof []int
}

// protoPlan is the column plan of one message type.
type protoPlan struct {
	md protoreflect.MessageDescriptor
	// planned is false for a message decoded by dynamicpb always.
	planned bool
	cols    []protoCol
	// byNumber[n] is the index in cols of field number n, -1 if none
	// (numbers up to len(byNumber)-1); others are in numbered.
	byNumber []int
	numbered map[protowire.Number]int
	// byTag[t] is the index in cols of the planned field whose tag is the
	// one byte t (field numbers 1 to 15) with the field's own wire type,
	// -1 for any other byte: most fields are then found by one load
	// instead of a tag's varint and a number's lookup.
	byTag [128]int16
}

// maxDenseFieldNumber bounds the field numbers looked up by slice.
const maxDenseFieldNumber = 1024

var (
	emptyList any = json.RawMessage("[]")
	emptyMap  any = json.RawMessage("{}")
)

func wireOf(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

var scalarOps = map[protoreflect.Kind]protoOp{
	protoreflect.BoolKind: protoBool, protoreflect.Int32Kind: protoInt32, protoreflect.Int64Kind: protoInt64,
	protoreflect.Uint32Kind: protoUint32, protoreflect.Uint64Kind: protoUint64, protoreflect.Sint32Kind: protoSint32,
	protoreflect.Sint64Kind: protoSint64, protoreflect.Fixed32Kind: protoFixed32, protoreflect.Sfixed32Kind: protoSfixed32,
	protoreflect.Fixed64Kind: protoFixed64, protoreflect.Sfixed64Kind: protoSfixed64, protoreflect.FloatKind: protoFloat,
	protoreflect.DoubleKind: protoDouble, protoreflect.StringKind: protoString, protoreflect.BytesKind: protoBytes,
	protoreflect.EnumKind: protoEnum,
}

// planScalar plans a scalar or enum field (not repeated).
func planScalar(fd protoreflect.FieldDescriptor) protoCol {
	c := protoCol{name: string(fd.Name()), op: scalarOps[fd.Kind()], wire: wireOf(fd.Kind())}
	switch c.op {
	case protoBool:
		c.zero = colbatch.Cell{Kind: colbatch.Bool}
	case protoFloat, protoDouble:
		c.zero = colbatch.Cell{Kind: colbatch.Float}
	case protoString, protoBytes:
		c.zero = colbatch.Cell{Kind: colbatch.String}
	case protoEnum:
		c.enums = map[int32]string{}
		vals := fd.Enum().Values()
		for i := range vals.Len() {
			v := vals.Get(i)
			if _, dup := c.enums[int32(v.Number())]; !dup { // an alias: the first name, as ByNumber
				c.enums[int32(v.Number())] = string(v.Name())
			}
		}
		c.zero = colbatch.Cell{Kind: colbatch.String, S: c.enumName(0)}
	default:
		c.zero = colbatch.Cell{Kind: colbatch.Int}
	}
	if fd.HasPresence() {
		c.zero = colbatch.Cell{Kind: colbatch.Null}
	}
	return c
}

func (c *protoCol) enumName(n int32) string {
	if s, ok := c.enums[n]; ok {
		return s
	}
	return strconv.Itoa(int(n))
}

var wrappers = map[protoreflect.FullName]bool{
	"google.protobuf.DoubleValue": true, "google.protobuf.FloatValue": true, "google.protobuf.Int64Value": true,
	"google.protobuf.UInt64Value": true, "google.protobuf.Int32Value": true, "google.protobuf.UInt32Value": true,
	"google.protobuf.BoolValue": true, "google.protobuf.StringValue": true, "google.protobuf.BytesValue": true,
}

// planProto plans the column decoding of md.
func planProto(md protoreflect.MessageDescriptor) *protoPlan {
	p := &protoPlan{md: md, planned: md.ParentFile().Syntax() == protoreflect.Proto3}
	if !p.planned {
		return p
	}
	fields := md.Fields()
	maxNum := 0
	for i := range fields.Len() {
		fd := fields.Get(i)
		var c protoCol
		switch {
		case fd.IsList():
			c = protoCol{name: string(fd.Name()), op: protoSlow, zero: colbatch.Cell{Kind: colbatch.Value}}
		case fd.IsMap():
			c = protoCol{name: string(fd.Name()), op: protoSlow, zero: colbatch.Cell{Kind: colbatch.Value, I: 1}}
		case fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == "google.protobuf.Timestamp":
			c = protoCol{name: string(fd.Name()), op: protoTimestamp, wire: protowire.BytesType, zero: colbatch.Cell{Kind: colbatch.Null}}
		case fd.Kind() == protoreflect.MessageKind && googleTypeOp(fd.Message()) != protoSlow:
			c = protoCol{name: string(fd.Name()), op: googleTypeOp(fd.Message()), wire: protowire.BytesType, zero: colbatch.Cell{Kind: colbatch.Null}}
		case fd.Kind() == protoreflect.MessageKind && wrappers[fd.Message().FullName()]:
			inner := planScalar(fd.Message().Fields().ByName("value"))
			c = protoCol{name: string(fd.Name()), op: protoWrapper, wire: protowire.BytesType, zero: colbatch.Cell{Kind: colbatch.Null}, inner: &inner}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			c = protoCol{name: string(fd.Name()), op: protoSlow, zero: colbatch.Cell{Kind: colbatch.Null}}
		default:
			c = planScalar(fd)
		}
		p.cols = append(p.cols, c)
		maxNum = max(maxNum, int(fd.Number()))
	}
	for i := range fields.Len() {
		if od := fields.Get(i).ContainingOneof(); od != nil && !od.IsSynthetic() {
			for j := range od.Fields().Len() {
				if k := od.Fields().Get(j).Index(); k != i {
					p.cols[i].oneof = append(p.cols[i].oneof, k)
				}
			}
		}
	}
	p.byNumber = make([]int, min(maxNum, maxDenseFieldNumber)+1)
	for i := range p.byNumber {
		p.byNumber[i] = -1
	}
	p.numbered = map[protowire.Number]int{}
	for i := range p.byTag {
		p.byTag[i] = -1
	}
	for i := range fields.Len() {
		n := fields.Get(i).Number()
		if int(n) < len(p.byNumber) {
			p.byNumber[n] = i
		} else {
			p.numbered[n] = i
		}
		if tag := protowire.EncodeTag(n, p.cols[i].wire); tag < 0x80 && p.cols[i].op != protoSlow && i <= math.MaxInt16 {
			p.byTag[tag] = int16(i)
		}
	}
	return p
}

// names yields the columns' names.
func (p *protoPlan) names(yield func(string) bool) {
	for i := range p.cols {
		if !yield(p.cols[i].name) {
			return
		}
	}
}

func (p *protoPlan) field(n protowire.Number) int {
	if n >= 0 && int(n) < len(p.byNumber) {
		return p.byNumber[n]
	}
	if i, ok := p.numbered[n]; ok {
		return i
	}
	return -1
}

// errSlow: the message sets a field the plan leaves to dynamicpb.
var errSlow = errors.New("decoded by dynamicpb")

// appendRow decodes body (message indexes, then the message) into row
// row of cb.
func (d *protoDecoder) appendRow(body []byte, cb *colbatch.Batch, row int, cache *columnCache) error {
	var p *protoPlan
	msg := body
	if len(body) > 0 && body[0] == 0 && d.first != nil {
		// [0], the file's first message: most messages, without a slice.
		p, msg = d.first, body[1:]
	} else {
		idx, rest, err := messageIndexes(body)
		if err != nil {
			return err
		}
		if p, err = d.plan(idx); err != nil {
			return err
		}
		msg = rest
	}
	at := len(body) - len(msg) // the message's offset in the body, for errors
	cols := cache.columns(p, p.names, cb)
	if p.planned {
		err := p.read(msg, at, cb, row, cols, cache)
		if err == nil || !errors.Is(err, errSlow) {
			return err
		}
	}
	// The whole message through dynamicpb, as Decode.
	m, err := d.mapRow(p.md, msg)
	if err != nil {
		return fmt.Errorf("%s: %w", locate(p.md, msg, at), err)
	}
	for k, v := range m {
		cb.Set(cb.ColumnOf(k), row, v)
	}
	return nil
}

// read reads a planned message's fields into their cells.
func (p *protoPlan) read(b []byte, at int, cb *colbatch.Batch, row int, cols []int, cache *columnCache) error {
	for i := range p.cols {
		c := &p.cols[i]
		cell := c.zero
		switch {
		case c.op == protoSlow && cell.Kind == colbatch.Value && cell.I == 0:
			cell = cb.CellOf(emptyList)
		case c.op == protoSlow && cell.Kind == colbatch.Value:
			cell = cb.CellOf(emptyMap)
		}
		cb.Cols[cols[i]].Cells[row] = cell
	}
	var seen uint64 // the message fields met (the first 64)
	for pos := 0; pos < len(b); {
		fieldAt := pos
		i := -1
		if t := b[pos]; t < 0x80 {
			i = int(p.byTag[t])
		}
		if i >= 0 {
			pos++ // a one-byte tag of a planned field, of its wire type
		} else {
			num, typ, n := protowire.ConsumeTag(b[pos:])
			if n < 0 {
				return fmt.Errorf("at byte %d: field tag: %w", at+pos, protowire.ParseError(n))
			}
			pos += n
			i = p.field(num)
			if i >= 0 && p.cols[i].op == protoSlow {
				return errSlow
			}
			if i < 0 || p.cols[i].wire != typ {
				// Unknown, or a known number with another wire type, which
				// Protobuf keeps as an unknown field: skipped.
				m := protowire.ConsumeFieldValue(num, typ, b[pos:])
				if m < 0 {
					return fmt.Errorf("at byte %d: field %d: %w", at+fieldAt, num, protowire.ParseError(m))
				}
				pos += m
				continue
			}
		}
		c := &p.cols[i]
		if c.op == protoTimestamp || c.op == protoWrapper || c.op == protoDate || c.op == protoTimeOfDay {
			if i < 64 {
				if seen&(1<<i) != 0 {
					return errSlow // merged with the first: dynamicpb merges
				}
				seen |= 1 << i
			} else {
				return errSlow
			}
		}
		cell, m, err := c.read(b[pos:], cb, cache)
		if err != nil {
			return fmt.Errorf("at byte %d: field %s: %w", at+fieldAt, c.name, err)
		}
		pos += m
		cb.Cols[cols[i]].Cells[row] = cell
		for _, k := range c.oneof {
			cb.Cols[cols[k]].Cells[row] = colbatch.Cell{Kind: colbatch.Null}
		}
	}
	return nil
}

// read reads one value of c at the start of b (past its tag) and returns
// its cell and the bytes it took.
func (c *protoCol) read(b []byte, cb *colbatch.Batch, cache *columnCache) (colbatch.Cell, int, error) {
	switch c.wire {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return colbatch.Cell{}, 0, protowire.ParseError(n)
		}
		switch c.op {
		case protoBool:
			if v != 0 {
				return colbatch.Cell{Kind: colbatch.Bool, I: 1}, n, nil
			}
			return colbatch.Cell{Kind: colbatch.Bool}, n, nil
		case protoInt32:
			return colbatch.Cell{Kind: colbatch.Int, I: int64(int32(v))}, n, nil
		case protoEnum:
			return colbatch.Cell{Kind: colbatch.String, S: c.enumName(int32(v))}, n, nil
		case protoUint32:
			return colbatch.Cell{Kind: colbatch.Int, I: int64(uint32(v))}, n, nil
		case protoSint32:
			return colbatch.Cell{Kind: colbatch.Int, I: int64(int32(protowire.DecodeZigZag(v & math.MaxUint32)))}, n, nil
		case protoSint64:
			return colbatch.Cell{Kind: colbatch.Int, I: protowire.DecodeZigZag(v)}, n, nil
		case protoUint64:
			if v > math.MaxInt64 {
				return colbatch.Cell{}, 0, fmt.Errorf("unsigned value %d over the int64 range", v)
			}
		}
		return colbatch.Cell{Kind: colbatch.Int, I: int64(v)}, n, nil
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		if n < 0 {
			return colbatch.Cell{}, 0, protowire.ParseError(n)
		}
		switch c.op {
		case protoFloat:
			return colbatch.Cell{Kind: colbatch.Float, I: int64(math.Float64bits(widenFloat32(math.Float32frombits(v))))}, n, nil
		case protoSfixed32:
			return colbatch.Cell{Kind: colbatch.Int, I: int64(int32(v))}, n, nil
		}
		return colbatch.Cell{Kind: colbatch.Int, I: int64(v)}, n, nil
	case protowire.Fixed64Type:
		v, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return colbatch.Cell{}, 0, protowire.ParseError(n)
		}
		switch c.op {
		case protoDouble:
			return colbatch.Cell{Kind: colbatch.Float, I: int64(v)}, n, nil
		case protoFixed64:
			if v > math.MaxInt64 {
				return colbatch.Cell{}, 0, fmt.Errorf("unsigned value %d over the int64 range", v)
			}
		}
		return colbatch.Cell{Kind: colbatch.Int, I: int64(v)}, n, nil
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return colbatch.Cell{}, 0, protowire.ParseError(n)
	}
	switch c.op {
	case protoString:
		s, ok := cache.utf8Str(v)
		if !ok {
			return colbatch.Cell{}, 0, errors.New("string is not valid UTF-8")
		}
		return colbatch.Cell{Kind: colbatch.String, S: s}, n, nil
	case protoBytes:
		return colbatch.Cell{Kind: colbatch.String, S: base64.StdEncoding.EncodeToString(v)}, n, nil
	case protoTimestamp:
		t, err := readTimestamp(v)
		if err != nil {
			return colbatch.Cell{}, 0, err
		}
		return cache.timeCell(cb, t), n, nil
	case protoDate, protoTimeOfDay:
		cell, err := readGoogleType(c.op, v, cb)
		return cell, n, err
	}
	// A wrapper: its value field (number 1), the zero value when absent.
	cell, err := c.inner.readMessage(v, c.inner.zero, cb, cache)
	return cell, n, err
}

// readMessage reads a wrapper's message: its last value field.
func (c *protoCol) readMessage(b []byte, cell colbatch.Cell, cb *colbatch.Batch, cache *columnCache) (colbatch.Cell, error) {
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return cell, protowire.ParseError(n)
		}
		pos += n
		if num != 1 || typ != c.wire {
			m := protowire.ConsumeFieldValue(num, typ, b[pos:])
			if m < 0 {
				return cell, protowire.ParseError(m)
			}
			pos += m
			continue
		}
		var err error
		if cell, n, err = c.read(b[pos:], cb, cache); err != nil {
			return cell, err
		}
		pos += n
	}
	return cell, nil
}

// readTimestamp reads a google.protobuf.Timestamp message.
func readTimestamp(b []byte) (time.Time, error) {
	var sec, nsec int64
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return time.Time{}, protowire.ParseError(n)
		}
		pos += n
		if (num != 1 && num != 2) || typ != protowire.VarintType {
			m := protowire.ConsumeFieldValue(num, typ, b[pos:])
			if m < 0 {
				return time.Time{}, protowire.ParseError(m)
			}
			pos += m
			continue
		}
		v, m := protowire.ConsumeVarint(b[pos:])
		if m < 0 {
			return time.Time{}, protowire.ParseError(m)
		}
		pos += m
		if num == 1 {
			sec = int64(v)
		} else {
			nsec = int64(int32(v))
		}
	}
	return time.Unix(sec, nsec).UTC(), nil
}

// mapRow decodes a message of type md as Decode does.
func (d *protoDecoder) mapRow(md protoreflect.MessageDescriptor, body []byte) (map[string]any, error) {
	m := dynamicpb.NewMessage(md)
	if err := unmarshal(body, m); err != nil {
		return nil, err
	}
	row := make(map[string]any, md.Fields().Len())
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		// A message field or an explicitly optional one that is not set
		// is null; a proto3 scalar that is not set is its zero value, as
		// every Protobuf reader sees it.
		if fd.HasPresence() && !m.Has(fd) {
			row[string(fd.Name())] = nil
			continue
		}
		v, err := protoField(fd, m.Get(fd), true)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", fd.Name(), err)
		}
		row[string(fd.Name())] = v
	}
	return row, nil
}

// locate says where dynamicpb's decoding of message b (at offset at of
// the body) fails, which its errors do not: the first top-level field
// whose tag or value does not decode on its own.
func locate(md protoreflect.MessageDescriptor, b []byte, at int) string {
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return fmt.Sprintf("at byte %d", at+pos)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[pos+n:])
		if m < 0 {
			return fmt.Sprintf("at byte %d: field %d", at+pos, num)
		}
		if err := unmarshal(b[pos:pos+n+m], dynamicpb.NewMessage(md)); err != nil {
			name := strconv.Itoa(int(num))
			if fd := md.Fields().ByNumber(num); fd != nil {
				name = string(fd.Name())
			}
			return fmt.Sprintf("at byte %d: field %s", at+pos, name)
		}
		pos += n + m
	}
	return fmt.Sprintf("at byte %d", at)
}

// unmarshal is proto.Unmarshal into a dynamicpb message, which panics on
// some malformed map entries (a key of another wire type: "cannot convert
// nil to map key"): a hostile message is an error, never a crash.
func unmarshal(b []byte, m *dynamicpb.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed message: %v", p)
		}
	}()
	return proto.Unmarshal(b, m)
}
