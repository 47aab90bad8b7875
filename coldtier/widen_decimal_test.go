package coldtier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// widenedView is what testdata/widen_decimal.py prints.
type widenedView struct {
	Schema      map[string][2]any   `json:"schema"` // name → [field id, type]
	PyIceberg   []map[string]any    `json:"pyiceberg"`
	DuckDB      []map[string]any    `json:"duckdb"`
	DuckDBType  string              `json:"duckdb_type"`
	DuckDBWhy   string              `json:"duckdb_why"`
	byReader    map[string][]string // reader → m's texts in n's order
	fieldOfM    float64
	typeOfM     string
	otherFields []string
}

func readWidened(t *testing.T, cfg coldtier.Config, name string) widenedView {
	t.Helper()
	coldtest.Require(t, pyErr)
	script, err := os.ReadFile("testdata/widen_decimal.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := pyPool.Run(ctx, string(script), cfg.Catalog.URI, "sluice."+name, s3.Endpoint, coldtest.AccessKey, coldtest.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	var v widenedView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("widen_decimal.py: %v: %.500s", err, out)
	}
	if v.DuckDBWhy != "" {
		t.Fatalf("DuckDB's iceberg_scan not run: %s", v.DuckDBWhy)
	}
	v.fieldOfM, _ = v.Schema["m"][0].(float64)
	v.typeOfM, _ = v.Schema["m"][1].(string)
	for name := range v.Schema {
		if name != "m" && name != "n" && name != "user" && name != "ts" {
			v.otherFields = append(v.otherFields, name)
		}
	}
	v.byReader = map[string][]string{"pyiceberg": byN(t, v.PyIceberg), "duckdb": byN(t, v.DuckDB)}
	return v
}

// byN is each row's m (its text, "null" for none) in n's order.
func byN(t *testing.T, rows []map[string]any) []string {
	t.Helper()
	sort.Slice(rows, func(i, j int) bool { return rows[i]["n"].(float64) < rows[j]["n"].(float64) })
	out := make([]string, len(rows))
	for i, r := range rows {
		switch m := r["m"].(type) {
		case nil:
			out[i] = "null"
		case string:
			out[i] = m
		case coltype.DecimalValue:
			out[i] = m.String()
		default:
			t.Fatalf("row %v: m is %T", r, m)
		}
	}
	return out
}

