package coldread_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icat "github.com/apache/iceberg-go/catalog"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/catalog"
	"github.com/sluicedb/sluice/coldtier/coldread"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// These tests read a local-directory warehouse (the read path is the same
// as on S3: the table's file IO) through coldread.Query, which reports
// what it read.

var readDay0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

func openReadTable(t testing.TB, dir string, cols []table.Column) (*table.Store, *table.Table) {
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
	t.Cleanup(func() { st.Close() })
	return st, tb
}

// coldTable is a compacted table with the test's own connection to its
// catalog, through which the tests call coldread.Query directly (it
// reports what it read).
type coldTable struct {
	*coldtier.Compactor
	t   *table.Table
	cat icat.Catalog
	uri string // the SQLite catalog's file
}

func localCompactor(t testing.TB, dir string, tb *table.Table, rowGroupRows int) *coldTable {
	t.Helper()
	ctx := context.Background()
	cfg := coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "local", RowGroupRows: rowGroupRows}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	loc := catalog.Location{Warehouse: cfg.Warehouse, Catalog: cfg.Catalog}
	if err := loc.Defaults(dir); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(ctx, loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.(interface{ Close() error }).Close() })
	return &coldTable{Compactor: c, t: tb, cat: cat, uri: loc.Catalog.URI}
}

// scan is coldread.Query of the table's current snapshot; no rows before
// the first run created the table.
func (c *coldTable) scan(ctx context.Context, q table.Query, cols []table.Column, emit func([]table.Column, []any) error) (int, coldread.Stats, error) {
	tbl, err := c.cat.LoadTable(ctx, c.Identifier())
	if errors.Is(err, icat.ErrNoSuchTable) {
		return 0, coldread.Stats{}, nil
	}
	if err != nil {
		return 0, coldread.Stats{}, err
	}
	return coldread.Query(ctx, tbl, c.t, q, cols, emit)
}

// rowsOf runs q over both tiers (cold first) and returns the rows as
// column -> value maps (times as unix µs), with what the cold scan read.
func rowsOf(t *testing.T, c *coldTable, q table.Query) ([]map[string]any, coldread.Stats, error) {
	t.Helper()
	var out []map[string]any
	emit := func(cols []table.Column, vals []any) error {
		m := map[string]any{}
		for i, v := range vals {
			if x, ok := v.(time.Time); ok {
				v = x.UnixMicro()
			}
			m[cols[i].Name] = v
		}
		out = append(out, m)
		return nil
	}
	cols, err := c.t.Columns(q)
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := c.scan(context.Background(), q, cols, emit)
	if err != nil {
		return out, st, err
	}
	err = c.t.QueryValues(context.Background(), q, emit)
	return out, st, err
}

func byN(rows []map[string]any) map[int64]map[string]any {
	out := map[int64]map[string]any{}
	for _, r := range rows {
		out[r["n"].(int64)] = r
	}
	return out
}

// TestColdReadPrunesRowGroups compacts one day of 1000 rows in row groups
// of 100: a query on one hash value (rows are clustered by hash in a file)
// and one on a short time range of that hash value read only the row
// groups whose statistics admit them, and return the same rows as before
// the compaction; a query of everything reads every row group.
func TestColdReadPrunesRowGroups(t *testing.T) { inBothReadModes(t, testColdReadPrunesRowGroups) }

// inBothReadModes runs test with data files read whole (the small files
// here always are) and read by ranges (as files above wholeFileMax are).
func inBothReadModes(t *testing.T, test func(*testing.T)) {
	t.Run("whole-files", test)
	t.Run("ranges", func(t *testing.T) {
		defer func(was int64) { *coldread.WholeFileMax = was }(*coldread.WholeFileMax)
		*coldread.WholeFileMax = 0
		test(t)
	})
}

