package coldtier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// nestedFields are the nested values a row of nestedRows holds in its doc
// column (nil: the field is missing or doc is null).
type nestedFields struct {
	N     int64
	City  *string
	SKU   *string
	Color *string
}

var nestedCities = []string{"Oslo", "Tromsø", `Bø "i" Telemark`}

// nestedRows are n rows whose json column doc holds a record (address),
// an array of records (items) and a map (tags): keys in varying order and
// spacing, an empty array every seventh row, a map without the key every
// fifth, a null doc every tenth.
func nestedRows(n int) ([]table.Row, []nestedFields) {
	rows := make([]table.Row, n)
	want := make([]nestedFields, n)
	for i := range rows {
		k := int64(i)
		rows[i] = table.Row{"user": fmt.Sprintf("u%d", i%5), "ts": day0.Add(time.Duration(i) * time.Minute), "n": k}
		want[i] = nestedFields{N: k}
		if i%10 == 9 {
			continue
		}
		city, sku, color := nestedCities[i%3], fmt.Sprintf("sku-%d", i), []string{"red", "blue"}[i%2]
		cityJSON, _ := json.Marshal(city)
		items := fmt.Sprintf(`[{"sku":%q,"qty":%d},{"sku":"second","qty":1}]`, sku, i%4)
		want[i].City, want[i].SKU, want[i].Color = &city, &sku, &color
		if i%7 == 0 {
			items, want[i].SKU = "[]", nil
		}
		tags := fmt.Sprintf(`{"size":"L","color":%q}`, color)
		if i%5 == 0 {
			tags, want[i].Color = `{"size":"M"}`, nil
		}
		doc := fmt.Sprintf(`{"address":{"city":%s,"zip":"%04d"},"items":%s,"tags":%s}`, cityJSON, i, items, tags)
		if i%3 == 0 {
			doc = fmt.Sprintf(`{ "tags" : %s, "items" : %s, "address" : { "zip" : "%04d", "city" : %s } }`, tags, items, i, cityJSON)
		}
		rows[i]["doc"] = json.RawMessage(doc)
	}
	return rows, want
}

var nestedSchema = []table.Column{
	{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
	{Name: "doc", Type: table.JSON},
}

// TestNestedWhereColdRead: where clauses on nested fields read the same
// rows from the Iceberg table (the cold tier's read of Parquet pages) as
// the test's own filter of what it wrote: a path evaluated where the cold
// tier evaluates a where clause.
func TestNestedWhereColdRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "nested-where")
	st, tb := openTable(t, dir, nestedSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, made := nestedRows(300)
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	is := func(p *string, v string) bool { return p != nil && *p == v }
	for _, w := range []struct {
		p    table.Predicate
		keep func(nestedFields) bool
	}{
		{table.Predicate{Column: "doc", Path: ".address.city", Op: table.Eq, Value: "Tromsø"}, func(f nestedFields) bool { return is(f.City, "Tromsø") }},
		{table.Predicate{Column: "doc", Path: ".address.city", Op: table.Eq, Value: nestedCities[2]}, func(f nestedFields) bool { return is(f.City, nestedCities[2]) }},
		{table.Predicate{Column: "doc", Path: ".items[0].sku", Op: table.Ne, Value: "sku-1"}, func(f nestedFields) bool { return f.SKU != nil && *f.SKU != "sku-1" }},
		{table.Predicate{Column: "doc", Path: ".items[0].qty", Op: table.Ge, Value: "3"}, func(f nestedFields) bool { return f.SKU != nil && f.N%4 >= 3 }},
		{table.Predicate{Column: "doc", Path: `["tags"].color`, Op: table.IsNull}, func(f nestedFields) bool { return f.Color == nil }},
		{table.Predicate{Column: "doc", Path: ".address.zip", Op: table.In, Values: []any{"0010", "0011", "0019"}}, func(f nestedFields) bool { return f.City != nil && (f.N == 10 || f.N == 11) }},
	} {
		var want []int64
		for _, f := range made {
			if w.keep(f) {
				want = append(want, f.N)
			}
		}
		var got []int64
		err := c.QueryValues(ctx, table.Query{Columns: []string{"n"}, Where: []table.Predicate{w.p}}, true, func(_ []table.Column, vals []any) error {
			got = append(got, vals[0].(int64))
			return nil
		})
		if err != nil {
			t.Fatalf("where %s: %v", w.p, err)
		}
		slices.Sort(got)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("where %s: %d rows %v, want %d %v", w.p, len(got), got, len(want), want)
		}
	}
	var left int
	if err := tb.QueryValues(ctx, table.Query{}, func([]table.Column, []any) error { left++; return nil }); err != nil || left != 0 {
		t.Fatalf("%d rows left in the store after the run (%v): the where above did not read the Iceberg table", left, err)
	}
}

