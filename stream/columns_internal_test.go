package stream

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/table"
)

// TestWriterColumnsMatchMaps: the by-column path (writeColumns) stores
// exactly what the map path stores for the same batches: the rows, the
// schema's columns and types, the metadata and hidden source columns, the
// dead letters and the results, for a mix of messages (changing keys,
// every JSON kind, empty and multi-line bodies, a body field a metadata
// column overwrites, an int column widened to float, a bad line, a gzip
// body, a value that does not fit, one too large), with an inferred and a
// static schema. The unusual batches fall back to the map path; the clean
// ones must not.
func TestWriterColumnsMatchMaps(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"ts":"2026-01-01T00:00:09Z","user":"z","n":9}`))
	zw.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msg := func(off int64, key string, body string) Message {
		m := Message{Body: []byte(body), Topic: "t", Partition: 2, Offset: off, Time: at.Add(time.Duration(off) * time.Second),
			Source: "kafka/t/2/id1", Headers: []Header{{Key: "h", Value: []byte("v" + key)}}}
		if key != "" {
			m.Key = []byte(key)
		}
		return m
	}
	batches := [][]Message{
		{ // clean: by column
			msg(10, "k0", `{"ts":"2026-01-01T00:00:00Z","user":"a","n":1,"x":1.5,"ok":true}`+"\n"+`{"ts":"2026-01-01T00:00:01Z","user":"b","n":2,"x":2,"ok":false,"nested":{"a":[1,2]}}`),
			msg(11, "", `{"ts":"2026-01-01T00:00:02Z","user":"c","n":null,"extra":"e","_key":"from the body"}`),
			msg(12, "k2", ``),
			msg(13, "k3", `{"ts":1767225603,"x":-1e3,"user":"d","n":3}`+"\n\n"),
			msg(14, "k4", `{"user":"e","ts":"2026-01-01T00:00:04Z","_key":"overwritten","big":12345678901234567890123}`),
		},
		{ // n widened from int to float (inferred), or not fitting (static)
			msg(15, "k5", `{"ts":"2026-01-01T00:00:05Z","user":"f","n":2.5,"x":3}`),
			msg(16, "k6", `{"ts":"2026-01-01T00:00:06Z","user":"g","n":4}`),
		},
		{ // a bad line and a gzip body
			msg(17, "k7", `{"ts":"2026-01-01T00:00:07Z","user":"h","n":5}`+"\n{broken\n"),
			msg(18, "k8", gz.String()),
		},
		{ // a value that does not fit, and a message too large
			msg(19, "k9", `{"ts":"2026-01-01T00:00:10Z","user":"i","ok":"yes"}`),
			msg(20, "k10", `{"ts":"2026-01-01T00:00:11Z","user":"j","n":6,"pad":"`+string(bytes.Repeat([]byte("x"), 300))+`"}`),
			msg(21, "k11", `{"ts":"2026-01-01T00:00:12Z","user":"k","n":7}`),
		},
	}
	static := []table.Column{{Name: "ts", Type: table.Timestamp}, {Name: "user", Type: table.String}, {Name: "n", Type: table.Int64},
		{Name: "x", Type: table.Float64}, {Name: "ok", Type: table.Bool}, {Name: "_key", Type: table.String}, {Name: "_offset", Type: table.Int64},
		{Name: "_timestamp", Type: table.Timestamp}, {Name: "extra", Type: table.String}, {Name: "nested", Type: table.JSON}, {Name: "big", Type: table.Float64}}
	// computed: a filter, a column reading a metadata column the static
	// schema lacks (_key), writing and deleting fields, a deadletter column
	// and a reject column (its batch falls back to the map path).
	computed := `
filters:
  - {name: not_c, func: "function main(row) return row.user ~= 'c' end"}
computed:
  - name: tag
    type: string
    on_error: deadletter
    func: "function main(row) if row.user == 'e' then error('no e') end row.x = nil; row.seen = 1; return tostring(row._key) .. ':' .. tostring(row.n) end"
  - name: strict
    type: int64
    on_error: reject
    func: "function main(row) if row.user == 'k' then error('no k') end return row._offset end"