func testColdReadPrunesRowGroups(t *testing.T) {
	dir := t.TempDir()
	_, tb := openReadTable(t, dir, []table.Column{
		{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
	})
	ctx := context.Background()
	var rows []table.Row
	for i := range 1000 {
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", i%5), "ts": readDay0.Add(time.Duration(i) * time.Minute), "n": int64(i)})
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c := localCompactor(t, dir, tb, 100)
	queries := []struct {
		name    string
		q       table.Query
		maxRead int // row groups the statistics admit, at most
	}{
		// u3's 200 rows are contiguous in the file: 2 row groups, 3 if
		// they straddle a boundary.
		{"hash", table.Query{HashIn: []any{"u3"}}, 3},
		// 50 minutes of u3: 10 of its rows, in time order within its run.
		{"hash-and-range", table.Query{HashIn: []any{"u3"}, From: readDay0.Add(500 * time.Minute), To: readDay0.Add(550 * time.Minute)}, 2},
		{"all", table.Query{}, -1},
	}
	want := map[string][]map[string]any{}
	for _, qc := range queries {
		got, _, err := rowsOf(t, c, qc.q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("%s: no rows before compaction", qc.name)
		}
		want[qc.name] = got
	}
	if _, err := c.Compact(ctx, readDay0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	for _, qc := range queries {
		got, st, err := rowsOf(t, c, qc.q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(byN(got), byN(want[qc.name])) || len(got) != len(want[qc.name]) {
			t.Errorf("%s: %d rows after compaction, %d before", qc.name, len(got), len(want[qc.name]))
		}
		if st.Files != 1 || st.ArrowFiles != 0 || st.RowGroups < 10 {
			t.Fatalf("%s: scan %+v: want one file of >= 10 row groups read with parquet-go", qc.name, st)
		}
		if qc.maxRead < 0 {
			if st.RowGroupsRead != st.RowGroups {
				t.Errorf("%s: read %d of %d row groups, want all", qc.name, st.RowGroupsRead, st.RowGroups)
			}
		} else if st.RowGroupsRead < 1 || st.RowGroupsRead > qc.maxRead {
			t.Errorf("%s: read %d of %d row groups, want 1..%d", qc.name, st.RowGroupsRead, st.RowGroups, qc.maxRead)
		}
	}
}

// TestColdReadSchemaEvolution: a column added after the first run is
// null in the older file (it lacks the field id) and has its values in
// the newer one, in plain queries and in predicates.
func TestColdReadSchemaEvolution(t *testing.T) {
	dir := t.TempDir()
	_, tb := openReadTable(t, dir, nil) // inferred schema
	ctx := context.Background()
	var day0, day1 []table.Row
	for i := range 300 {
		day0 = append(day0, table.Row{"user": fmt.Sprintf("u%d", i%3), "ts": readDay0.Add(time.Duration(i) * time.Minute), "n": int64(i)})
		day1 = append(day1, table.Row{"user": fmt.Sprintf("u%d", i%3), "ts": readDay0.Add(24*time.Hour + time.Duration(i)*time.Minute),
			"n": int64(1000 + i), "extra": fmt.Sprintf("x%d", i%4)})
	}
	if err := tb.Append(ctx, day0); err != nil {
		t.Fatal(err)
	}
	c := localCompactor(t, dir, tb, 0)
	if _, err := c.Compact(ctx, readDay0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, day1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, readDay0.Add(48*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	check := func(name string, q table.Query, keep func(table.Row) bool) {
		t.Helper()
		got, st, err := rowsOf(t, c, q)
		if err != nil {
			t.Fatal(err)
		}
		if st.Files != 2 || st.ArrowFiles != 0 {
			t.Fatalf("%s: scan %+v: want both files read with parquet-go", name, st)
		}
		gotN := byN(got)
		wantN := 0
		for _, r := range append(append([]table.Row{}, day0...), day1...) {
			if !keep(r) {
				continue
			}
			wantN++
			g, ok := gotN[r["n"].(int64)]
			if !ok {
				t.Errorf("%s: row n=%d missing", name, r["n"])
				continue
			}
			if g["extra"] != r["extra"] || g["user"] != r["user"] || g["ts"] != r["ts"].(time.Time).UnixMicro() {
				t.Errorf("%s: row n=%d is %v, want extra=%v user=%v", name, r["n"], g, r["extra"], r["user"])
			}
		}
		if len(got) != wantN || wantN == 0 {
			t.Errorf("%s: %d rows, want %d", name, len(got), wantN)
		}
	}
	check("all", table.Query{}, func(table.Row) bool { return true })
	check("is-null", table.Query{Where: []table.Predicate{{Column: "extra", Op: table.IsNull}}},
		func(r table.Row) bool { return r["extra"] == nil })
	check("eq", table.Query{Where: []table.Predicate{{Column: "extra", Op: table.Eq, Value: "x2"}}},
		func(r table.Row) bool { return r["extra"] == "x2" })
}

// dataFile returns the local path of the table's only data file whose
// path contains part.
func dataFile(t *testing.T, c *coldTable, part string) string {
	t.Helper()
	files, err := c.DataFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.Contains(f, part) {
			return strings.TrimPrefix(f, "file://")
		}
	}
	t.Fatalf("no data file with %q in %v", part, files)
	return ""
}

// TestColdReadCorruptFile: a data file written by a real compaction,
// then damaged (its pages overwritten with noise, or truncated): the
// query fails with an error naming the file and where, and does not
// panic.
func TestColdReadCorruptFile(t *testing.T) { inBothReadModes(t, testColdReadCorruptFile) }

func testColdReadCorruptFile(t *testing.T) {
	dir := t.TempDir()
	_, tb := openReadTable(t, dir, []table.Column{
		{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
		{Name: "note", Type: table.String},
	})
	ctx := context.Background()
	var rows []table.Row
	for i := range 900 {
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", i%7), "ts": readDay0.Add(time.Duration(i%3)*24*time.Hour + time.Duration(i)*time.Second),
			"n": int64(i), "note": fmt.Sprintf("note %d", i*7919)})
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c := localCompactor(t, dir, tb, 0)
	if _, err := c.Compact(ctx, readDay0.Add(72*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := rowsOf(t, c, table.Query{}); err != nil || len(got) != 900 {
		t.Fatalf("before the damage: %d rows, %v", len(got), err)
	}

	// Noise over the pages of day 2's file; its footer stays intact.
	noisy := dataFile(t, c, "ts_day=2024-05-02")
	buf, err := os.ReadFile(noisy)
	if err != nil {
		t.Fatal(err)
	}
	footer := int(binary.LittleEndian.Uint32(buf[len(buf)-8:]))
	pagesEnd := len(buf) - 8 - footer
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 4; i < pagesEnd; i++ {
		buf[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(noisy, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = rowsOf(t, c, table.Query{})
	if err == nil || !strings.Contains(err.Error(), noisy) || !strings.Contains(err.Error(), "row group 0") {
		t.Fatalf("pages overwritten: err = %v, want an error naming %s and its row group", err, noisy)
	}
	t.Logf("noise: %v", err)
	// The other days still read.
	if got, _, err := rowsOf(t, c, table.Query{From: readDay0.Add(48 * time.Hour)}); err != nil || len(got) != 300 {
		t.Fatalf("day 2 of the undamaged file: %d rows, %v", len(got), err)
	}

	// Truncated: the manifest's size no longer matches.
	short := dataFile(t, c, "ts_day=2024-05-03")
	fi, err := os.Stat(short)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(short, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	_, _, err = rowsOf(t, c, table.Query{From: readDay0.Add(48 * time.Hour)})
	if err == nil || !strings.Contains(err.Error(), short) {
		t.Fatalf("truncated: err = %v, want an error naming %s", err, short)
	}
	t.Logf("truncated: %v", err)
}

// TestColdReadPositionDeletes deletes rows by iceberg-go's merge-on-read
// delete (v2 position delete files, as sluice's keyed runs write) from
// files of many row groups: the parquet-go path applies them itself (no
// file through the Arrow path), for a whole scan, a time range that prunes
// row groups and a predicate, and returns the rows the Arrow path (which
// applies them in iceberg-go) returns.
func TestColdReadPositionDeletes(t *testing.T) {
	dir := t.TempDir()
	_, tb := openReadTable(t, dir, []table.Column{
		{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
	})
	ctx := context.Background()
	var rows []table.Row
	for i := range 3000 {
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", i%4), "ts": readDay0.Add(time.Duration(i%2)*24*time.Hour + time.Duration(i)*time.Second), "n": int64(i)})
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c := localCompactor(t, dir, tb, 100) // 100-row row groups
	if _, err := c.Compact(ctx, readDay0.Add(48*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.cat.LoadTable(ctx, c.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	var gone []int64
	for n := range int64(3000) {
		if n%10 == 3 || n == 0 || n == 2999 {
			gone = append(gone, n)
		}
	}
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{itable.WriteDeleteModeKey: itable.WriteModeMergeOnRead}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Delete(ctx, iceberg.IsIn(iceberg.Reference("n"), gone...), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	queries := map[string]table.Query{
		"all":        {},
		"time-range": {From: readDay0.Add(500 * time.Second), To: readDay0.Add(24*time.Hour + 1200*time.Second)},
		"predicate":  {Where: []table.Predicate{{Column: "n", Op: table.Lt, Value: 700}}},
	}
	for name, q := range queries {
		scan := func(arrow bool) ([]int64, coldread.Stats) {
			*coldread.ForceArrow = arrow
			defer func() { *coldread.ForceArrow = false }()
			cols, err := c.t.Columns(q)
			if err != nil {
				t.Fatal(err)
			}
			nAt := slices.IndexFunc(cols, func(c table.Column) bool { return c.Name == "n" })
			var ns []int64
			_, st, err := c.scan(ctx, q, cols, func(_ []table.Column, vals []any) error {
				ns = append(ns, vals[nAt].(int64))
				return nil
			})
			if err != nil {
				t.Fatalf("%s (arrow %v): %v", name, arrow, err)
			}
			return ns, st
		}
		got, st := scan(false)
		want, _ := scan(true)
		if st.ArrowFiles != 0 || st.DeleteFiles == 0 || st.RowGroups < 20 {
			t.Errorf("%s: scan %+v: want every file read here, with the delete files, in many row groups", name, st)
		}
		if len(want) == 0 {
			t.Fatalf("%s: no rows; a useless case", name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d rows, the Arrow path %d", name, len(got), len(want))
		}
		for _, n := range got {
			if n%10 == 3 || n == 0 || n == 2999 {
				t.Errorf("%s: the deleted row n=%d is read", name, n)
				break
			}
		}
	}
	if got, _, err := rowsOf(t, c, table.Query{}); err != nil || len(got) != 3000-len(gone) {
		t.Errorf("%d rows over both tiers (%v), want %d", len(got), err, 3000-len(gone))
	}
}

// TestColdReadSameAsArrowPath asks queries covering every column type,
// operator, null handling, conversion (values given as strings, a value of
// another type) and sub-microsecond range bounds, on a string and on an
// int64 hashBy column, through the parquet-go path and through
// iceberg-go's Arrow path (the previous reader): the same rows, in the
// same order, with the same values and Go types.
func TestColdReadSameAsArrowPath(t *testing.T) {
	hashValues := map[string][]any{"user": {"u3", "u5", "u44"}, "uid": {"3", int64(5), 44.0}}
	for _, hashBy := range []string{"user", "uid"} {
		t.Run(hashBy, func(t *testing.T) {
			dir := t.TempDir()
			st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tb, err := st.Table(table.Config{Name: "events", HashBy: hashBy, SortBy: "ts", Columns: []table.Column{
				{Name: "user", Type: table.String}, {Name: "uid", Type: table.Int64}, {Name: "ts", Type: table.Timestamp},
				{Name: "n", Type: table.Int64}, {Name: "f", Type: table.Float64}, {Name: "ok", Type: table.Bool},
				{Name: "note", Type: table.String}, {Name: "doc", Type: table.JSON}, {Name: "at", Type: table.Timestamp},
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var rows []table.Row
			for i := range 2000 {
				r := table.Row{"user": fmt.Sprintf("u%d", i%9), "uid": int64(i % 9), "ts": readDay0.Add(time.Duration(i%2)*24*time.Hour + time.Duration(i)*time.Second + 789*time.Nanosecond),
					"n": int64(i), "f": float64(i) / 8, "ok": i%3 == 0, "note": fmt.Sprintf("note %03d", i%500),
					"doc": fmt.Sprintf(`{"k":%d}`, i%11), "at": readDay0.Add(time.Duration(i) * time.Minute)}
				if i%7 == 0 {
					r["note"], r["f"], r["doc"], r["at"] = nil, nil, nil, nil
				}
				rows = append(rows, r)
			}
			if err := tb.Append(ctx, rows); err != nil {
				t.Fatal(err)
			}
			c := localCompactor(t, dir, tb, 300)
			if _, err := c.Compact(ctx, readDay0.Add(48*time.Hour), coldtier.Options{Remove: true}); err != nil {
				t.Fatal(err)
			}
			p := func(col string, op table.Op, v any) table.Predicate {
				return table.Predicate{Column: col, Op: op, Value: v}
			}
			queries := map[string]table.Query{
				"all":           {},
				"ns-bounds":     {From: readDay0.Add(100*time.Second + 500*time.Nanosecond), To: readDay0.Add(24*time.Hour + 1500*time.Second + 789*time.Nanosecond)},
				"hash":          {HashIn: hashValues[hashBy]},
				"int-ops":       {Where: []table.Predicate{p("n", table.Ge, "100"), p("n", table.Lt, 1500), p("n", table.Ne, json.Number("200"))}},
				"float":         {Where: []table.Predicate{p("f", table.Gt, "10.5"), p("f", table.Le, 100)}},
				"bool":          {Where: []table.Predicate{p("ok", table.Eq, "true")}},
				"string-in":     {Where: []table.Predicate{{Column: "note", Op: table.In, Values: []any{"note 007", "note 123", 42}}}},
				"string-lt":     {Where: []table.Predicate{p("note", table.Lt, "note 050")}},
				"json-eq":       {Where: []table.Predicate{p("doc", table.Eq, `{"k":3}`)}},
				"null":          {Where: []table.Predicate{{Column: "at", Op: table.IsNull}}},
				"not-null":      {Where: []table.Predicate{{Column: "f", Op: table.NotNull}, p("at", table.Ge, "2024-05-01T10:00:00Z")}},
				"time-in":       {Where: []table.Predicate{{Column: "at", Op: table.In, Values: []any{"2024-05-01T00:05:00Z", "2024-05-01T01:00:00.5Z"}}}},
				"int-in":        {Where: []table.Predicate{{Column: "uid", Op: table.In, Values: []any{int64(1), "2", 3.0}}}},
				"projection":    {Columns: []string{"doc", "n", "at"}, Where: []table.Predicate{p("n", table.Le, 30)}},
				"limit":         {Limit: 77, Where: []table.Predicate{p("ok", table.Eq, false)}},
				"nothing":       {Where: []table.Predicate{p("n", table.Gt, 1e9)}},
				"hash-and-pred": {HashIn: hashValues[hashBy][:1], Where: []table.Predicate{p("f", table.Ge, 50)}},
			}
			for name, q := range queries {
				scan := func(arrow bool) ([][]any, coldread.Stats) {
					*coldread.ForceArrow = arrow
					defer func() { *coldread.ForceArrow = false }()
					cols, err := c.t.Columns(q)
					if err != nil {
						t.Fatal(err)
					}
					var out [][]any
					_, st, err := c.scan(ctx, q, cols, func(_ []table.Column, vals []any) error {
						out = append(out, slices.Clone(vals))
						return nil
					})
					if err != nil {
						t.Fatalf("%s (arrow %v): %v", name, arrow, err)
					}
					return out, st
				}
				got, st := scan(false)
				want, _ := scan(true)
				if st.ArrowFiles != 0 {
					t.Fatalf("%s: %d files through the Arrow path", name, st.ArrowFiles)
				}
				if name != "nothing" && len(want) == 0 {
					t.Fatalf("%s: no rows; a useless case", name)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %d rows, Arrow path %d; first %v, want %v", name, len(got), len(want), firstRow(got), firstRow(want))
				}
			}
		})
	}
}

func firstRow(rows [][]any) []any {
	if len(rows) == 0 {
		return nil
	}
	return rows[0]
}

// addFilesScript writes a Parquet file without field ids (as pyarrow does
// by default) into the table's day 2024-05-03 and registers it with
// pyiceberg's add_files, which sets the table's name mapping.
const addFilesScript = `
import sys, datetime
import pyarrow as pa, pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
cat_path, ident, path = sys.argv[1:4]
cat = SqlCatalog("sluice", uri="sqlite:///" + cat_path)
tbl = cat.load_table(ident)
t0 = datetime.datetime(2024, 5, 3, tzinfo=datetime.timezone.utc)
n = 50
data = pa.table({
    "user": pa.array(["u%d" % (i % 4) for i in range(n)], pa.string()),
    "ts": pa.array([t0 + datetime.timedelta(seconds=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
    "n": pa.array([10000 + i for i in range(n)], pa.int64()),
})
pq.write_table(data, path)
tbl.add_files([path])
print("ok")
`

// TestColdReadFileWithoutFieldIDs: a file another engine added without
// Parquet field ids (pyiceberg's add_files) is read through iceberg-go's
// Arrow path, which maps its columns by name; the files sluice wrote are
// read with parquet-go.
func TestColdReadFileWithoutFieldIDs(t *testing.T) {
	py, err := coldtest.Python()
	coldtest.Require(t, err)
	dir := t.TempDir()
	_, tb := openReadTable(t, dir, []table.Column{
		{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
	})
	ctx := context.Background()
	var rows []table.Row
	for i := range 200 {
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", i%4), "ts": readDay0.Add(time.Duration(i%2)*24*time.Hour + time.Duration(i)*time.Second), "n": int64(i)})
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c := localCompactor(t, dir, tb, 0)
	if _, err := c.Compact(ctx, readDay0.Add(48*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	added := filepath.Join(dir, "warehouse", "added.parquet")
	pyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := coldtest.RunPython(pyCtx, py, addFilesScript, c.uri, strings.Join(c.Identifier(), "."), added); err != nil {
		t.Fatalf("add_files: %v: %s", err, out)
	}
	got, st, err := rowsOf(t, c, table.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 3 || st.ArrowFiles != 1 {
		t.Fatalf("scan %+v: want 3 files, the added one through the Arrow path", st)
	}
	seen := byN(got)
	if len(got) != 250 || len(seen) != 250 {
		t.Fatalf("%d rows (%d distinct), want 250", len(got), len(seen))
	}
	r := seen[10007]
	if r == nil || r["user"] != "u3" || r["ts"] != time.Date(2024, 5, 3, 0, 0, 7, 0, time.UTC).UnixMicro() {
		t.Errorf("row n=10007 of the added file: %v", r)
	}
}

// TestColdWidenedColumnOrdersNumbers: files written while amount was int64,
// then the column widened to string in the store: amount >= 900 orders
// numbers as numbers in both tiers (100 of 0..999, none of "n/a"), as the
// hot tier does (table.CompareText). Before, the cold tier compared the
// text and kept "91" to "99" as well.
func TestColdWidenedColumnOrdersNumbers(t *testing.T) {
	dir := t.TempDir()
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var rows []table.Row
	for i := range 1000 {
		rows = append(rows, table.Row{"user": "u", "ts": readDay0.Add(time.Duration(i) * time.Second), "n": int64(i), "amount": int64(i)})
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c := localCompactor(t, dir, tb, 0)
	if _, err := c.Compact(ctx, readDay0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	hot := []table.Row{
		{"user": "u", "ts": readDay0.Add(48 * time.Hour), "n": int64(1000), "amount": "n/a"},
		{"user": "u", "ts": readDay0.Add(49 * time.Hour), "n": int64(1001), "amount": "950"},
	}
	if err := tb.Append(ctx, hot); err != nil {
		t.Fatal(err)
	}
	got, _, err := rowsOf(t, c, table.Query{Where: []table.Predicate{{Column: "amount", Op: table.Ge, Value: "900"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 101 {
		t.Fatalf("amount >= 900 over both tiers: %d rows, want 101 (900..999 cold, 950 hot)", len(got))
	}
}
