package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/table"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var day0 = time.Date(2026, 2, 27, 0, 0, 0, 0, time.UTC)

// readParquet reads a file with Apache Arrow's Parquet reader (a second,
// independent implementation) and returns its rows and "physical/logical"
// type of each column.
func readParquet(t *testing.T, path string) (rows []map[string]any, types map[string]string) {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("arrow reader: %s: %v", path, err)
	}
	defer r.Close()
	sc := r.MetaData().Schema
	types = map[string]string{}
	for i := range sc.NumColumns() {
		c := sc.Column(i)
		types[c.Name()] = c.PhysicalType().String() + "/" + c.LogicalType().String()
	}
	for g := range r.NumRowGroups() {
		rg := r.RowGroup(g)
		n := int(rg.NumRows())
		base := len(rows)
		for range n {
			rows = append(rows, map[string]any{})
		}
		for i := range sc.NumColumns() {
			name := sc.Column(i).Name()
			cr, err := rg.Column(i)
			if err != nil {
				t.Fatal(err)
			}
			def := make([]int16, n)
			var vals []any
			switch cr := cr.(type) {
			case *file.Int64ColumnChunkReader:
				v := make([]int64, n)
				_, k, err := cr.ReadBatch(int64(n), v, def, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range v[:k] {
					vals = append(vals, x)
				}
			case *file.Float64ColumnChunkReader:
				v := make([]float64, n)
				_, k, err := cr.ReadBatch(int64(n), v, def, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range v[:k] {
					vals = append(vals, x)
				}
			case *file.BooleanColumnChunkReader:
				v := make([]bool, n)
				_, k, err := cr.ReadBatch(int64(n), v, def, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range v[:k] {
					vals = append(vals, x)
				}
			case *file.ByteArrayColumnChunkReader:
				v := make([]parquet.ByteArray, n)
				_, k, err := cr.ReadBatch(int64(n), v, def, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range v[:k] {
					vals = append(vals, string(x))
				}
			default:
				t.Fatalf("column %s: unexpected reader %T", name, cr)
			}
			j := 0
			for row := range n {
				if def[row] == 0 {
					rows[base+row][name] = nil
					continue
				}
				rows[base+row][name] = vals[j]
				j++
			}
		}
	}
	return rows, types
}

func rowsFor(day int) []table.Row {
	var rows []table.Row
	for i := range 50 {
		n := int64(day*1000 + i)
		r := table.Row{
			"ts":   day0.Add(time.Duration(day)*24*time.Hour + time.Duration(i)*17*time.Minute + time.Duration(n)*time.Microsecond),
			"user": fmt.Sprintf("u%d", i%4),
			"n":    n,
			"f":    float64(n) + 0.25,
			"ok":   i%2 == 0,
			"obj":  map[string]any{"n": n},
		}
		if i%7 == 0 {
			r["f"] = nil
		}
		rows = append(rows, r)
	}
	return rows
}

func TestCompactWritesPartitionedParquetReadableByArrow(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "ev", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]table.Row{}
	for day := range 3 {
		rows := rowsFor(day)
		if err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
		if day < 2 {
			for _, r := range rowsFor(day) {
				want[r["n"].(int64)] = r
			}
		}
	}
	out := t.TempDir()
	st, err := Compact(ctx, tb, out, day0.Add(48*time.Hour+30*time.Minute), Options{Remove: true, RowGroupRows: 16})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 100 || !st.Watermark.Equal(day0.Add(48*time.Hour)) {
		t.Fatalf("stats %+v, want 100 rows before %v", st, day0.Add(48*time.Hour))
	}
	var rel []string
	for _, f := range st.Files {
		r, _ := filepath.Rel(out, f)
		rel = append(rel, filepath.ToSlash(r))
	}
	wantFiles := []string{
		fmt.Sprintf("ev/year=2026/month=02/day=27/part-%d-0.parquet", st.Watermark.UnixNano()),
		fmt.Sprintf("ev/year=2026/month=02/day=28/part-%d-0.parquet", st.Watermark.UnixNano()),
	}
	if !slices.Equal(rel, wantFiles) {
		t.Fatalf("files %v, want %v", rel, wantFiles)
	}
	wantTypes := map[string]string{
		"ts":   "INT64/Timestamp(isAdjustedToUTC=true, timeUnit=microseconds, is_from_converted_type=false, force_set_converted_type=false)",
		"n":    "INT64/Int(bitWidth=64, isSigned=true)",
		"f":    "DOUBLE/None",
		"user": "BYTE_ARRAY/String",
		"ok":   "BOOLEAN/None",
		"obj":  "BYTE_ARRAY/JSON",
	}
	got := 0
	for _, f := range st.Files {
		rows, types := readParquet(t, f)
		for k, v := range wantTypes {
			if types[k] != v {
				t.Errorf("%s: column %s is %s, want %s", f, k, types[k], v)
			}
		}
		for _, r := range rows {
			n := r["n"].(int64)
			w, ok := want[n]
			if !ok {
				t.Fatalf("row %v not expected", r)
			}
			delete(want, n)
			got++
			ts := time.UnixMicro(r["ts"].(int64)).UTC()
			if !ts.Equal(w["ts"].(time.Time).Truncate(time.Microsecond)) || !strings.Contains(f, ts.Format("day=02")) {
				t.Errorf("row %d: ts %v in %s, want %v", n, ts, f, w["ts"])
			}
			if r["user"] != w["user"] || r["ok"] != w["ok"] || r["f"] != w["f"] {
				t.Errorf("row %d: %v, want %v", n, r, w)
			}
			var obj map[string]int64
			if err := json.Unmarshal([]byte(r["obj"].(string)), &obj); err != nil || obj["n"] != n {
				t.Errorf("row %d: obj %v", n, r["obj"])
			}
		}
	}
	if got != 100 || len(want) != 0 {
		t.Fatalf("read %d rows back, %d missing", got, len(want))
	}
	// The hot store keeps only day 2.
	left := 0
	if err := tb.Query(ctx, table.Query{}, func(r table.Row) error {
		left++
		if r["ts"].(time.Time).Before(st.Watermark) {
			return fmt.Errorf("compacted row %v still in the store", r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if left != 50 {
		t.Fatalf("%d rows left in the store, want 50", left)
	}
	entries, _ := filepath.Glob(filepath.Join(out, "ev/*/*/*/*.tmp"))
	if len(entries) != 0 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestCompactWithoutRemoveWritesEachRowOnce(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "ev", SortBy: "ts", BlockSpan: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for day := range 3 {
		if err := tb.Append(ctx, rowsFor(day)); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	total := int64(0)
	for _, wm := range []time.Duration{24 * time.Hour, 24 * time.Hour, 50 * time.Hour, 80 * time.Hour} {
		st, err := Compact(ctx, tb, out, day0.Add(wm), Options{})
		if err != nil {
			t.Fatal(err)
		}
		total += st.Rows
	}
	if total != 150 {
		t.Fatalf("compacted %d rows, want each of 150 once", total)
	}
	files, _ := filepath.Glob(filepath.Join(out, "ev/*/*/*/*.parquet"))
	seen := map[int64]bool{}
	for _, f := range files {
		rows, _ := readParquet(t, f)
		for _, r := range rows {
			n := r["n"].(int64)
			if seen[n] {
				t.Fatalf("row %d written twice", n)
			}
			seen[n] = true
		}
	}
	if len(seen) != 150 {
		t.Fatalf("files hold %d rows, want 150", len(seen))
	}
	n := 0
	tb.Query(ctx, table.Query{}, func(table.Row) error { n++; return nil })
	if n != 150 {
		t.Fatalf("store holds %d rows after compaction without remove, want 150", n)
	}
}

// TestCompactManyRowsPerFile writes more rows per file than the writer
// buffers (row slices are reused after each flush) and reads every value
// back.
func TestCompactManyRowsPerFile(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "many", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	var rows []table.Row
	for i := range n {
		rows = append(rows, table.Row{"ts": day0.Add(time.Duration(i) * time.Second), "n": int64(i), "s": fmt.Sprintf("str-%d", i)})
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	st, err := Compact(ctx, tb, t.TempDir(), day0.Add(24*time.Hour), Options{RowGroupRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Files) != 1 || st.Rows != n {
		t.Fatalf("stats %+v", st)
	}
	got, _ := readParquet(t, st.Files[0])
	seen := map[int64]bool{}
	for _, r := range got {
		i := r["n"].(int64)
		if r["s"] != fmt.Sprintf("str-%d", i) || r["ts"].(int64) != day0.Add(time.Duration(i)*time.Second).UnixMicro() || seen[i] {
			t.Fatalf("row %v damaged or repeated", r)
		}
		seen[i] = true
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct rows, want %d", len(seen), n)
	}
}