// nestedDocStatement is the statement docs/streams.md gives for engine
// (the fenced block after its marker), with the engine's name for the
// table in place of events.
func nestedDocStatement(t *testing.T, engine, table string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/streams.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte("<!-- nested-fields: "+engine+" -->\n```"))
	_, after, ok2 := bytes.Cut(after, []byte("\n"))
	block, _, ok3 := bytes.Cut(after, []byte("\n```"))
	if !ok || !ok2 || !ok3 {
		t.Fatalf("docs/streams.md: no fenced block after the nested-fields marker of %s", engine)
	}
	s := string(block)
	if table != "" {
		if !strings.Contains(s, " FROM events") {
			t.Fatalf("docs/streams.md: the %s statement no longer reads FROM events; update the test", engine)
		}
		s = strings.ReplaceAll(s, " FROM events", " FROM "+table)
	}
	return s
}

// engineFields turns an engine's rows ([n, city, sku, color]) into
// nestedFields sorted by n.
func engineFields(t *testing.T, engine string, rows [][]any) []nestedFields {
	t.Helper()
	str := func(v any) *string {
		if v == nil {
			return nil
		}
		s, ok := v.(string)
		if !ok {
			t.Fatalf("%s: %T %v where a string or null was wanted", engine, v, v)
		}
		return &s
	}
	out := make([]nestedFields, len(rows))
	for i, r := range rows {
		if len(r) != 4 {
			t.Fatalf("%s: row %v, want 4 values", engine, r)
		}
		var n int64
		switch x := r[0].(type) {
		case float64:
			n = int64(x)
		case json.Number:
			n, _ = x.Int64()
		default:
			t.Fatalf("%s: n %T %v", engine, r[0], r[0])
		}
		out[i] = nestedFields{N: n, City: str(r[1]), SKU: str(r[2]), Color: str(r[3])}
	}
	slices.SortFunc(out, func(a, b nestedFields) int { return int(a.N - b.N) })
	return out
}

func fieldsText(fs []nestedFields) string {
	var b strings.Builder
	deref := func(p *string) any {
		if p == nil {
			return nil
		}
		return *p
	}
	for _, f := range fs[:min(len(fs), 4)] {
		fmt.Fprintf(&b, "{%d %v %v %v} ", f.N, deref(f.City), deref(f.SKU), deref(f.Color))
	}
	return b.String()
}