// sluiceDecimals is byN of sluice's two-tier query q (the decimals as
// they are: tieredRows canonicalises numbers to float64).
func sluiceDecimals(t *testing.T, c *coldtier.Compactor, q table.Query) []string {
	t.Helper()
	var rows []map[string]any
	err := c.QueryValues(context.Background(), q, true, func(cols []table.Column, vals []any) error {
		r := map[string]any{}
		for i, v := range vals {
			r[cols[i].Name] = v
		}
		if n, ok := r["n"].(int64); ok {
			r["n"] = float64(n)
		}
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return byN(t, rows)
}

// widenedValues are m by n in the table widenedTable makes ("" for a row
// without m): the first run's decimal(18,2), then the second run's, of
// blocks stored before and after the widening.
var widenedValues = []string{"-12.50", "0.07", "9999999999999999.99", "", // the first run's: decimal(18,2)
	"1.25", "-9999999999999999.99", // the second run's, stored before the widening
	"-1234567890123456789012345678.91", "123456789012345678901234567890123456.78", "3.00", ""} // after it

// widenedWant is widenedValues as byN gives them.
func widenedWant() []string {
	want := make([]string, len(widenedValues))
	for n, v := range widenedValues {
		want[n] = v
		if v == "" {
			want[n] = "null"
		}
	}
	return want
}

// widenedTable makes table name, with fixed types as a table with
// compact.iceberg is served, in cfg's catalog: m is committed as
// decimal(18,2), widens in the store when a value needs 30 digits, and
// the second run promotes it. before is what widen_decimal.py read
// between the runs (nil unless read is true). The table's store is under
// dir; the caller closes both.
func widenedTable(ctx context.Context, t *testing.T, dir string, cfg coldtier.Config, name string, read bool) (st *table.Store, c *coldtier.Compactor, before *widenedView) {
	t.Helper()
	cfg.StateDir = dir
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := st.Table(table.Config{Name: name, HashBy: "user", SortBy: "ts"})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	tb.SetFixedTypes(true)
	if c, err = coldtier.Open(ctx, cfg, tb); err != nil {
		st.Close()
		t.Fatal(err)
	}
	appendN := func(from, to int) {
		t.Helper()
		var rows []table.Row
		for n := from; n < to; n++ {
			r := table.Row{"user": fmt.Sprintf("u%d", n%3), "ts": day0.Add(time.Duration(n) * 3 * time.Hour), "n": int64(n)}
			if v := widenedValues[n]; v != "" {
				d, err := coltype.ParseDecimal(v, 38, 2)
				if err != nil {
					t.Fatal(err)
				}
				d.Precision = 10 // a registry's decimal(10,2)
				r["m"] = d
			}
			rows = append(rows, r)
		}
		if err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	compact := func(through time.Time) {
		t.Helper()
		if _, err := c.Compact(ctx, through, coldtier.Options{Remove: true}); err != nil {
			t.Fatalf("compact through %v: %v", through, err)
		}
	}
	appendN(0, 4)
	compact(day0.Add(24 * time.Hour))
	if read {
		v := readWidened(t, cfg, name)
		before = &v
	}
	appendN(4, 6) // blocks of decimal(18,2)
	appendN(6, 10)
	if typ := columnType(tb, "m"); typ != coltype.Decimal(38, 2) {
		t.Fatalf("m is %v in the store, want it widened to decimal(38,2)", typ)
	}
	compact(day0.Add(48 * time.Hour))
	return st, c, before
}

// TestDecimalPromotedInPlace: a cold tier's decimal(18,2) column, committed
// to Iceberg as decimal(18,2) (Parquet int64), widens in the store to
// decimal(38,2) when a value needs 30 digits; the next run promotes the
// Iceberg column in place (the same field id, no retired column) and
// writes fixed_len_byte_array(16), in a file that also holds the rows of
// blocks written before the widening. Every value reads back, old files
// included: by sluice's two-tier query (a where clause across both kinds
// of file too), by pyiceberg and by DuckDB's iceberg_scan (Spark:
// TestNativeTypesIceberg's Spark run reads the same table).
func TestDecimalPromotedInPlace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "widen-decimal")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, c, before := widenedTable(ctx, t, dir, cfg, "events", true)
	defer st.Close()
	defer c.Close()
	if before.typeOfM != "decimal(18, 2)" {
		t.Fatalf("Iceberg's m before the widening: %q, want decimal(18, 2)", before.typeOfM)
	}

	want := widenedWant()
	if got := sluiceDecimals(t, c, table.Query{}); !reflect.DeepEqual(got, want) {
		t.Errorf("sluice's query: m by n %q, want %q", got, want)
	}
	var wantWhere []string // m > 1, across the decimal(18,2) and decimal(38,2) files
	for _, v := range widenedValues {
		if v != "" && v[0] != '-' && v != "0.07" {
			wantWhere = append(wantWhere, v)
		}
	}
	if got := sluiceDecimals(t, c, table.Query{Where: []table.Predicate{{Column: "m", Op: table.Gt, Value: "1"}}}); !reflect.DeepEqual(got, wantWhere) {
		t.Errorf("sluice's query where m > 1: %q, want %q", got, wantWhere)
	}

	after := readWidened(t, cfg, "events")
	if after.typeOfM != "decimal(38, 2)" || after.fieldOfM != before.fieldOfM || len(after.otherFields) != 0 {
		t.Errorf("Iceberg schema %v, want m decimal(38, 2) with its field id %v (promoted in place, nothing retired)", after.Schema, before.fieldOfM)
	}
	if after.DuckDBType != "DECIMAL(38,2)" {
		t.Errorf("DuckDB's type of m: %q, want DECIMAL(38,2)", after.DuckDBType)
	}
	for reader, got := range after.byReader {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: m by n %q, want %q", reader, got, want)
		}
	}
}

// sparkWidened checks Spark's answer to widenedStatement (a SparkQuery
// result line) against widenedTable's values.
func sparkWidened(t *testing.T, js string) {
	t.Helper()
	var res struct {
		Schema struct {
			Fields []struct {
				Name string          `json:"name"`
				Type json.RawMessage `json:"type"`
			} `json:"fields"`
		} `json:"schema"`
		Rows []map[string]any `json:"rows"`
	}
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("Spark's output: %v: %.300s", err, js)
	}
	for _, f := range res.Schema.Fields {
		if f.Name == "m" && string(f.Type) != `"decimal(38,2)"` {
			t.Errorf("Spark's type of m: %s, want decimal(38,2)", f.Type)
		}
	}
	for _, r := range res.Rows {
		r["n"], _ = r["n"].(json.Number).Float64()
		if m, ok := r["m"].(json.Number); ok {
			r["m"] = string(m)
		}
	}
	if got, want := byN(t, res.Rows), widenedWant(); !reflect.DeepEqual(got, want) {
		t.Errorf("spark: m by n %q, want %q", got, want)
	}
}

// widenedStatement is Spark's query of widenedTable's table name.
func widenedStatement(name string) string {
	return "SELECT n, m FROM sluice.sluice." + name + " ORDER BY n"
}
