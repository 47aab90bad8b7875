package schemaformat

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// diffAvro has every Avro type and logical type the mapping table names,
// at the top and nested.
const diffAvro = `{"type":"record","name":"D","namespace":"t","fields":[
 {"name":"i","type":"int"},{"name":"l","type":"long"},{"name":"f","type":"float"},{"name":"d","type":"double"},
 {"name":"b","type":"boolean"},{"name":"s","type":"string"},{"name":"by","type":"bytes"},
 {"name":"fx","type":{"type":"fixed","name":"F4","size":4}},
 {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}},
 {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":2}},
 {"name":"decf","type":{"type":"fixed","name":"D9","size":9,"logicalType":"decimal","precision":20,"scale":3}},
 {"name":"bigdec","type":{"type":"bytes","logicalType":"decimal","precision":40,"scale":4}},
 {"name":"date","type":{"type":"int","logicalType":"date"}},
 {"name":"tmil","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tmic","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"tsm","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"ltsm","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"uuid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"opt","type":["null","string"]},{"name":"optl","type":["null","long"]},
 {"name":"multi","type":["null","long","string"]},
 {"name":"rec","type":{"type":"record","name":"Inner","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","string"]},
   {"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"x","type":"F4"},
   {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},{"name":"f","type":"float"},
   {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},{"name":"e","type":"E"}]}},
 {"name":"arr","type":{"type":"array","items":"double"}},
 {"name":"m","type":{"type":"map","values":"long"}},
 {"name":"recs","type":{"type":"array","items":"Inner"}},
 {"name":"optrec","type":["null","Inner"]}]}`

func randString(rnd *rand.Rand) string {
	const chars = "abcé\"\\<>&\u2028 xyz\n\x01"
	r := []rune(chars)
	n := rnd.IntN(12)
	out := make([]rune, n)
	for i := range out {
		out[i] = r[rnd.IntN(len(r))]
	}
	return string(out)
}

func randBytes(rnd *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
	return b
}

func randRat(rnd *rand.Rand, scale int, digits int) *big.Rat {
	n := big.NewInt(0)
	for range digits {
		n.Mul(n, big.NewInt(10))
		n.Add(n, big.NewInt(rnd.Int64N(10)))
	}
	if rnd.IntN(2) == 0 {
		n.Neg(n)
	}
	return new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
}

func randInner(rnd *rand.Rand) map[string]any {
	var b any
	if rnd.IntN(2) == 0 {
		b = randString(rnd)
	}
	return map[string]any{"a": int32(rnd.Int32() - 1<<30), "b": b, "t": time.UnixMilli(rnd.Int64N(4e12)).UTC(), "x": [4]byte(randBytes(rnd, 4)),
		"dec": randRat(rnd, 2, 7), "f": float32(rnd.NormFloat64()), "tm": time.Duration(rnd.IntN(86400000)) * time.Millisecond, "e": "C"}
}

func randAvroRow(rnd *rand.Rand) map[string]any {
	var opt, optl, multi, optrec any
	switch rnd.IntN(3) {
	case 1:
		opt, optl, multi = randString(rnd), rnd.Int64(), rnd.Int64()
		optrec = randInner(rnd)
	case 2:
		opt, optl, multi = "", int64(0), randString(rnd)
	}
	arr := make([]any, rnd.IntN(4))
	for i := range arr {
		arr[i] = rnd.NormFloat64() * 1e6
	}
	m := map[string]any{}
	for range rnd.IntN(4) {
		m[randString(rnd)] = rnd.Int64() >> rnd.IntN(64)
	}
	recs := make([]any, rnd.IntN(3))
	for i := range recs {
		recs[i] = randInner(rnd)
	}
	return map[string]any{
		"i": int32(rnd.Uint32()), "l": rnd.Int64() >> rnd.IntN(64), "f": float32(rnd.NormFloat64() * 100), "d": rnd.NormFloat64(),
		"b": rnd.IntN(2) == 1, "s": randString(rnd), "by": randBytes(rnd, rnd.IntN(9)), "fx": [4]byte(randBytes(rnd, 4)),
		"e": []string{"A", "B", "C"}[rnd.IntN(3)], "dec": randRat(rnd, 2, 1+rnd.IntN(17)), "decf": randRat(rnd, 3, 1+rnd.IntN(19)),
		"bigdec": randRat(rnd, 4, 1+rnd.IntN(38)), "date": time.Unix(rnd.Int64N(20000)*86400, 0).UTC(),
		"tmil": time.Duration(rnd.IntN(86400000)) * time.Millisecond, "tmic": time.Duration(rnd.Int64N(86400000000)) * time.Microsecond,
		"tsm": time.UnixMilli(rnd.Int64N(4e12) - 1e12).UTC(), "tsu": time.UnixMicro(rnd.Int64N(4e15) - 1e15).UTC(),
		"ltsm": time.UnixMilli(rnd.Int64N(4e12)).UTC(), "uuid": "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
		"opt": opt, "optl": optl, "multi": multi, "rec": randInner(rnd), "arr": arr, "m": m, "recs": recs, "optrec": optrec,
	}
}

