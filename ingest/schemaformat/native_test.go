package schemaformat

import (
	"context"
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
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
 {"name":"huge","type":{"type":"bytes","logicalType":"decimal","precision":45,"scale":1}},
 {"name":"opt","type":["null",{"type":"int","logicalType":"date"}]}]}`

// TestAvroNativeValues: a registry's date, time-micros and time-millis,
// uuid (string and fixed), bytes and decimals of up to 38 digits are
// coltype's values, by the column decoder and the map decoder alike; a
// wider decimal (precision 45) stays its exact text.
func TestAvroNativeValues(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("n-value", testregistry.Schema{Schema: nativeAvro})
	d := newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	uuid := [16]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0}
	msg := frame(id, encode(t, nativeAvro, map[string]any{
		"day": time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), "at": 13*time.Hour + 45*time.Minute + 1000123*time.Microsecond,
		"atms": 90 * time.Second, "id": "123e4567-e89b-12d3-a456-426614174000", "idf": uuid,
		"raw": []byte{0, 1, 255}, "price": big.NewRat(-1250, 100), "pricef": big.NewRat(123456789, 10000),
		"wide": new(big.Rat).SetFrac(new(big.Int).Exp(big.NewInt(10), big.NewInt(25), nil), big.NewInt(10)),
		"huge": new(big.Rat).SetInt(new(big.Int).Neg(new(big.Int).Exp(big.NewInt(10), big.NewInt(39), nil))), "opt": nil,
	}))
	wide, err := coltype.ParseDecimal("1000000000000000000000000.0", 30, 1)
	if err != nil || wide.High == 0 {
		t.Fatalf("%+v %v", wide, err)
	}
	wide.Precision = 30
	want := map[string]any{
		"day": coltype.DateValue(20786), "at": coltype.TimeOfDayValue(49501000123), "atms": coltype.TimeOfDayValue(90_000_000),
		"id": coltype.UUIDValue(uuid), "idf": coltype.UUIDValue(uuid), "raw": coltype.BytesValue{0, 1, 255},
		"price": coltype.DecimalValue{Unscaled: -1250, Scale: 2, Precision: 10}, "pricef": coltype.DecimalValue{Unscaled: 123456789, Scale: 4, Precision: 18},
		"wide": wide, "huge": "-1" + strings.Repeat("0", 39) + ".0", "opt": nil,
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

const formatsJSONSchema = `{"type":"object","properties":{
 "day":{"type":"string","format":"date"},
 "at":{"type":["string","null"],"format":"time"},
 "id":{"type":"string","format":"uuid"},
 "note":{"type":"string"}}}`

// TestJSONSchemaFormats: JSON Schema's string formats date, time and uuid
// are coltype's date, time of day and uuid, by the map decoder and by the
// column path (JSONTypes.Convert) alike; a time with an offset is the time
// of day in UTC, as a date-time is a UTC timestamp; a value not of its
// format is an error naming the property (its row goes to the dead
// letters), a string without a format stays a string.
func TestJSONSchemaFormats(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("f-value", testregistry.Schema{Schema: formatsJSONSchema, SchemaType: "JSON"})
	d := newDecoder(t, FormatJSONSchema, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	uuid := coltype.UUIDValue{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0}
	for body, want := range map[string]map[string]any{
		`{"day":"2026-11-29","at":"13:45:01.000123Z","id":"123e4567-e89b-12d3-a456-426614174000","note":"2026-11-29"}`: {
			"day": coltype.DateValue(20786), "at": coltype.TimeOfDayValue(49501000123), "id": uuid, "note": "2026-11-29"},
		`{"day":"1969-12-31","at":"01:00:00+02:00","id":"123E4567E89B12D3A456426614174000"}`: {
			"day": coltype.DateValue(-1), "at": coltype.TimeOfDayValue(23 * 3_600_000_000), "id": uuid},
		`{"day":"1970-01-01","at":"23:59:59.123456000-00:30","id":"123e4567-e89b-12d3-a456-426614174000"}`: {
			"day": coltype.DateValue(0), "at": coltype.TimeOfDayValue(1799*1_000_000 + 123456), "id": uuid},
		`{"day":"2026-11-29","at":null,"id":"123e4567-e89b-12d3-a456-426614174000"}`: {
			"day": coltype.DateValue(20786), "at": nil, "id": uuid},
	} {
		msg := frame(id, []byte(body))
		row, err := d.decodeMap(ctx, msg)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if !reflect.DeepEqual(row, want) {
			t.Errorf("map decoder %s:\n%#v\nwant\n%#v", body, row, want)
		}
		got, err := convertOne(ctx, d, msg)
		if err != nil {
			t.Fatalf("%s: column path: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("column path %s:\n%#v\nwant\n%#v", body, got, want)
		}
	}
	for body, prop := range map[string]string{
		`{"day":"2026-02-30"}`:                "day",
		`{"day":"29/11/2026"}`:                "day",
		`{"at":"24:00:00"}`:                   "at",
		`{"at":"12:00:00.1234567"}`:           "at",
		`{"at":"12:00:00+25:00"}`:             "at",
		`{"id":"123e4567-e89b-12d3-a456"}`:    "id",
		`{"id":"not a uuid at all, not one"}`: "id",
	} {
		msg := frame(id, []byte(body))
		if _, err := d.decodeMap(ctx, msg); err == nil || !strings.Contains(err.Error(), `"`+prop+`"`) {
			t.Errorf("map decoder %s: %v, want an error naming %q", body, err, prop)
		}
		if _, err := convertOne(ctx, d, msg); err == nil || !strings.Contains(err.Error(), `"`+prop+`"`) {
			t.Errorf("column path %s: %v, want an error naming %q", body, err, prop)
		}
	}
}

// convertOne is msg's row by the column path: its body's string values
// in a batch, given the schema's types by JSONTypes.Convert.
func convertOne(ctx context.Context, d *Decoder, msg []byte) (map[string]any, error) {
	body, types, err := d.JSONBody(ctx, msg)
	if err != nil {
		return nil, err
	}
	var row map[string]any
	if err := json.Unmarshal(body, &row); err != nil {
		return nil, err
	}
	var cb colbatch.Batch
	r := cb.AddRow(1)
	for k, v := range row {
		cb.Set(cb.ColumnOf(k), r, v)
	}
	if _, err := types.Convert(&cb, 0, 1); err != nil {
		return nil, err
	}
	return cb.Rows()[0], nil
}
