package schemaformat

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

const protoText = `syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
message A { string a = 1; }
message B {
  message C { int64 n = 1; google.protobuf.Timestamp at = 2; }
  C c = 1;
  uint64 big = 2;
}`

// TestProtobufTextSchema: a schema registered as .proto text (what most
// producers other than Confluent's Python register) compiles, and the
// message indexes reach a nested message ([1, 0] is B.C).
func TestProtobufTextSchema(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("p-value", testregistry.Schema{Schema: protoText, SchemaType: "PROTOBUF"})
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": protoText})})}
	files, err := c.Compile(context.Background(), "schema.proto")
	if err != nil {
		t.Fatal(err)
	}
	cd := files[0].Messages().Get(1).Messages().Get(0)
	m := dynamicpb.NewMessage(cd)
	m.Set(cd.Fields().ByName("n"), protoreflect.ValueOfInt64(-7))
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// Indexes [1, 0]: count 2, then 1 and 0, each a zigzag varint.
	msg := append(frame(id, []byte{4, 2, 0}), body...)
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	row, err := d.Decode(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	if row["n"] != int64(-7) || row["at"] != nil || len(row) != 2 {
		t.Errorf("row %v: want n -7 and at null (an unset message field)", row)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		says string
	}{
		{"index past the messages", append(frame(id, []byte{2, 10}), body...), "2 messages at level 0"},
		{"a negative count", append(frame(id, []byte{3}), body...), "count -2"},
		// 127 indexes, each a valid varint: refused by the count alone.
		{"a count over the bound", append(frame(id, []byte{0xfe, 0x01}), make([]byte, 127)...), "count 127, want 1 to 64"},
		{"indexes cut short", frame(id, []byte{4, 2}), "bad index 1"},
	} {
		if _, err := d.Decode(context.Background(), c.msg); !errors.Is(err, ErrBody) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrBody saying %q", c.name, err, c.says)
		}
	}
}

const googleTypesProto = `syntax = "proto3";
package t;
import "google/type/date.proto";
import "google/type/timeofday.proto";
message E {
  google.type.Date day = 1;
  google.type.TimeOfDay at = 2;
  repeated google.type.Date days = 3;
  int64 n = 4;
}`

// TestProtobufGoogleTypes: a top-level google.type.Date is a date and a
// google.type.TimeOfDay a time of day (by the map and the column decoder
// alike), although the registry holds neither file (Confluent's serializer
// does not register them); inside a list they are their text; a partial
// date and a time of day a time_of_day cannot hold keep their fields.
func TestProtobufGoogleTypes(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("g-value", testregistry.Schema{Schema: googleTypesProto, SchemaType: "PROTOBUF"})
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	fd, err := protoFile("", googleTypesProto, new(protoregistry.Files))
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().Get(0)
	date := func(y, m, dd int64) protoreflect.Value {
		x := dynamicpb.NewMessage(md.Fields().ByName("day").Message())
		f := x.Descriptor().Fields()
		x.Set(f.ByName("year"), protoreflect.ValueOfInt32(int32(y)))
		x.Set(f.ByName("month"), protoreflect.ValueOfInt32(int32(m)))
		x.Set(f.ByName("day"), protoreflect.ValueOfInt32(int32(dd)))
		return protoreflect.ValueOfMessage(x)
	}
	clock := func(h, m, s, ns int32) protoreflect.Value {
		x := dynamicpb.NewMessage(md.Fields().ByName("at").Message())
		f := x.Descriptor().Fields()
		x.Set(f.ByName("hours"), protoreflect.ValueOfInt32(h))
		x.Set(f.ByName("minutes"), protoreflect.ValueOfInt32(m))
		x.Set(f.ByName("seconds"), protoreflect.ValueOfInt32(s))
		x.Set(f.ByName("nanos"), protoreflect.ValueOfInt32(ns))
		return protoreflect.ValueOfMessage(x)
	}
	msg := func(day, at protoreflect.Value, list bool) []byte {
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("day"), day)
		m.Set(md.Fields().ByName("at"), at)
		m.Set(md.Fields().ByName("n"), protoreflect.ValueOfInt64(1))
		if list {
			l := m.Mutable(md.Fields().ByName("days")).List()
			l.Append(date(1969, 12, 31))
		}
		body, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return append(frame(id, []byte{0}), body...)
	}
	for _, c := range []struct {
		msg  []byte
		want map[string]any
	}{
		{msg(date(2026, 11, 29), clock(13, 45, 1, 123000), false),
			map[string]any{"day": coltype.DateValue(20786), "at": coltype.TimeOfDayValue(49501000123), "days": []any{}, "n": int64(1)}},
		{msg(date(1969, 12, 31), clock(0, 0, 0, 0), true),
			map[string]any{"day": coltype.DateValue(-1), "at": coltype.TimeOfDayValue(0), "days": []any{"1969-12-31"}, "n": int64(1)}},
		{msg(date(0, 11, 29), clock(24, 0, 0, 0), false),
			map[string]any{"day": map[string]any{"month": int64(11), "day": int64(29)}, "at": map[string]any{"hours": int64(24)}, "days": []any{}, "n": int64(1)}},
	} {
		row, err := d.decodeMap(ctx, c.msg)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(row, c.want) {
			t.Errorf("map decoder:\n%#v\nwant\n%#v", row, c.want)
		}
		var cb colbatch.Batch
		if err := d.Rows(&cb).Append(ctx, c.msg, 1); err != nil {
			t.Fatal(err)
		}
		// An empty list is the column decoder's JSON text "[]".
		got := cb.Rows()[0]
		for k, v := range got {
			got[k] = normal(t, v)
		}
		if want := c.want; !reflect.DeepEqual(got, map[string]any{"day": normal(t, want["day"]), "at": normal(t, want["at"]), "days": normal(t, want["days"]), "n": want["n"]}) {
			t.Errorf("column decoder:\n%#v\nwant\n%#v", got, want)
		}
	}
}