// normal is v as its JSON value when it is nested (a map, a slice or JSON
// text), so that the map decoder's values and the column decoder's JSON
// text compare by value, not by key order or HTML escaping.
func normal(t *testing.T, v any) any {
	var text []byte
	switch x := v.(type) {
	case json.RawMessage:
		text = x
	case map[string]any, []any:
		var err error
		if text, err = json.Marshal(x); err != nil {
			t.Fatalf("%v: %v", v, err)
		}
	default:
		return v
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("JSON %s: %v", text, err)
	}
	return out
}

// sameCells decodes msgs with the map decoders (decodeMap) and by column
// (Rows) and compares every cell.
func sameCells(t *testing.T, d *Decoder, msgs [][]byte) {
	t.Helper()
	ctx := context.Background()
	var cb colbatch.Batch
	rows := d.Rows(&cb)
	var want []map[string]any
	for i, msg := range msgs {
		row, err := d.decodeMap(ctx, msg)
		if err != nil {
			t.Fatalf("message %d: decodeMap: %v", i, err)
		}
		want = append(want, row)
		if err := rows.Append(ctx, msg, i+1); err != nil {
			t.Fatalf("message %d: Append: %v", i, err)
		}
	}
	got := cb.Rows()
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Errorf("message %d: %d columns by column, %d as a map:\n%v\n%v", i, len(got[i]), len(want[i]), got[i], want[i])
		}
		for k, w := range want[i] {
			g, ok := got[i][k]
			if !ok {
				t.Errorf("message %d: column %s missing by column (map: %v)", i, k, w)
				continue
			}
			if wt, ok := w.(time.Time); ok {
				if gt, ok := g.(time.Time); !ok || !gt.Equal(wt) || gt.Location() != wt.Location() {
					t.Errorf("message %d: column %s: %#v by column, %#v as a map", i, k, g, w)
				}
				continue
			}
			if gf, ok := g.(float64); ok && math.IsNaN(gf) {
				if wf, ok := w.(float64); ok && math.IsNaN(wf) {
					continue
				}
			}
			if gn, wn := normal(t, g), normal(t, w); !reflect.DeepEqual(gn, wn) {
				t.Errorf("message %d: column %s: %s by column, %v as a map", i, k, g, w)
			}
		}
	}
}

// TestAvroColumnsMatchMaps: the column decoder gives every cell the map
// decoder gives, over random rows of every type.
func TestAvroColumnsMatchMaps(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("d-value", testregistry.Schema{Schema: diffAvro})
	d := newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	rnd := rand.New(rand.NewPCG(3, 4))
	var msgs [][]byte
	for range 500 {
		msgs = append(msgs, frame(id, encode(t, diffAvro, randAvroRow(rnd))))
	}
	sameCells(t, d, msgs)
}

const diffProto = `syntax = "proto3";
package d;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/type/date.proto";
import "google/type/timeofday.proto";
enum Color { RED = 0; GREEN = 1; BLUE = 2; }
message All {
  bool b = 1; int32 i32 = 2; int64 i64 = 3; uint32 u32 = 4; uint64 u64 = 5; sint32 s32 = 6; sint64 s64 = 7;
  fixed32 f32 = 8; sfixed32 sf32 = 9; fixed64 f64 = 10; sfixed64 sf64 = 11; float fl = 12; double db = 13;
  string s = 14; bytes by = 15; Color color = 16; optional int64 opt = 17; optional string opts = 18;
  google.protobuf.Timestamp ts = 19; google.protobuf.Int64Value wi = 20; google.protobuf.StringValue ws = 21;
  google.protobuf.FloatValue wf = 22; google.protobuf.BytesValue wb = 23; google.protobuf.UInt64Value wu = 24;
  oneof choice { string cs = 25; int64 ci = 26; }
  message Inner { string name = 1; repeated int64 vals = 2; google.protobuf.Timestamp at = 3; }
  Inner inner = 27; repeated string tags = 28; map<string, int64> counts = 29; repeated Inner inners = 30;
  google.type.Date day = 31; google.type.TimeOfDay tod = 32;
  int64 far = 5000;
}`