`
	staticComputed := append(append([]table.Column(nil), static...), table.Column{Name: "tag", Type: table.String}, table.Column{Name: "strict", Type: table.Int64}, table.Column{Name: "seen", Type: table.Int64})
	for _, tc := range []struct {
		name    string
		columns []table.Column
		policy  ingest.Policy
		compute string
	}{{"inferred", nil, ingest.Skip, ""}, {"static", static, ingest.Reject, ""},
		{"inferred, computed", nil, ingest.Skip, computed}, {"static, computed", staticComputed, ingest.Reject, computed}} {
		t.Run(tc.name, func(t *testing.T) {
			stored := func(mapsOnly bool) (results []Result, schema []table.Column, rows, dead []table.Row, byColumn int64) {
				ctx := context.Background()
				s, err := table.Open(t.TempDir(), table.Options{Now: func() time.Time { return at }})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", Columns: tc.columns})
				if err != nil {
					t.Fatal(err)
				}
				tb.SetMaxColumns(20)
				dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
				if err != nil {
					t.Fatal(err)
				}
				target := Target{Store: s, Table: tb, DeadLetters: dl, Policy: tc.policy, SourceColumns: true, MaxMessageBytes: 300}
				if tc.columns != nil {
					// _key is a metadata column the schema lacks: not stored.
					target.Schema = map[string]compute.Type{"ts": compute.Timestamp, "n": compute.Int64, "_offset": compute.Int64, "_timestamp": compute.Timestamp}
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
				w, err := newWriter(target, "ndjson", []string{"key", "headers", "offset", "timestamp", "partition"}, kafkaFields, func(m *Message) string { return fmt.Sprintf("o%s/%d", m.Topic, m.Offset) })
				if err != nil {
					t.Fatal(err)
				}
				w.mapsOnly = mapsOnly
				w.now = func() time.Time { return at }
				for i, b := range batches {
					msgs := append([]Message(nil), b...) // unpack rewrites bodies
					for k := range msgs {
						msgs[k].Body = append([]byte(nil), msgs[k].Body...)
					}
					err := w.WriteBounded(ctx, msgs, func(*Message) []Position { return []Position{{Name: "p", Value: []byte{byte(i)}}} },
						func(_ *Message, res Result) { results = append(results, res) })
					if err != nil {
						t.Fatalf("batch %d: %v", i, err)
					}
					if i == 0 && !mapsOnly && w.byColumn.Load() != 1 {
						t.Fatalf("the clean batch was not stored by column")
					}
				}
				schema = tb.Schema()
				var names []string
				for _, c := range schema {
					names = append(names, c.Name)
				}
				// The row given to the callback is reused: keep copies.
				if err := tb.Query(ctx, table.Query{Columns: names}, func(r table.Row) error { rows = append(rows, maps.Clone(r)); return nil }); err != nil {
					t.Fatal(err)
				}
				if err := dl.Query(ctx, table.Query{}, func(r table.Row) error { dead = append(dead, maps.Clone(r)); return nil }); err != nil {
					t.Fatal(err)
				}
				return results, schema, rows, dead, w.byColumn.Load()
			}
			mapRes, mapSchema, mapRows, mapDead, _ := stored(true)
			colRes, colSchema, colRows, colDead, byColumn := stored(false)
			if byColumn == 0 || byColumn == int64(len(batches)) {
				t.Errorf("%d of %d batches stored by column: want the clean ones only", byColumn, len(batches))
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
			if len(mapRows) < 5 || len(mapDead) == 0 {
				t.Fatalf("%d rows, %d dead letters: the mix stored too little to compare", len(mapRows), len(mapDead))
			}
			hidden := 0
			for _, r := range colRows {
				if r[table.SourceBatchColumn] != nil && r[table.SourceOffsetColumn] != nil {
					hidden++
				}
			}
			if hidden != len(colRows) {
				t.Errorf("%d of %d rows have the source columns", hidden, len(colRows))
			}
			t.Logf("%d rows, %d dead letters, %d of %d batches by column; schema %v", len(colRows), len(colDead), byColumn, len(batches), colSchema)
		})
	}
}
