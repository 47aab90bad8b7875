package schemaformat

import (
	"context"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/avro"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// benchAvro is sluice bench kafka's row (bench/kafka) as Avro.
const benchAvro = `{"type":"record","name":"Bench","fields":[
 {"name":"time","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"user","type":"string"},{"name":"action","type":"string"},{"name":"country","type":"string"},
 {"name":"device","type":"string"},{"name":"amount","type":"double"},{"name":"score","type":"double"},
 {"name":"count","type":"long"},{"name":"session","type":"long"},{"name":"ok","type":"boolean"}]}`

// benchAvroMessage is the bench row as an Avro message, and its decoder.
func benchAvroMessage(b *testing.B) ([]byte, *Decoder) {
	reg := startRegistry(b, testregistry.Options{})
	id := reg.Register("b-value", testregistry.Schema{Schema: benchAvro})
	body, err := avro.MustParse(benchAvro).Encode(map[string]any{"time": time.UnixMilli(1714521600037), "user": "u3", "action": "view",
		"country": "SG", "device": "web", "amount": 12.5, "score": 3.5, "count": int64(7), "session": int64(1234), "ok": true})
	if err != nil {
		b.Fatal(err)
	}
	return frame(id, body), newDecoder(b, FormatAvro, Registry{URLs: []string{reg.URL}})
}

// BenchmarkDecodeAvro: one 10-field message to a row, warm cache.
func BenchmarkDecodeAvro(b *testing.B) {
	msg, d := benchAvroMessage(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := d.Decode(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}

const benchProto = `syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Bench {
  google.protobuf.Timestamp time = 1;
  string user = 2; string action = 3; string country = 4; string device = 5;
  double amount = 6; double score = 7; int64 count = 8; int64 session = 9; bool ok = 10;
}`

// benchProtoMessage is the bench row as a Protobuf message, and its
// decoder.
func benchProtoMessage(b *testing.B) ([]byte, *Decoder) {
	reg := startRegistry(b, testregistry.Options{})
	id := reg.Register("b-value", testregistry.Schema{Schema: benchProto, SchemaType: "PROTOBUF"})
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": benchProto})})}
	files, err := c.Compile(context.Background(), "schema.proto")
	if err != nil {
		b.Fatal(err)
	}
	md := files[0].Messages().Get(0)
	m := dynamicpb.NewMessage(md)
	f := md.Fields().ByName
	ts := dynamicpb.NewMessage(f("time").Message())
	ts.Set(f("time").Message().Fields().ByName("seconds"), protoreflect.ValueOfInt64(1714521600))
	ts.Set(f("time").Message().Fields().ByName("nanos"), protoreflect.ValueOfInt32(37_000_000))
	m.Set(f("time"), protoreflect.ValueOfMessage(ts))
	// Every field set, as sluice bench kafka's rows are.
	for name, v := range map[protoreflect.Name]protoreflect.Value{
		"user": protoreflect.ValueOfString("u3"), "action": protoreflect.ValueOfString("view"),
		"country": protoreflect.ValueOfString("SG"), "device": protoreflect.ValueOfString("web"),
		"amount": protoreflect.ValueOfFloat64(12.5), "score": protoreflect.ValueOfFloat64(3.5),
		"count": protoreflect.ValueOfInt64(7), "session": protoreflect.ValueOfInt64(1234), "ok": protoreflect.ValueOfBool(true),
	} {
		m.Set(f(name), v)
	}
	body, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return append(frame(id, []byte{0}), body...), newDecoder(b, FormatProtobuf, Registry{URLs: []string{reg.URL}})
}

// BenchmarkDecodeProtobuf: the same row as Protobuf, warm cache.
func BenchmarkDecodeProtobuf(b *testing.B) {
	msg, d := benchProtoMessage(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := d.Decode(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// benchAppendRows decodes msg into column batches of 1000 rows, as the
// stream writer does (ns/op and allocs/op are per row).
func benchAppendRows(b *testing.B, msg []byte, d *Decoder) {
	ctx := context.Background()
	var cb colbatch.Batch
	rows := d.Rows(&cb)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if cb.Len == 1000 {
			cb.Reset()
			rows = d.Rows(&cb)
		}
		if err := rows.Append(ctx, msg, cb.Len+1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendRowAvro: the Avro row into a column batch.
func BenchmarkAppendRowAvro(b *testing.B) {
	msg, d := benchAvroMessage(b)
	benchAppendRows(b, msg, d)
}

// BenchmarkAppendRowProtobuf: the Protobuf row into a column batch.
func BenchmarkAppendRowProtobuf(b *testing.B) {
	msg, d := benchProtoMessage(b)
	benchAppendRows(b, msg, d)
}

// BenchmarkDecodeMapAvro: the generic map decoder (twmb/avro into a map,
// then converted), the column decoder's reference.
func BenchmarkDecodeMapAvro(b *testing.B) {
	msg, d := benchAvroMessage(b)
	benchDecodeMap(b, msg, d)
}

// BenchmarkDecodeMapProtobuf: the generic map decoder (dynamicpb, then
// converted).
func BenchmarkDecodeMapProtobuf(b *testing.B) {
	msg, d := benchProtoMessage(b)
	benchDecodeMap(b, msg, d)
}

func benchDecodeMap(b *testing.B, msg []byte, d *Decoder) {
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := d.decodeMap(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConvertJSONSchema: the bench row's JSON Schema types given to
// a batch of 1000 rows the NDJSON column decoder made (a date-time string,
// numbers without a fraction made float64), as the stream writer does;
// ns/op and allocs/op are per row.
func BenchmarkConvertJSONSchema(b *testing.B) {
	reg := startRegistry(b, testregistry.Options{})
	id := reg.Register("b-value", testregistry.Schema{Schema: benchJSONSchema, SchemaType: "JSON"})
	d := newDecoder(b, FormatJSONSchema, Registry{URLs: []string{reg.URL}})
	ctx := context.Background()
	msg := frame(id, []byte(`{}`))
	const rows = 1000
	var cb colbatch.Batch
	fill := func() {
		cb.Reset()
		for r := range rows {
			row := cb.AddRow(r + 1)
			cb.Set(cb.ColumnOf("time"), row, time.UnixMilli(1714521600000+int64(r)*37).UTC().Format(time.RFC3339Nano))
			cb.Set(cb.ColumnOf("amount"), row, int64(r%500))
			cb.Set(cb.ColumnOf("count"), row, int64(r%13))
			cb.Set(cb.ColumnOf("user"), row, "u3")
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		jr := d.JSONRows()
		_, types, err := jr.Body(ctx, msg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := jr.Convert(&cb, 0, rows, types); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
}

// benchJSONSchema is sluice bench kafka's row as a JSON Schema.
const benchJSONSchema = `{"type":"object","properties":{"time":{"type":"string","format":"date-time"},
 "user":{"type":"string"},"amount":{"type":"number"},"count":{"type":"integer"}}}`
