package kafkabench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/avro"

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

// consumeRegistry is the none case with the rows as Avro messages in the
// Schema Registry wire format (a registry started for the case).
func (b *bench) consumeRegistry(ctx context.Context, name string) (Result, error) {
	reg, err := testregistry.Start(testregistry.Options{})
	if err != nil {
		return Result{}, err
	}
	defer reg.Close()
	schema, err := avro.Parse(avroSchema)
	if err != nil {
		return Result{}, err
	}
	id := reg.Register("bench-value", testregistry.Schema{Schema: avroSchema})
	fmt.Fprintf(b.opts.Log, "case %s: producing %d messages\n", name, b.opts.Rows)
	var encErr error
	topic, err := b.newTopicOf(ctx, b.opts.Rows, func(k int) []byte {
		r := row(k, b.opts.Users)
		msg, err := schema.AppendEncode(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), &r)
		if err != nil && encErr == nil {
			encErr = err
		}
		return msg
	})
	if err = cmp(encErr, err); err != nil {
		return Result{}, err
	}
	return b.consumeTopic(name, topic, "", fmt.Sprintf(", format: avro, schema_registry: {urls: [%s]}", reg.URL), 1)
}
