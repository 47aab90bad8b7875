package coldtier_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// nativeRow is one row of TestNativeTypesIceberg as the test makes it: the
// text of each value, as JSON carries it and as every reader must print it.
type nativeRow struct {
	N         int64
	Date      string
	TimeOfDay string
	UUID      string
	Bytes     []byte
	Amount    string
	Wide      string // a decimal(38,10): 37 digits, ±(10^37-1) × 10^-10 among them
}

// wideText is the decimal(38,10) of row i: the largest 37-digit values
// both ways, zero, and values spread over both signs and 32 digits.
func wideText(i int) string {
	switch i % 50 {
	case 0:
		return "999999999999999999999999999.9999999999"
	case 1:
		return "-999999999999999999999999999.9999999999"
	case 2:
		return "0.0000000000"
	}
	u := new(big.Int).Mul(big.NewInt(int64(i)), bigOf("98765432109876543210987654321"))
	u.Sub(u, bigOf("10000000000000000000000000000000"))
	d, ok := coltype.DecimalOfBig(u, 10)
	if !ok {
		panic(u)
	}
	return d.String()
}

func bigOf(s string) *big.Int {
	b, _ := new(big.Int).SetString(s, 10)
	return b
}

// wideLess reports whether decimal text a is less than b.
func wideLess(a, b string) bool {
	x, _ := new(big.Rat).SetString(a)
	y, _ := new(big.Rat).SetString(b)
	return x.Cmp(y) < 0
}

// nativeRows are rows with dates before and after 1970, times with and
// without microseconds, negative and large decimals, empty bytes and
// nulls (every seventh row).
func nativeRows(n int) []nativeRow {
	rows := make([]nativeRow, n)
	for i := range rows {
		day := time.Date(1969, 12, 20, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i*37)
		us := int64(i) * 7_777_777_777 % coltype.MicrosPerDay
		tod := fmt.Sprintf("%02d:%02d:%02d.%06d", us/3_600_000_000, us/60_000_000%60, us/1_000_000%60, us%1_000_000)
		cents := int64(i)*1_234_567 - 50_000_000
		sign := ""
		if cents < 0 {
			sign, cents = "-", -cents
		}
		rows[i] = nativeRow{
			N:         int64(i),
			Date:      day.Format(time.DateOnly),
			TimeOfDay: tod,
			UUID:      fmt.Sprintf("%08x-0000-4000-8000-%012x", i*2654435761%(1<<32), i),
			Bytes:     []byte(fmt.Sprintf("\x00\xff%04d", i))[:i%6],
			Amount:    fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100),
			Wide:      wideText(i),
		}
	}
	return rows
}

// text is r as the readers print it (nil for the null columns of every
// seventh row).
func (r nativeRow) text() map[string]any {
	m := map[string]any{"n": float64(r.N), "d": r.Date, "tod": r.TimeOfDay, "u": r.UUID,
		"b": base64.StdEncoding.EncodeToString(r.Bytes), "amount": r.Amount, "wide": r.Wide}
	if r.N%7 == 3 {
		for _, k := range []string{"d", "tod", "u", "b", "amount", "wide"} {
			m[k] = nil
		}
	}
	return m
}

