package schemaformat

import (
	"context"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

const nativeAvro = `{"type":"record","name":"N","fields":[
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"at","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"atms","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"id","type":{"type":"string","logicalType":"uuid"}},
 {"name":"idf","type":{"type":"fixed","name":"U16","size":16,"logicalType":"uuid"}},
 {"name":"raw","type":"bytes"},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"pricef","type":{"type":"fixed","name":"D8","size":8,"logicalType":"decimal","precision":18,"scale":4}},
 {"name":"wide","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":1}},
 {"name":"opt","type":["null",{"type":"int","logicalType":"date"}]}]}`

// TestAvroNativeValues: a registry's date, time-micros and time-millis,
// uuid (string and fixed), bytes and decimals of up to 18 digits are
// coltype's values, by the column decoder and the map decoder alike; a
// wider decimal stays its exact text.
func TestAvroNativeValues(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("n-value", testregistry.Schema{Schema: nativeAvro})
	d := newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	uuid := [16]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0}
	msg := frame(id, encode(t, nativeAvro, map[string]any{
		"day": time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), "at": 13*time.Hour + 45*time.Minute + 1000123*time.Microsecond,
		"atms": 90 * time.Second, "id": "123e4567-e89b-12d3-a456-426614174000", "idf": uuid,
		"raw": []byte{0, 1, 255}, "price": big.NewRat(-1250, 100), "pricef": big.NewRat(123456789, 10000),
		"wide": new(big.Rat).SetFrac(new(big.Int).Exp(big.NewInt(10), big.NewInt(25), nil), big.NewInt(10)), "opt": nil,
	}))
	want := map[string]any{
		"day": coltype.DateValue(20786), "at": coltype.TimeOfDayValue(49501000123), "atms": coltype.TimeOfDayValue(90_000_000),
		"id": coltype.UUIDValue(uuid), "idf": coltype.UUIDValue(uuid), "raw": coltype.BytesValue{0, 1, 255},
		"price": coltype.DecimalValue{Unscaled: -1250, Scale: 2}, "pricef": coltype.DecimalValue{Unscaled: 123456789, Scale: 4},
		"wide": "1000000000000000000000000.0", "opt": nil,
	}
	row, err := d.decodeMap(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(row, want) {
		t.Errorf("map decoder:\n%#v\nwant\n%#v", row, want)
	}
	var cb colbatch.Batch
	if err := d.Rows(&cb).Append(context.Background(), msg, 1); err != nil {
		t.Fatal(err)
	}
	if got := cb.Rows()[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("column decoder:\n%#v\nwant\n%#v", got, want)
	}
}
