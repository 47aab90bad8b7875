package schemaformat

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// fillGoogleType sets random fields of x, a google.type.Date or
// TimeOfDay: mostly values of a date or time_of_day, and each edge that
// has none (a zero part, February 30th, 24:00, a leap second, nanoseconds
// below a microsecond, negatives, out of range).
func fillGoogleType(rnd *rand.Rand, x *dynamicpb.Message) {
	f := x.Descriptor().Fields()
	set := func(name string, v int32) {
		if v != 0 || rnd.IntN(2) == 0 { // proto3: 0 is not on the wire either way
			x.Set(f.ByName(protoreflect.Name(name)), protoreflect.ValueOfInt32(v))
		}
	}
	pick := func(valid int32, edges ...int32) int32 {
		if rnd.IntN(4) > 0 {
			return valid
		}
		return edges[rnd.IntN(len(edges))]
	}
	if x.Descriptor().FullName() == "google.type.Date" {
		set("year", pick(1+rnd.Int32N(9999), 0, -1, 10000, 1970, 2024))
		set("month", pick(1+rnd.Int32N(12), 0, 2, 13, -2))
		set("day", pick(1+rnd.Int32N(28), 0, 29, 30, 31, 32, -1))
		return
	}
	set("hours", pick(rnd.Int32N(24), 24, 25, -1))
	set("minutes", pick(rnd.Int32N(60), 60, -1))
	set("seconds", pick(rnd.Int32N(60), 60, -1))
	set("nanos", pick(rnd.Int32N(1_000_000)*1000, 1, 999_999_999, 1_000_000_000, -1000))
}

// googleTypeBodies are message bodies of diffProto's All (message index
// [0] first) that set google.type fields the ways the wire allows:
// FuzzProtoColumns' seeds and TestGoogleTypeColumnsMatchMaps' cases.
func googleTypeBodies() map[string][]byte {
	ints := func(nums ...int64) []byte { // field number, value pairs
		var b []byte
		for i := 0; i < len(nums); i += 2 {
			b = protowire.AppendTag(b, protowire.Number(nums[i]), protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(nums[i+1]))
		}
		return b
	}
	field := func(num protowire.Number, inner []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), inner)
	}
	const day, tod = 31, 32
	body := func(parts ...[]byte) []byte {
		b := []byte{0}
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	oddWire := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("x")) // year as bytes: unknown
	return map[string][]byte{
		"date and time":        body(ints(3, 7), field(day, ints(1, 2026, 2, 11, 3, 29)), field(tod, ints(1, 13, 2, 45, 3, 1, 4, 123000))),
		"first and last":       body(field(day, ints(1, 1, 2, 1, 3, 1)), field(tod, nil)),
		"last day":             body(field(day, ints(1, 9999, 2, 12, 3, 31)), field(tod, ints(1, 23, 2, 59, 3, 59, 4, 999_999_000))),
		"leap day":             body(field(day, ints(1, 2024, 2, 2, 3, 29))),
		"no leap day":          body(field(day, ints(1, 2023, 2, 2, 3, 29))),
		"partial date":         body(field(day, ints(2, 11, 3, 29)), field(tod, ints(1, 9))),
		"empty date":           body(field(day, nil)),
		"24:00":                body(field(tod, ints(1, 24))),
		"leap second":          body(field(tod, ints(1, 23, 2, 59, 3, 60))),
		"nanosecond":           body(field(tod, ints(4, 1))),
		"negative":             body(field(day, ints(1, -1, 2, 1, 3, 1)), field(tod, ints(1, -1))),
		"last value wins":      body(field(day, ints(1, 1999, 2, 1, 3, 1, 1, 2026))),
		"int32 of a wide int":  body(field(day, ints(1, 1<<32+2026, 2, 3, 3, 4))),
		"unknown inside":       body(field(day, append(ints(7, 5, 4, 9, 1, 2026, 2, 3, 3, 4), oddWire...))),
		"twice: merged":        body(field(day, ints(1, 2026, 2, 3)), field(day, ints(3, 4))),
		"time twice: merged":   body(field(tod, ints(1, 1)), field(tod, ints(2, 2))),
		"with a repeated":      body(field(day, ints(1, 2026, 2, 3, 3, 4)), field(28, []byte("tag"))),
		"cut short":            body(field(day, ints(1, 2026))[:4]),
		"inner varint cut":     body(field(day, []byte{8, 0x80})),
		"inner tag of field 0": body(field(day, []byte{0, 1})),
	}
}

