package schemaformat

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// google.type.Date and google.type.TimeOfDay on the column path: a field
// of either type is read from the wire as a Timestamp is, without
// dynamicpb. A value with no date or time_of_day of its own (a partial
// date, 24:00:00, nanoseconds below a microsecond) keeps its object of
// fields, which only dynamicpb makes: such a message goes that way, as a
// repeated field does, so both paths give the same cells by construction.

// googleTypeFields are the field names of the google.type messages read
// natively, by field number (1 first).
var googleTypeFields = map[protoreflect.FullName][]protoreflect.Name{
	"google.type.Date":      {"year", "month", "day"},
	"google.type.TimeOfDay": {"hours", "minutes", "seconds", "nanos"},
}

// googleTypeOp is the op that reads message type md natively, protoSlow
// for any other type. A schema may bring its own file of the same name
// (a reference): only a message of googleapis' exact shape is read here.
func googleTypeOp(md protoreflect.MessageDescriptor) protoOp {
	names, ok := googleTypeFields[md.FullName()]
	if !ok || md.Fields().Len() != len(names) || md.ParentFile().Syntax() != protoreflect.Proto3 {
		return protoSlow // proto2's defaults would be values the wire does not carry
	}
	for i, name := range names {
		fd := md.Fields().ByNumber(protowire.Number(i + 1))
		if fd == nil || fd.Name() != name || fd.Kind() != protoreflect.Int32Kind || fd.Cardinality() == protoreflect.Repeated {
			return protoSlow
		}
	}
	if md.FullName() == "google.type.Date" {
		return protoDate
	}
	return protoTimeOfDay
}

// readGoogleType reads a google.type.Date or TimeOfDay message (op) into
// its date or time_of_day cell; errSlow when the value has none.
func readGoogleType(op protoOp, b []byte, cb *colbatch.Batch) (colbatch.Cell, error) {
	var f [5]int64 // by field number; each field's last value, as Protobuf merges
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return colbatch.Cell{}, protowire.ParseError(n)
		}
		pos += n
		if num < 1 || num > 4 || typ != protowire.VarintType {
			// Unknown, or a known number with another wire type, which
			// Protobuf keeps as an unknown field: skipped.
			m := protowire.ConsumeFieldValue(num, typ, b[pos:])
			if m < 0 {
				return colbatch.Cell{}, protowire.ParseError(m)
			}
			pos += m
			continue
		}
		v, m := protowire.ConsumeVarint(b[pos:])
		if m < 0 {
			return colbatch.Cell{}, protowire.ParseError(m)
		}
		pos += m
		f[num] = int64(int32(v))
	}
	if op == protoDate {
		// Field 4 is no Date field (skipped by dynamicpb as unknown).
		if d, ok := dateOf(f[1], f[2], f[3]); ok {
			return cb.CellOf(d), nil
		}
		return colbatch.Cell{}, errSlow
	}
	if t, ok := timeOfDayOf(f[1], f[2], f[3], f[4]); ok {
		return cb.CellOf(t), nil
	}
	return colbatch.Cell{}, errSlow
}

// dateOf is a google.type.Date's year, month and day as a date; ok is
// false for a partial one (a year, month or day of 0: a birthday, a
// card's expiry) or a day its month does not have.
func dateOf(y, mo, d int64) (coltype.DateValue, bool) {
	if y < 1 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 {
		return 0, false
	}
	t := time.Date(int(y), time.Month(mo), int(d), 0, 0, 0, 0, time.UTC)
	if t.Day() != int(d) { // February 30th
		return 0, false
	}
	return coltype.DateOf(t), true
}

// timeOfDayOf is a google.type.TimeOfDay as a time of day; ok is false for
// one a time_of_day cannot hold (24:00:00, a leap second, nanoseconds
// below a microsecond, out of range).
func timeOfDayOf(h, mi, s, ns int64) (coltype.TimeOfDayValue, bool) {
	if h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 59 || ns < 0 || ns > 999_999_999 || ns%1000 != 0 {
		return 0, false
	}
	return coltype.TimeOfDayValue(((h*60+mi)*60+s)*1_000_000 + ns/1000), true
}
