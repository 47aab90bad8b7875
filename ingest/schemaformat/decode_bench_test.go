package schemaformat

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/sluicedb/sluice/internal/testregistry"
)

// benchAvro is sluice bench kafka's row (bench/kafka) as Avro.
const benchAvro = `{"type":"record","name":"Bench","fields":[
 {"name":"time","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"user","type":"string"},{"name":"action","type":"string"},{"name":"country","type":"string"},
 {"name":"device","type":"string"},{"name":"amount","type":"double"},{"name":"score","type":"double"},
 {"name":"count","type":"long"},{"name":"session","type":"long"},{"name":"ok","type":"boolean"}]}`

// BenchmarkDecodeAvro: one 10-field message to a row, warm cache.
func BenchmarkDecodeAvro(b *testing.B) {
	reg := startRegistry(b, testregistry.Options{})
	id := reg.Register("b-value", testregistry.Schema{Schema: benchAvro})
	body, err := avro.MustParse(benchAvro).Encode(map[string]any{"time": time.UnixMilli(1714521600037), "user": "u3", "action": "view",
		"country": "SG", "device": "web", "amount": 12.5, "score": 3.5, "count": int64(7), "session": int64(1234), "ok": true})
	if err != nil {
		b.Fatal(err)
	}
	msg := frame(id, body)
	d := newDecoder(b, FormatAvro, Registry{URLs: []string{reg.URL}})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := d.Decode(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}
