package stream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/testregistry"
	"github.com/sluicedb/sluice/table"
)

const regColsV1 = `{"type":"record","name":"E","fields":[
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"user","type":"string"},
 {"name":"n","type":["null","long"]},{"name":"x","type":"double"},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"nested","type":{"type":"record","name":"N","fields":[{"name":"b","type":"string"},{"name":"a","type":{"type":"array","items":"long"}}]}}]}`

// regColsV2 adds a field.
const regColsV2 = `{"type":"record","name":"E","fields":[
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"user","type":"string"},
 {"name":"n","type":["null","long"]},{"name":"x","type":"double"},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"nested","type":{"type":"record","name":"N","fields":[{"name":"b","type":"string"},{"name":"a","type":{"type":"array","items":"long"}}]}},
 {"name":"note","type":["null","string"]}]}`

// TestWriterRegistryColumnsMatchMaps: Avro and JSON Schema messages from
// a registry take the by-column path and store what the map path stores (rows, schema,
// metadata and source columns, dead letters, results), a new schema
// version adding its column; a batch with a message that does not decode
// falls back to the map path, which names it a dead letter; a registry
// that is down fails the batch on the by-column path too, storing nothing.
func TestWriterRegistryColumnsMatchMaps(t *testing.T) {
	reg, err := testregistry.Start(testregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	v1 := reg.Register("e-value", testregistry.Schema{Schema: regColsV1})
	v2 := reg.Register("e-value", testregistry.Schema{Schema: regColsV2})
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	enc := func(id int, schema string, row map[string]any) []byte {
		b, err := avro.MustParse(schema).Encode(row)
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), b...)
	}
	row := func(i int) map[string]any {
		var n any
		if i%3 != 0 {
			n = int64(i * 100)
		}
		return map[string]any{"ts": at.Add(time.Duration(i) * time.Second), "user": fmt.Sprintf("u<%d>", i), "n": n, "x": float64(i) / 4,
			"price": big.NewRat(int64(i*1001), 100), "nested": map[string]any{"b": "&", "a": []any{int64(i), int64(-i)}}}
	}
	msg := func(off int64, body []byte) Message {
		return Message{Body: body, Topic: "t", Partition: 1, Offset: off, Time: at.Add(time.Duration(off) * time.Second), Source: "kafka/t/1/id1", Key: []byte(fmt.Sprint("k", off))}
	}
	var batches [][]Message
	var first []Message
	for i := range 5 {
		first = append(first, msg(int64(i), enc(v1, regColsV1, row(i))))
	}
	batches = append(batches, first)
	r5, r6 := row(5), row(6)
	r5["note"], r6["note"] = "a note", nil
	batches = append(batches, []Message{msg(5, enc(v2, regColsV2, r5)), msg(6, enc(v2, regColsV2, r6))})
	// A body cut short: the batch falls back to the map path.
	bad := enc(v1, regColsV1, row(8))
	batches = append(batches, []Message{msg(7, enc(v1, regColsV1, row(7))), msg(8, bad[:len(bad)-2])})
	// The same rows as JSON Schema messages: number, integer and date-time
	// properties, one the schema does not declare (inferred), a nested
	// object; then a batch with an integer property holding 1.5 (a dead
	// letter, by the map path).
	jsonID := reg.Register("j-value", testregistry.Schema{SchemaType: "JSON", Schema: `{"type":"object","properties":{
 "ts":{"type":"string","format":"date-time"},"user":{"type":"string"},"n":{"type":["integer","null"]},"x":{"type":"number"},
 "nested":{"type":"object"}}}`})
	// A second version (its integer n a number now) for one message of a
	// batch: the batch's rows are converted in runs of one schema.
	jsonID2 := reg.Register("j-value", testregistry.Schema{SchemaType: "JSON", Schema: `{"type":"object","properties":{
 "ts":{"type":"string","format":"date-time"},"user":{"type":"string"},"n":{"type":"number"},"x":{"type":"number"},"note":{"type":"string"}}}`})
	jsonMsgOf := func(id int, off int64, text string) Message {
		return msg(off, append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), text...))
	}
	jsonMsg := func(off int64, text string) Message { return jsonMsgOf(jsonID, off, text) }
	var jsonBatches [][]Message
	var jfirst []Message
	for i := range 5 {
		n := "null"
		if i%3 != 0 {
			n = fmt.Sprint(i * 100)
		}
		jfirst = append(jfirst, jsonMsg(int64(i), fmt.Sprintf(`{"ts":"2026-01-02T03:04:0%dZ","user":"u<%d>","n":%s,"x":%d,"price":"%d.%02d","nested":{"b":"&","a":[%d,%d]}}`,
			i, i, n, i, i*10, i, i, -i)))
	}
	jsonBatches = append(jsonBatches, jfirst,
		[]Message{jsonMsg(5, `{"ts":"2026-01-02T03:04:10.5Z","user":"u5","n":5,"x":2.5,"note":"a note"}`), jsonMsgOf(jsonID2, 6, `{"ts":"2026-01-02T03:04:11Z","user":"u6","n":6,"x":1e2}`), jsonMsg(7, `{"ts":"2026-01-02T03:04:11Z","user":"u7","n":7,"x":4}`)},
		[]Message{jsonMsg(8, `{"ts":"2026-01-02T03:04:12Z","user":"u8","n":8,"x":3}`), jsonMsg(9, `{"ts":"2026-01-02T03:04:13Z","user":"u9","n":1.5,"x":3}`)})
	computed := `
computed:
  - name: tag
    type: string
    on_error: deadletter
    func: "function main(row) if row.user == 'u<2>' then error('no 2') end return row.user .. ':' .. tostring(row._key) end"
`
	static := []table.Column{{Name: "ts", Type: table.Timestamp}, {Name: "user", Type: table.String}, {Name: "n", Type: table.Int64}, {Name: "x", Type: table.Float64},
		{Name: "price", Type: table.String}, {Name: "nested", Type: table.JSON}, {Name: "note", Type: table.String}, {Name: "_offset", Type: table.Int64}}
	for _, tc := range []struct {
		name    string
		format  string
		batches [][]Message
		columns []table.Column
		compute string
	}{{"avro, inferred", schemaformat.FormatAvro, batches, nil, ""}, {"avro, static", schemaformat.FormatAvro, batches, static, ""},
		{"avro, inferred, computed", schemaformat.FormatAvro, batches, nil, computed},
		{"json_schema, inferred", schemaformat.FormatJSONSchema, jsonBatches, nil, ""}, {"json_schema, static", schemaformat.FormatJSONSchema, jsonBatches, static, ""},
		{"json_schema, inferred, computed", schemaformat.FormatJSONSchema, jsonBatches, nil, computed}} {
		t.Run(tc.name, func(t *testing.T) {
			batches := tc.batches
			stored := func(mapsOnly bool) (results []Result, schema []table.Column, rows, dead []table.Row, byColumn int64) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				s, err := table.Open(t.TempDir(), table.Options{Now: func() time.Time { return at }})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", Columns: tc.columns})
				if err != nil {
					t.Fatal(err)
				}
				dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
				if err != nil {
					t.Fatal(err)
				}
				target := Target{Store: s, Table: tb, DeadLetters: dl, Policy: ingest.Skip, SourceColumns: true}
				if tc.columns != nil {
					target.Schema = map[string]compute.Type{"ts": compute.Timestamp, "n": compute.Int64, "_offset": compute.Int64}
				}
				if tc.compute != "" {
					cfg, err := compute.ParseConfig([]byte(tc.compute))
					if err != nil {
						t.Fatal(err)
					}
					p, err := compute.New(ctx, cfg, compute.Options{})
					if err != nil {
						t.Fatal(err)
					}
					defer p.Close()
					target.Compute = p
				}
				w, err := newWriter(target, "ndjson", []string{"key", "offset"}, kafkaFields, func(m *Message) string { return fmt.Sprintf("o%s/%d", m.Topic, m.Offset) })
				if err != nil {
					t.Fatal(err)
				}
				dec, err := schemaformat.New(tc.format, schemaformat.Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				w.registry = dec
				w.mapsOnly = mapsOnly
				w.now = func() time.Time { return at }
				for i, b := range batches {
					msgs := append([]Message(nil), b...)
					err := w.WriteBounded(ctx, msgs, func(*Message) []Position { return []Position{{Name: "p", Value: []byte{byte(i)}}} },
						func(_ *Message, res Result) { results = append(results, res) })
					if err != nil {
						t.Fatalf("batch %d: %v", i, err)
					}
				}
				schema = tb.Schema()
				var names []string
				for _, c := range schema {
					names = append(names, c.Name)
				}
				if err := tb.Query(ctx, table.Query{Columns: names}, func(r table.Row) error { rows = append(rows, jsonValues(t, r)); return nil }); err != nil {
					t.Fatal(err)
				}
				if err := dl.Query(ctx, table.Query{}, func(r table.Row) error { dead = append(dead, deadRowValues(t, r)); return nil }); err != nil {
					t.Fatal(err)
				}
				return results, schema, rows, dead, w.byColumn.Load()
			}
			mapRes, mapSchema, mapRows, mapDead, _ := stored(true)
			colRes, colSchema, colRows, colDead, byColumn := stored(false)
			if byColumn != 2 {
				t.Errorf("%d of %d batches stored by column: want the 2 clean ones", byColumn, len(batches))
			}
			if !reflect.DeepEqual(colSchema, mapSchema) {
				t.Errorf("schema by column %v\nby map %v", colSchema, mapSchema)
			}
			if !reflect.DeepEqual(colRows, mapRows) {
				t.Errorf("%d rows by column, %d by map", len(colRows), len(mapRows))
				for i := range min(len(colRows), len(mapRows)) {
					if !reflect.DeepEqual(colRows[i], mapRows[i]) {
						t.Errorf("row %d by column %v\nby map %v", i, colRows[i], mapRows[i])
					}
				}
			}
			if !reflect.DeepEqual(colDead, mapDead) {
				t.Errorf("dead letters by column:\n%v\nby map:\n%v", colDead, mapDead)
			}
			if !reflect.DeepEqual(colRes, mapRes) {
				t.Errorf("results by column %+v\nby map %+v", colRes, mapRes)
			}
			if len(mapRows) < 7 || len(mapDead) == 0 {
				t.Fatalf("%d rows, %d dead letters: too little to compare", len(mapRows), len(mapDead))
			}
			if _, ok := colRows[len(colRows)-1]["note"]; !ok {
				t.Errorf("no note column: the second schema version's field was not added")
			}
			t.Logf("%d rows, %d dead letters, %d of %d batches by column; schema %v", len(colRows), len(colDead), byColumn, len(batches), colSchema)
		})
	}

	t.Run("registry down", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := table.Open(t.TempDir(), table.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		tb, err := s.Table(table.Config{Name: "events", SortBy: "ts"})
		if err != nil {
			t.Fatal(err)
		}
		w, err := newWriter(Target{Store: s, Table: tb}, "ndjson", nil, kafkaFields, func(m *Message) string { return fmt.Sprintf("o%d", m.Offset) })
		if err != nil {
			t.Fatal(err)
		}
		dec, err := schemaformat.New(schemaformat.FormatAvro, schemaformat.Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		w.registry = dec
		reg.SetDown(true)
		defer reg.SetDown(false)
		_, err = w.Write(ctx, append([]Message(nil), first...), []Position{{Name: "p", Value: []byte{1}}})
		if !errors.Is(err, schemaformat.ErrUnavailable) {
			t.Fatalf("Write with the registry down: %v, want ErrUnavailable", err)
		}
		if pos, err := s.Position("p"); err != nil || pos != nil {
			t.Errorf("position %q (%v) after a failed batch: want none", pos, err)
		}
		n := 0
		if err := tb.Query(ctx, table.Query{}, func(table.Row) error { n++; return nil }); err != nil || n != 0 {
			t.Errorf("%d rows (%v) after a failed batch: want none", n, err)
		}
	})
}

// jsonValues is r with its JSON column values parsed: the map path writes
// nested values with encoding/json (sorted keys, HTML escaped), the column
// path with jsonw in the schema's order; the values are the same.
func jsonValues(t *testing.T, r table.Row) table.Row {
	out := maps.Clone(r)
	for k, v := range out {
		if raw, ok := v.(json.RawMessage); ok {
			var x any
			if err := json.Unmarshal(raw, &x); err != nil {
				t.Fatalf("column %s: %v", k, err)
			}
			out[k] = x
		}
	}
	return out
}

// deadRowValues is a dead letter with its row's JSON text parsed: the
// row's nested values are written in the schema's order by column, with
// sorted keys by map.
func deadRowValues(t *testing.T, r table.Row) table.Row {
	out := maps.Clone(r)
	if text, ok := out["row"].(string); ok && out["loader"] != "poison" {
		var x any
		if err := json.Unmarshal([]byte(text), &x); err != nil {
			t.Fatalf("dead letter row %q: %v", text, err)
		}
		out["row"] = x
	}
	return out
}