var nativeSchema = []table.Column{
	{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
	{Name: "d", Type: table.Date}, {Name: "tod", Type: table.TimeOfDay}, {Name: "u", Type: table.UUID},
	{Name: "b", Type: table.Bytes}, {Name: "amount", Type: coltype.Decimal(12, 2)},
	{Name: "wide", Type: coltype.Decimal(38, 10)},
}

// TestNativeTypesIceberg: a table with a date, time of day, uuid, bytes
// and decimal column, fed their JSON text forms, is compacted to Iceberg
// on S3 (versitygw, SQLite catalog) and read back with the same values by
// sluice's cold read (with a where clause on each type), pyiceberg and
// DuckDB, each reader seeing the Iceberg types date, time, uuid, binary,
// decimal(12,2).
func TestNativeTypesIceberg(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "native-types")
	st, tb := openTable(t, dir, nativeSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	made := nativeRows(300)
	in := make([]table.Row, len(made))
	want := make([]map[string]any, len(made))
	for i, r := range made {
		in[i] = table.Row{"user": fmt.Sprintf("u%d", i%5), "ts": day0.Add(time.Duration(i) * time.Minute), "n": r.N}
		if r.N%7 != 3 {
			in[i]["d"], in[i]["tod"], in[i]["u"] = r.Date, r.TimeOfDay, r.UUID
			in[i]["b"], in[i]["amount"], in[i]["wide"] = base64.StdEncoding.EncodeToString(r.Bytes), r.Amount, json.Number(r.Wide)
		}
		want[i] = r.text()
	}
	if err := tb.Append(ctx, in); err != nil {
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
	if n := len(nativeText(t, tb, c, table.Query{}, false)); n != 0 {
		t.Fatalf("%d rows left in the store after the run", n)
	}

	if got := nativeText(t, tb, c, table.Query{}, true); !reflect.DeepEqual(got, want) {
		t.Fatalf("sluice's cold read: %d rows, first %v; want %d, first %v", len(got), first(got), len(want), first(want))
	}
	for _, c2 := range []struct {
		p    table.Predicate
		keep func(nativeRow) bool
	}{
		{table.Predicate{Column: "d", Op: table.Lt, Value: "1970-01-01"}, func(r nativeRow) bool { return r.Date < "1970-01-01" }},
		{table.Predicate{Column: "d", Op: table.Eq, Value: made[40].Date}, func(r nativeRow) bool { return r.Date == made[40].Date }},
		{table.Predicate{Column: "tod", Op: table.Ge, Value: "12:00"}, func(r nativeRow) bool { return r.TimeOfDay >= "12:00:00.000000" }},
		{table.Predicate{Column: "u", Op: table.Eq, Value: made[123].UUID}, func(r nativeRow) bool { return r.UUID == made[123].UUID }},
		{table.Predicate{Column: "b", Op: table.Eq, Value: base64.StdEncoding.EncodeToString(made[5].Bytes)}, func(r nativeRow) bool { return string(r.Bytes) == string(made[5].Bytes) }},
		{table.Predicate{Column: "amount", Op: table.Lt, Value: "-100.5"}, func(r nativeRow) bool { return r.N*1_234_567-50_000_000 < -10050 }},
		{table.Predicate{Column: "wide", Op: table.Gt, Value: "0"}, func(r nativeRow) bool { return wideLess("0", r.Wide) }},
		{table.Predicate{Column: "wide", Op: table.Eq, Value: made[0].Wide}, func(r nativeRow) bool { return r.Wide == made[0].Wide }},
		{table.Predicate{Column: "wide", Op: table.Lt, Value: "-5000000000000000000000.5"}, func(r nativeRow) bool { return wideLess(r.Wide, "-5000000000000000000000.5") }},
	} {
		var w []map[string]any
		for _, r := range made {
			if r.N%7 != 3 && c2.keep(r) {
				w = append(w, r.text())
			}
		}
		got := nativeText(t, tb, c, table.Query{Where: []table.Predicate{c2.p}}, true)
		if len(w) == 0 || !reflect.DeepEqual(got, w) {
			t.Errorf("where %v: %d rows, want %d (first %v, want %v)", c2.p, len(got), len(w), first(got), first(w))
		}
	}

	coldtest.Require(t, pyErr)
	script, err := os.ReadFile("testdata/native_types.py")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pyPool.Run(ctx, string(script), cfg.Catalog.URI, "sluice.events", s3.Endpoint, s3.Root, coldtest.AccessKey, coldtest.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Schema      map[string]string `json:"schema"`
		PyIceberg   []map[string]any  `json:"pyiceberg"`
		DuckDBTypes map[string]string `json:"duckdb_types"`
		DuckDB      []map[string]any  `json:"duckdb"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("native_types.py: %v: %.500s", err, out)
	}
	wantSchema := map[string]string{"user": "string", "ts": "timestamptz", "n": "long", "d": "date", "tod": "time",
		"u": "uuid", "b": "binary", "amount": "decimal(12, 2)", "wide": "decimal(38, 10)"}
	if !reflect.DeepEqual(v.Schema, wantSchema) {
		t.Errorf("Iceberg schema %v, want %v", v.Schema, wantSchema)
	}
	wantDuck := map[string]string{"n": "BIGINT", "d": "DATE", "tod": "TIME", "u": "UUID", "b": "BLOB", "amount": "DECIMAL(12,2)", "wide": "DECIMAL(38,10)"}
	if !reflect.DeepEqual(v.DuckDBTypes, wantDuck) {
		t.Errorf("DuckDB types %v, want %v", v.DuckDBTypes, wantDuck)
	}
	for name, rows := range map[string][]map[string]any{"pyiceberg": v.PyIceberg, "duckdb": v.DuckDB} {
		if got := canon(t, rows); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d rows, first %v; want %d, first %v", name, len(got), first(got), len(want), first(want))
		}
	}

	t.Run("spark", func(t *testing.T) {
		// Spark 3.5 with Iceberg 1.10 fails every query of a table that
		// has a time column ("Spark does not support time fields", when
		// it loads the schema, whichever columns are selected): Spark
		// reads a table of the other types (docs/streams.md says so).
		sdir := t.TempDir()
		scfg := testConfig(t, sdir, "native-types-spark")
		var cols []table.Column
		for _, c := range nativeSchema {
			if c.Type != table.TimeOfDay {
				cols = append(cols, c)
			}
		}
		sst, stb := openTable(t, sdir, cols)
		defer sst.Close()
		sparkIn := make([]table.Row, len(in))
		sparkWant := make([]map[string]any, len(want))
		for i := range in {
			sparkIn[i], sparkWant[i] = maps.Clone(in[i]), maps.Clone(want[i])
			delete(sparkIn[i], "tod")
			delete(sparkWant[i], "tod")
		}
		if err := stb.Append(ctx, sparkIn); err != nil {
			t.Fatal(err)
		}
		sc, err := coldtier.Open(ctx, scfg, stb)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if _, err := sc.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
			t.Fatal(err)
		}
		// The same Spark run reads TestDecimalPromotedInPlace's table
		// (a decimal column promoted in place, files before and after).
		wst, wc, _ := widenedTable(ctx, t, t.TempDir(), scfg, "widened", false)
		defer wst.Close()
		defer wc.Close()
		sparkNativeTypes(ctx, t, sdir, scfg, sparkWant, sparkQuery{widenedStatement("widened"), func(js string) { sparkWidened(t, js) }})
	})
}

// sparkNativeTypes reads the table of TestNativeTypesIceberg with Spark 3.5
// (Iceberg's SparkCatalog on the same SQLite catalog through JDBC, as
// docs/cold-tier.md configures it) and checks the types Spark gives each
// column and every value against want.
func sparkNativeTypes(ctx context.Context, t *testing.T, dir string, cfg coldtier.Config, want []map[string]any, more ...sparkQuery) {
	spark := sharedSpark.Require(t)
	conf := strings.Join([]string{
		"spark.sql.extensions org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
		"spark.sql.catalog.sluice org.apache.iceberg.spark.SparkCatalog",
		"spark.sql.catalog.sluice.type jdbc",
		"spark.sql.catalog.sluice.uri jdbc:sqlite:" + cfg.Catalog.URI,
		"spark.sql.catalog.sluice.jdbc.schema-version V1",
		"spark.sql.catalog.sluice.warehouse " + cfg.Warehouse,
		"spark.sql.catalog.sluice.io-impl org.apache.iceberg.aws.s3.S3FileIO",
		"spark.sql.catalog.sluice.s3.endpoint " + s3.Endpoint,
		"spark.sql.catalog.sluice.s3.path-style-access true",
		"spark.sql.catalog.sluice.client.region " + coldtest.Region,
	}, "\n")
	confPath := filepath.Join(dir, "spark-defaults.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	statements := []string{"SELECT n, d, u, b, amount, wide FROM sluice.sluice.events ORDER BY n"}
	for _, q := range more {
		statements = append(statements, q.statement)
	}
	out, err := spark.Run(sctx, confPath, statements...)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, line := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(line, "SPARKQ "); ok {
			results = append(results, js)
		}
	}
	if len(results) != len(statements) {
		t.Fatalf("%d results in Spark's output, want %d: %.300s", len(results), len(statements), out)
	}
	for i, q := range more {
		q.check(results[i+1])
	}
	for _, js := range results[:1] {
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
		dec.UseNumber() // a decimal(38,10) is a JSON number of 38 digits
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("Spark's output: %v: %.300s", err, js)
		}
		types := map[string]string{}
		for _, f := range res.Schema.Fields {
			types[f.Name] = strings.Trim(string(f.Type), `"`)
		}
		// Spark has no uuid type: a uuid is its text.
		wantTypes := map[string]string{"n": "long", "d": "date", "u": "string", "b": "binary", "amount": "decimal(12,2)", "wide": "decimal(38,10)"}
		if !reflect.DeepEqual(types, wantTypes) {
			t.Errorf("Spark's types %v, want %v", types, wantTypes)
		}
		scales := map[string]int{"amount": 2, "wide": 10}
		for _, r := range res.Rows {
			for k, v := range r {
				n, ok := v.(json.Number)
				if !ok {
					continue
				}
				if scale, ok := scales[k]; ok {
					// Java's BigDecimal text: a zero at scale 10 is 0E-10.
					d, err := coltype.ParseDecimal(string(n), coltype.MaxDecimalPrecision, scale)
					if err != nil {
						t.Fatalf("Spark's %s = %s: %v", k, n, err)
					}
					r[k] = d.String()
					continue
				}
				f, _ := n.Float64()
				r[k] = f
			}
		}
		if got := canon(t, res.Rows); !reflect.DeepEqual(got, want) {
			t.Errorf("spark: %d rows, first %v; want %d, first %v", len(got), first(got), len(want), first(want))
		}
	}
}

// sparkQuery is one more statement of a Spark run and the check of its
// result (a SparkQuery result line's JSON).
type sparkQuery struct {
	statement string
	check     func(js string)
}

// nativeText is the rows of q (cold: both tiers; else the store's) as the
// readers print them, sorted by n.
func nativeText(t *testing.T, tb *table.Table, c *coldtier.Compactor, q table.Query, cold bool) []map[string]any {
	t.Helper()
	q.Columns = []string{"n", "d", "tod", "u", "b", "amount", "wide"}
	var out []map[string]any
	err := c.QueryValues(context.Background(), q, cold, func(cols []table.Column, vals []any) error {
		m := map[string]any{}
		for i, v := range vals {
			switch x := v.(type) {
			case []byte:
				v = base64.StdEncoding.EncodeToString(x)
			case fmt.Stringer:
				v = x.String()
			}
			m[cols[i].Name] = v
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := canon(t, out)
	slices.SortFunc(got, func(a, b map[string]any) int { return int(a["n"].(float64) - b["n"].(float64)) })
	return got
}