// randProto is a random message of md; scalars: without message fields
// (a message merged after another stays on the planned path).
func randProto(rnd *rand.Rand, md protoreflect.MessageDescriptor, scalars bool) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	f := md.Fields().ByName
	set := func(name string, v protoreflect.Value) {
		if rnd.IntN(3) > 0 {
			m.Set(f(protoreflect.Name(name)), v)
		}
	}
	set("b", protoreflect.ValueOfBool(rnd.IntN(2) == 1))
	set("i32", protoreflect.ValueOfInt32(rnd.Int32()-1<<30))
	set("i64", protoreflect.ValueOfInt64(rnd.Int64()-1<<62))
	set("u32", protoreflect.ValueOfUint32(rnd.Uint32()))
	set("u64", protoreflect.ValueOfUint64(rnd.Uint64()>>1))
	set("s32", protoreflect.ValueOfInt32(rnd.Int32()-1<<30))
	set("s64", protoreflect.ValueOfInt64(rnd.Int64()-1<<62))
	set("f32", protoreflect.ValueOfUint32(rnd.Uint32()))
	set("sf32", protoreflect.ValueOfInt32(rnd.Int32()-1<<30))
	set("f64", protoreflect.ValueOfUint64(rnd.Uint64()>>1))
	set("sf64", protoreflect.ValueOfInt64(rnd.Int64()-1<<62))
	set("fl", protoreflect.ValueOfFloat32(float32(rnd.NormFloat64())))
	set("db", protoreflect.ValueOfFloat64(rnd.NormFloat64()))
	set("s", protoreflect.ValueOfString(randString(rnd)))
	set("by", protoreflect.ValueOfBytes(randBytes(rnd, rnd.IntN(6))))
	set("color", protoreflect.ValueOfEnum(protoreflect.EnumNumber(rnd.IntN(4))))
	set("opt", protoreflect.ValueOfInt64(rnd.Int64N(3)))
	set("opts", protoreflect.ValueOfString(randString(rnd)))
	msgField := func(name string, fill func(m *dynamicpb.Message)) {
		if !scalars && rnd.IntN(3) > 0 {
			fd := f(protoreflect.Name(name))
			x := dynamicpb.NewMessage(fd.Message())
			fill(x)
			m.Set(fd, protoreflect.ValueOfMessage(x))
		}
	}
	tsFill := func(x *dynamicpb.Message) {
		x.Set(x.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(rnd.Int64N(4e9)-1e9))
		if rnd.IntN(2) == 0 {
			x.Set(x.Descriptor().Fields().ByName("nanos"), protoreflect.ValueOfInt32(rnd.Int32N(1e9)))
		}
	}
	msgField("ts", tsFill)
	value := func(v protoreflect.Value) func(x *dynamicpb.Message) {
		return func(x *dynamicpb.Message) {
			if rnd.IntN(4) > 0 {
				x.Set(x.Descriptor().Fields().ByName("value"), v)
			}
		}
	}
	msgField("wi", value(protoreflect.ValueOfInt64(rnd.Int64())))
	msgField("ws", value(protoreflect.ValueOfString(randString(rnd))))
	msgField("wf", value(protoreflect.ValueOfFloat32(float32(rnd.NormFloat64()))))
	msgField("wb", value(protoreflect.ValueOfBytes(randBytes(rnd, 3))))
	msgField("wu", value(protoreflect.ValueOfUint64(rnd.Uint64()>>1)))
	switch rnd.IntN(3) {
	case 1:
		m.Set(f("cs"), protoreflect.ValueOfString(randString(rnd)))
	case 2:
		m.Set(f("ci"), protoreflect.ValueOfInt64(rnd.Int64()))
	}
	m.Set(f("far"), protoreflect.ValueOfInt64(rnd.Int64N(100)))
	msgField("day", func(x *dynamicpb.Message) { fillGoogleType(rnd, x) })
	msgField("tod", func(x *dynamicpb.Message) { fillGoogleType(rnd, x) })
	if !scalars && rnd.IntN(4) == 0 { // nested values: the message goes through dynamicpb
		msgField("inner", func(x *dynamicpb.Message) {
			x.Set(x.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString(randString(rnd)))
			l := x.Mutable(x.Descriptor().Fields().ByName("vals")).List()
			l.Append(protoreflect.ValueOfInt64(rnd.Int64()))
		})
		l := m.Mutable(f("tags")).List()
		l.Append(protoreflect.ValueOfString(randString(rnd)))
		mp := m.Mutable(f("counts")).Map()
		mp.Set(protoreflect.ValueOfString(randString(rnd)).MapKey(), protoreflect.ValueOfInt64(rnd.Int64()))
	}
	return m
}

// TestProtoColumnsMatchMaps: the Protobuf column decoder gives every cell
// the map decoder gives, over random messages of every scalar kind, enums
// (one the schema does not name), optional fields, a oneof, Timestamps,
// wrappers, nested, repeated and map fields, and concatenated messages
// (Protobuf merges them: the last scalar wins, a oneof's last member
// clears the other, message fields merge).
func TestProtoColumnsMatchMaps(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("p-value", testregistry.Schema{Schema: diffProto, SchemaType: "PROTOBUF"})
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	fd, err := protoFile("", diffProto, new(protoregistry.Files)) // google.type's files as the decoder has them
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().Get(0)
	rnd := rand.New(rand.NewPCG(5, 6))
	var msgs [][]byte
	for i := range 600 {
		body, err := proto.Marshal(randProto(rnd, md, false))
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			more, err := proto.Marshal(randProto(rnd, md, i%10 == 0))
			if err != nil {
				t.Fatal(err)
			}
			body = append(body, more...)
		}
		msgs = append(msgs, append(frame(id, []byte{0}), body...))
	}
	sameCells(t, d, msgs)
}
