package coldtier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// One versitygw and one readers' venv for the package; the readers' checks
// run in pyPool's long-lived interpreters (pyiceberg's and DuckDB's imports
// once per interpreter, not once per check).
var (
	s3     *coldtest.S3
	s3Err  error
	python string
	pyErr  error
	pyPool *coldtest.PythonPool
	// The package's one Spark JVM and one Trino, started by the first test
	// that needs them: each start costs tens of CPU-seconds, more than
	// the queries the tests ask of them.
	sharedSpark coldtest.SharedSpark
	sharedTrino coldtest.SharedTrino
)

func TestMain(m *testing.M) {
	// Before childEnv: killAt names the directory in both.
	if child := os.Getenv(keyedChildEnv); child != "" {
		os.Exit(runKeyedChild(child))
	}
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	if child := os.Getenv(maintainChildEnv); child != "" {
		os.Exit(runMaintainChild(child))
	}
	dir, err := os.MkdirTemp("", "coldtier-s3-")
	if err != nil {
		panic(err)
	}
	s3, s3Err = coldtest.StartS3(dir)
	python, pyErr = coldtest.Python()
	pyPool = coldtest.NewPythonPool(python)
	code := m.Run()
	pyPool.Close()
	sharedSpark.Close()
	sharedTrino.Close()
	stopPostgres() // started by the first test that needs it (postgres_test.go)
	s3.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The longest tests call t.Parallel: each owns its prefix in the bucket,
// its directories and its child processes, and sets no package hook
// (coldtier.Set*) nor environment variable; hooks of its own compactors
// (coldtier.SetHooks) are its own. A test that sets a package hook must
// stay sequential: Go runs the parallel tests only after every sequential
// one has returned (and restored what it set), so the hooks are never
// written while a parallel test reads them.

// testConfig is a cold tier on the package's S3 server with a SQLite
// catalog in dir; prefix keeps tests apart in the one bucket.
func testConfig(t testing.TB, dir, prefix string) coldtier.Config {
	t.Helper()
	coldtest.Require(t, s3Err)
	return coldtier.Config{
		Warehouse: "s3://" + coldtest.Bucket + "/" + prefix,
		S3:        coldtier.S3{Endpoint: s3.Endpoint, Region: coldtest.Region, PathStyle: true},
		Catalog:   coldtier.Catalog{URI: filepath.Join(dir, "catalog.db")},
		Node:      "test-node",
		StateDir:  dir,
	}
}

var day0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// fill appends n rows to t spread over days days from day0, with every
// column type and some nulls; row i has n = first+i.
func fill(t testing.TB, tb *table.Table, first, n, days int) {
	t.Helper()
	rows := make([]table.Row, 0, n)
	for i := range n {
		k := first + i
		r := table.Row{
			"user": fmt.Sprintf("u%d", k%7),
			"ts":   day0.Add(time.Duration(k%days)*24*time.Hour + time.Duration(k%3600)*time.Second + 123456*time.Nanosecond),
			"n":    int64(k),
			"f":    float64(k) / 4,
			"ok":   k%3 == 0,
			"note": fmt.Sprintf("note %d", k),
			"doc":  json.RawMessage(fmt.Sprintf(`{"k":%d}`, k)),
		}
		if k%5 == 0 {
			r["note"] = nil
			r["f"] = nil
		}
		rows = append(rows, r)
	}
	if err := tb.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

var staticSchema = []table.Column{
	{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
	{Name: "f", Type: table.Float64}, {Name: "ok", Type: table.Bool}, {Name: "note", Type: table.String},
	{Name: "doc", Type: table.JSON},
}

func openTable(t testing.TB, dir string, cols []table.Column) (*table.Store, *table.Table) {
	t.Helper()
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts", Columns: cols})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return st, tb
}

// normRows reads every row of the store as the readers print them:
// timestamps as unix microseconds, JSON as its text.
func normRows(t testing.TB, tb *table.Table, q table.Query) []map[string]any {
	t.Helper()
	var out []map[string]any
	err := tb.Query(context.Background(), q, func(r table.Row) error {
		m := map[string]any{}
		for k, v := range r {
			switch x := v.(type) {
			case time.Time:
				v = x.UnixMicro()
			case json.RawMessage:
				v = string(x)
			}
			m[k] = v
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return canon(t, out)
}

// canon round-trips rows through JSON (numbers as float64) and sorts them
// by n, so rows from Go and from Python compare with reflect.DeepEqual.
func canon(t testing.TB, rows any) []map[string]any {
	t.Helper()
	buf, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(buf, &out); err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["n"].(float64) < out[j]["n"].(float64) })
	return out
}

// readerView is what testdata/readers.py prints.
type readerView struct {
	Schema      [][]any          `json:"schema"`
	Spec        [][]string       `json:"spec"`
	Files       []string         `json:"files"`
	PyIceberg   []map[string]any `json:"pyiceberg"`
	DuckDBTypes [][]string       `json:"duckdb_types"`
	DuckDB      []map[string]any `json:"duckdb"`
	Snapshots   []map[string]any `json:"snapshots"`
	// SortOrder is the declared sort order: column, transform, direction,
	// null order per field; UnsortedFiles the data files whose rows do not
	// follow its first field (with none declared: the user column).
	SortOrder     [][]string `json:"sort_order"`
	UnsortedFiles []string   `json:"unsorted_files"`
}

func readIceberg(t testing.TB, cfg coldtier.Config, name string) readerView {
	t.Helper()
	coldtest.Require(t, pyErr)
	script, err := os.ReadFile("testdata/readers.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := pyPool.Run(ctx, string(script), cfg.Catalog.URI, "sluice."+name, s3.Endpoint, s3.Root,
		coldtest.AccessKey, coldtest.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	var v readerView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("readers.py output: %v: %.500s", err, out)
	}
	v.PyIceberg = canon(t, v.PyIceberg)
	v.DuckDB = canon(t, v.DuckDB)
	return v
}
