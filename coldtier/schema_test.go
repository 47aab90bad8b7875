package coldtier_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// TestWidenedColumnRetired: a store written without fixed types (an older
// sluice) widened column v from int64 to float64 after v was committed to
// Iceberg as long, which Iceberg cannot turn into double. The next runs
// still commit: the long column is retired as v__long (its files keep
// their values there) and a double v takes the name. Every value reads
// back: by sluice's two-tier query as v, by pyiceberg under v__long or v,
// by DuckDB from the files; later runs keep committing.
func TestWidenedColumnRetired(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "retired")
	st, tb := openTable(t, dir, nil)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	appendRows := func(rows ...table.Row) {
		t.Helper()
		if err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	var snapshots []int64
	compact := func(through time.Time) {
		t.Helper()
		stats, err := c.Compact(ctx, through, coldtier.Options{Remove: true})
		if err != nil {
			t.Fatalf("compact through %v: %v", through, err)
		}
		if stats.SnapshotID == 0 || slices.Contains(snapshots, stats.SnapshotID) {
			t.Fatalf("compact through %v: no new snapshot (%+v)", through, stats)
		}
		snapshots = append(snapshots, stats.SnapshotID)
	}
	appendRows(table.Row{"user": "a", "ts": day0, "n": int64(1), "v": int64(10)},
		table.Row{"user": "b", "ts": day0.Add(time.Hour), "n": int64(2), "v": int64(20)})
	compact(day0.Add(24 * time.Hour))
	appendRows(table.Row{"user": "a", "ts": day0.Add(25 * time.Hour), "n": int64(3), "v": 2.5})
	if typ := columnType(tb, "v"); typ != table.Float64 {
		t.Fatalf("v is %v in the store, want it widened to float64", typ)
	}
	compact(day0.Add(48 * time.Hour))
	appendRows(table.Row{"user": "b", "ts": day0.Add(49 * time.Hour), "n": int64(4), "v": int64(5)})
	compact(day0.Add(72 * time.Hour))

	want := map[float64]any{1: 10.0, 2: 20.0, 3: 2.5, 4: 5.0}
	got := map[float64]any{}
	for _, r := range tieredRows(t, c, table.Query{}) {
		got[r["n"].(float64)] = r["v"]
	}
	if !mapsEqual(got, want) {
		t.Errorf("sluice's query: v by n %v, want %v", got, want)
	}

	v := readIceberg(t, cfg, "events")
	types := map[string]string{}
	for _, f := range v.Schema {
		types[f[0].(string)] = f[1].(string)
	}
	if types["v"] != "double" || types["v__long"] != "long" {
		t.Errorf("Iceberg schema %v: want v double and v__long long", v.Schema)
	}
	py := map[float64]any{}
	for _, r := range v.PyIceberg {
		if r["v__long"] != nil {
			py[r["n"].(float64)] = r["v__long"]
		} else {
			py[r["n"].(float64)] = r["v"]
		}
	}
	if !mapsEqual(py, map[float64]any{1: 10.0, 2: 20.0, 3: 2.5, 4: 5.0}) {
		t.Errorf("pyiceberg: v or v__long by n %v; rows %v", py, v.PyIceberg)
	}
	duck := map[float64]any{}
	for _, r := range v.DuckDB {
		duck[r["n"].(float64)] = r["v"]
	}
	if !mapsEqual(duck, want) {
		t.Errorf("duckdb (the files' own column names): v by n %v, want %v", duck, want)
	}
}

// TestIcebergPromotes: an Iceberg table whose columns are int and float
// (created by another engine) takes sluice's int64 and float64 columns:
// the run promotes them to long and double (the promotions Iceberg
// allows) and commits, and a new column is added on the way.
func TestIcebergPromotes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "promotes")
	st, tb := openTable(t, dir, nil)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 2, Name: "user", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "n", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: 4, Name: "f", Type: iceberg.PrimitiveTypes.Float32})
	if err := coldtier.CreateIcebergTable(ctx, c, schema); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, []table.Row{{"user": "a", "ts": day0, "n": int64(1 << 40), "f": 0.1, "added": "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	v := readIceberg(t, cfg, "events")
	types := map[string]string{}
	for _, f := range v.Schema {
		types[f[0].(string)] = f[1].(string)
	}
	if types["n"] != "long" || types["f"] != "double" || types["added"] != "string" || len(types) != 5 {
		t.Errorf("Iceberg schema %v: want n long and f double in place (no retired column), added string", v.Schema)
	}
	if len(v.PyIceberg) != 1 || v.PyIceberg[0]["n"] != float64(1<<40) || v.PyIceberg[0]["f"] != 0.1 || v.PyIceberg[0]["added"] != "x" {
		t.Errorf("pyiceberg rows %v", v.PyIceberg)
	}
}

func columnType(tb *table.Table, name string) table.Type {
	for _, c := range tb.Schema() {
		if c.Name == name {
			return c.Type
		}
	}
	return 0
}

func mapsEqual(a, b map[float64]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
