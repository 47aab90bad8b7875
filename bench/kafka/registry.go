package kafkabench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/avro"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicedb/sluice/internal/testregistry"
)

// avroSchema is message's row as an Avro record.
const avroSchema = `{"type":"record","name":"Bench","fields":[
 {"name":"time","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"user","type":"string"},{"name":"action","type":"string"},{"name":"country","type":"string"},
 {"name":"device","type":"string"},{"name":"amount","type":"double"},{"name":"score","type":"double"},
 {"name":"count","type":"long"},{"name":"session","type":"long"},{"name":"ok","type":"boolean"}]}`

// benchRow is the k-th row of message as Avro's encoder takes it.
type benchRow struct {
	Time    time.Time `avro:"time"`
	User    string    `avro:"user"`
	Action  string    `avro:"action"`
	Country string    `avro:"country"`
	Device  string    `avro:"device"`
	Amount  float64   `avro:"amount"`
	Score   float64   `avro:"score"`
	Count   int64     `avro:"count"`
	Session int64     `avro:"session"`
	OK      bool      `avro:"ok"`
}

func row(k, users int) benchRow {
	actions := [...]string{"view", "buy", "click", "share"}
	countries := [...]string{"SG", "ID", "MY", "TH", "VN", "PH"}
	devices := [...]string{"ios", "android", "web"}
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	return benchRow{
		Time: base.Add(time.Duration(k) * 37 * time.Millisecond), User: fmt.Sprintf("u%d", k%users), Action: actions[k%4],
		Country: countries[k%6], Device: devices[k%3], Amount: float64(k%500) + float64(k%100)/100, Score: float64(k%97) + 0.5,
		Count: int64(k % 13), Session: int64(k / 7), OK: k%2 == 0,
	}
}

// protoSchema is message's row as a Protobuf message (time as a
// google.protobuf.Timestamp).
const protoSchema = `syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Bench {
  google.protobuf.Timestamp time = 1;
  string user = 2; string action = 3; string country = 4; string device = 5;
  double amount = 6; double score = 7; int64 count = 8; int64 session = 9; bool ok = 10;
}`

// jsonSchema is message's row as a JSON Schema (what the json_schema case
// registers; its messages are the row as JSON).
const jsonSchema = `{"type":"object","properties":{"time":{"type":"string","format":"date-time"},
 "user":{"type":"string"},"action":{"type":"string"},"country":{"type":"string"},"device":{"type":"string"},
 "amount":{"type":"number"},"score":{"type":"number"},"count":{"type":"integer"},"session":{"type":"integer"},"ok":{"type":"boolean"}}}`

// consumeRegistry is the none case with the rows as Avro (name "avro"),
// JSON Schema ("json_schema") or Protobuf messages in the Schema Registry wire format (a registry
// started for the case).
func (b *bench) consumeRegistry(ctx context.Context, name string) (Result, error) {
	reg, err := testregistry.Start(testregistry.Options{})
	if err != nil {
		return Result{}, err
	}
	defer reg.Close()
	var encode func(dst []byte, r benchRow) ([]byte, error)
	var id int
	switch name {
	case "avro":
		schema, err := avro.Parse(avroSchema)
		if err != nil {
			return Result{}, err
		}
		id = reg.Register("bench-value", testregistry.Schema{Schema: avroSchema})
		encode = func(dst []byte, r benchRow) ([]byte, error) { return schema.AppendEncode(dst, &r) }
	case "json_schema":
		id = reg.Register("bench-value", testregistry.Schema{Schema: jsonSchema, SchemaType: "JSON"})
		encode = func(dst []byte, r benchRow) ([]byte, error) {
			b, err := json.Marshal(map[string]any{"time": r.Time.Format(time.RFC3339Nano), "user": r.User, "action": r.Action,
				"country": r.Country, "device": r.Device, "amount": r.Amount, "score": r.Score, "count": r.Count, "session": r.Session, "ok": r.OK})
			return append(dst, b...), err
		}
	default:
		c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"bench.proto": protoSchema})})}
		files, err := c.Compile(ctx, "bench.proto")
		if err != nil {
			return Result{}, err
		}
		md := files[0].Messages().Get(0)
		f := md.Fields().ByName
		tsd := f("time").Message()
		id = reg.Register("bench-value", testregistry.Schema{Schema: protoSchema, SchemaType: "PROTOBUF"})
		encode = func(dst []byte, r benchRow) ([]byte, error) {
			m := dynamicpb.NewMessage(md)
			ts := dynamicpb.NewMessage(tsd)
			ts.Set(tsd.Fields().ByName("seconds"), protoreflect.ValueOfInt64(r.Time.Unix()))
			ts.Set(tsd.Fields().ByName("nanos"), protoreflect.ValueOfInt32(int32(r.Time.Nanosecond())))
			m.Set(f("time"), protoreflect.ValueOfMessage(ts))
			for name, v := range map[protoreflect.Name]protoreflect.Value{
				"user": protoreflect.ValueOfString(r.User), "action": protoreflect.ValueOfString(r.Action),
				"country": protoreflect.ValueOfString(r.Country), "device": protoreflect.ValueOfString(r.Device),
				"amount": protoreflect.ValueOfFloat64(r.Amount), "score": protoreflect.ValueOfFloat64(r.Score),
				"count": protoreflect.ValueOfInt64(r.Count), "session": protoreflect.ValueOfInt64(r.Session), "ok": protoreflect.ValueOfBool(r.OK),
			} {
				m.Set(f(name), v)
			}
			return proto.MarshalOptions{}.MarshalAppend(append(dst, 0), m) // message indexes [0]
		}
	}
	fmt.Fprintf(b.opts.Log, "case %s: producing %d messages\n", name, b.opts.Rows)
	var encErr error
	topic, err := b.newTopicOf(ctx, b.opts.Rows, func(k int) []byte {
		msg, err := encode(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), row(k, b.opts.Users))
		if err != nil && encErr == nil {
			encErr = err
		}
		return msg
	})
	if err = cmp(encErr, err); err != nil {
		return Result{}, err
	}
	return b.consumeTopic(name, topic, "", fmt.Sprintf(", format: %s, schema_registry: {urls: [%s]}", name, reg.URL), 1)
}