// TestGoogleTypeColumnsMatchMaps: the column decoder reads google.type's
// Date and TimeOfDay from the wire into the cells dynamicpb's decoding
// gives, for every shape googleTypeBodies has (a malformed one is an
// error naming its byte), and random messages.
func TestGoogleTypeColumnsMatchMaps(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("p-value", testregistry.Schema{Schema: diffProto, SchemaType: "PROTOBUF"})
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	ctx := context.Background()
	for name, body := range googleTypeBodies() {
		t.Run(name, func(t *testing.T) {
			fuzzColumns(t, d, id, body)
			_, mapErr := d.decodeMap(ctx, frame(id, body))
			var cb colbatch.Batch
			if err := d.Rows(&cb).Append(ctx, frame(id, body), 1); (err == nil) != (mapErr == nil) {
				t.Errorf("column decoder: %v; dynamicpb: %v", err, mapErr)
			}
		})
	}
	got := func(name string) map[string]any {
		var cb colbatch.Batch
		if err := d.Rows(&cb).Append(ctx, frame(id, googleTypeBodies()[name]), 1); err != nil {
			t.Fatal(err)
		}
		r := cb.Rows()[0]
		return map[string]any{"day": r["day"], "tod": r["tod"]}
	}
	for name, want := range map[string]map[string]any{
		"date and time":       {"day": coltype.DateValue(20786), "tod": coltype.TimeOfDayValue(49501000123)},
		"first and last":      {"day": coltype.DateValue(-719162), "tod": coltype.TimeOfDayValue(0)},
		"last day":            {"day": coltype.DateValue(2932896), "tod": coltype.TimeOfDayValue(86399999999)},
		"partial date":        {"day": map[string]any{"month": int64(11), "day": int64(29)}, "tod": coltype.TimeOfDayValue(9 * 3_600_000_000)},
		"24:00":               {"day": nil, "tod": map[string]any{"hours": int64(24)}},
		"int32 of a wide int": {"day": coltype.DateValue(20516), "tod": nil},
		"twice: merged":       {"day": coltype.DateValue(20516), "tod": nil},
	} {
		if g := got(name); !reflect.DeepEqual(g, want) {
			t.Errorf("%s: %#v, want %#v", name, g, want)
		}
	}

	fd, err := protoFile("", diffProto, new(protoregistry.Files))
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().Get(0)
	rnd := rand.New(rand.NewPCG(28, 1))
	var msgs [][]byte
	for range 300 {
		m := dynamicpb.NewMessage(md)
		for _, name := range []protoreflect.Name{"day", "tod"} {
			if rnd.IntN(4) > 0 {
				x := dynamicpb.NewMessage(md.Fields().ByName(name).Message())
				fillGoogleType(rnd, x)
				m.Set(md.Fields().ByName(name), protoreflect.ValueOfMessage(x))
			}
		}
		m.Set(md.Fields().ByName("i64"), protoreflect.ValueOfInt64(rnd.Int64()))
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, append(frame(id, []byte{0}), b...))
	}
	sameCells(t, d, msgs)
}

// TestGoogleTypeWithoutDynamicpb: a message with a Date and a TimeOfDay is
// decoded from the wire, not by dynamicpb (which allocates a message, its
// fields and a map per row): at most the two values' boxes per row.
func TestGoogleTypeWithoutDynamicpb(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("p-value", testregistry.Schema{Schema: diffProto, SchemaType: "PROTOBUF"})
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	msg := frame(id, googleTypeBodies()["date and time"])
	ctx := context.Background()
	var cb colbatch.Batch
	rows := d.Rows(&cb)
	if err := rows.Append(ctx, msg, 1); err != nil { // the plan and the batch's columns, once
		t.Fatal(err)
	}
	const perRun = 100
	allocs := testing.AllocsPerRun(20, func() {
		cb.Reset()
		rows = d.Rows(&cb)
		for i := range perRun {
			if err := rows.Append(ctx, msg, i+1); err != nil {
				t.Fatal(err)
			}
		}
	}) / perRun
	if allocs > 2.5 {
		t.Errorf("%.1f allocations per row, want at most the two values' (decoded by dynamicpb?)", allocs)
	}
}

// benchGoogleTypeMessage is a row of diffProto's All with scalars, a
// Timestamp and, with googleTypes, a Date and a TimeOfDay, and its
// decoder.
func benchGoogleTypeMessage(b *testing.B, googleTypes bool) ([]byte, *Decoder) {
	reg := startRegistry(b, testregistry.Options{})
	id := reg.Register("p-value", testregistry.Schema{Schema: diffProto, SchemaType: "PROTOBUF"})
	fd, err := protoFile("", diffProto, new(protoregistry.Files))
	if err != nil {
		b.Fatal(err)
	}
	md := fd.Messages().Get(0)
	m := dynamicpb.NewMessage(md)
	f := md.Fields().ByName
	m.Set(f("s"), protoreflect.ValueOfString("u3"))
	m.Set(f("color"), protoreflect.ValueOfEnum(1))
	m.Set(f("db"), protoreflect.ValueOfFloat64(12.5))
	m.Set(f("i64"), protoreflect.ValueOfInt64(7))
	m.Set(f("b"), protoreflect.ValueOfBool(true))
	ts := dynamicpb.NewMessage(f("ts").Message())
	ts.Set(ts.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(1714521600))
	m.Set(f("ts"), protoreflect.ValueOfMessage(ts))
	for name, vals := range map[protoreflect.Name][]int32{"day": {2026, 11, 29}, "tod": {13, 45, 1, 123000}} {
		if !googleTypes {
			break
		}
		x := dynamicpb.NewMessage(f(name).Message())
		for i, v := range vals {
			x.Set(x.Descriptor().Fields().Get(i), protoreflect.ValueOfInt32(v))
		}
		m.Set(f(name), protoreflect.ValueOfMessage(x))
	}
	body, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return append(frame(id, []byte{0}), body...), newDecoder(b, FormatProtobuf, Registry{URLs: []string{reg.URL}})
}

// BenchmarkAppendRowGoogleType: a row with a Date and a TimeOfDay beside
// scalars and a Timestamp into a column batch (ns/op and allocs/op per
// row); the same row without the two, for what they cost.
func BenchmarkAppendRowGoogleType(b *testing.B) {
	msg, d := benchGoogleTypeMessage(b, true)
	benchAppendRows(b, msg, d)
}

func BenchmarkAppendRowGoogleTypeNone(b *testing.B) {
	msg, d := benchGoogleTypeMessage(b, false)
	benchAppendRows(b, msg, d)
}