// TestNestedFieldsEngines: a table whose json column holds a record, an
// array of records and a map is committed to Iceberg (a REST catalog on
// the S3 server), and each engine takes the nested fields out with the
// statement docs/streams.md gives for it (DuckDB's ->>, pyiceberg with
// Python's json, Spark's get_json_object, Trino's json_extract_scalar):
// every value, missing ones as null, must be the one the test wrote.
func TestNestedFieldsEngines(t *testing.T) {
	if raceEnabled {
		// Engines' processes (a REST catalog, Spark and Trino JVMs) check
		// a file format, not a race.
		t.Skip("scripts/test runs this test without -race, beside the memory bounds")
	}
	coldtest.Require(t, s3Err)
	coldtest.Require(t, pyErr)
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir,
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO", "CATALOG_S3_ENDPOINT="+s3.Endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true", "CATALOG_CLIENT_REGION="+coldtest.Region)
	coldtest.Require(t, err)
	defer rest.Stop()
	cfg := coldtier.Config{
		Warehouse: "s3://" + coldtest.Bucket + "/nested-engines",
		S3:        coldtier.S3{Endpoint: s3.Endpoint, Region: coldtest.Region, PathStyle: true},
		Catalog:   coldtier.Catalog{Type: "rest", URI: rest.URI},
		Node:      "nested-node",
		StateDir:  dir,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st, tb := openTable(t, dir, nestedSchema)
	defer st.Close()
	rows, want := nestedRows(200)
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	check := func(engine string, got []nestedFields) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d rows, first %s; want %d, first %s", engine, len(got), fieldsText(got), len(want), fieldsText(want))
			for i := range min(len(got), len(want)) {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("%s: first difference %s, want %s", engine, fieldsText(got[i:i+1]), fieldsText(want[i:i+1]))
					break
				}
			}
		}
	}

	script, err := os.ReadFile("testdata/nested_fields.py")
	if err != nil {
		t.Fatal(err)
	}
	pyCtx, pyCancel := context.WithTimeout(ctx, 3*time.Minute)
	out, err := coldtest.RunPython(pyCtx, python, string(script), rest.URI, s3.Endpoint, coldtest.AccessKey, coldtest.SecretKey,
		"sluice.events", s3.Root, nestedDocStatement(t, "duckdb", ""), nestedDocStatement(t, "pyiceberg", ""))
	pyCancel()
	if err != nil {
		t.Fatal(err)
	}
	var py map[string][][]any
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatalf("nested_fields.py: %v: %.500s", err, out)
	}
	check("pyiceberg", engineFields(t, "pyiceberg", py["pyiceberg"]))
	check("duckdb", engineFields(t, "duckdb", py["duckdb"]))

	t.Run("spark", func(t *testing.T) {
		spark := sharedSpark.Require(t)
		conf := strings.Join([]string{
			"spark.sql.extensions org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
			"spark.sql.catalog.sluice org.apache.iceberg.spark.SparkCatalog",
			"spark.sql.catalog.sluice.type rest",
			"spark.sql.catalog.sluice.uri " + rest.URI,
			"spark.sql.catalog.sluice.io-impl org.apache.iceberg.aws.s3.S3FileIO",
			"spark.sql.catalog.sluice.s3.endpoint " + s3.Endpoint,
			"spark.sql.catalog.sluice.s3.path-style-access true",
			"spark.sql.catalog.sluice.client.region " + coldtest.Region,
		}, "\n")
		confPath := filepath.Join(dir, "spark-defaults.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithTimeout(ctx, 6*time.Minute)
		defer scancel()
		out, err := spark.Run(sctx, confPath, nestedDocStatement(t, "spark", "sluice.sluice.events"))
		if err != nil {
			t.Fatal(firstLine(err))
		}
		var res struct {
			Rows []struct {
				N     int64   `json:"n"`
				City  *string `json:"city"`
				SKU   *string `json:"sku"`
				Color *string `json:"color"`
			} `json:"rows"`
		}
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			if js, ok := strings.CutPrefix(line, "SPARKQ "); ok {
				found = true
				if err := json.Unmarshal([]byte(js), &res); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !found {
			t.Fatalf("no result in Spark's output: %.300s", out)
		}
		var got []nestedFields
		for _, r := range res.Rows {
			got = append(got, nestedFields{N: r.N, City: r.City, SKU: r.SKU, Color: r.Color})
		}
		slices.SortFunc(got, func(a, b nestedFields) int { return int(a.N - b.N) })
		check("spark", got)
	})

	t.Run("trino", func(t *testing.T) {
		props := strings.Join([]string{
			"connector.name=iceberg", "iceberg.catalog.type=rest", "iceberg.rest-catalog.uri=" + rest.URI,
			"fs.native-s3.enabled=true", "s3.endpoint=" + s3.Endpoint, "s3.path-style-access=true", "s3.region=" + coldtest.Region,
		}, "\n")
		trino := sharedTrino.Require(t)
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
		defer tcancel()
		trino.AddCatalog(tctx, t, "nested", props)
		_, rows, err := trino.Query(tctx, nestedDocStatement(t, "trino", "nested.sluice.events"))
		if err != nil {
			t.Fatal(firstLine(err))
		}
		check("trino", engineFields(t, "trino", rows))
	})
}
