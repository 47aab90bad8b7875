package coldtier

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedb/sluice/table"
)

// TestVectorAppenderValues copies a table's blocks into Arrow columns with
// the bulk appender, once every row (contiguous runs) and once a sparse
// selection of them (gathered), with nulls in every type, an int64 column
// read into a float64 one, and a column the blocks lack: every value must
// be the one the row-wise query gives for that row.
func TestVectorAppenderValues(t *testing.T) {
	dir := t.TempDir()
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cols := []table.Column{{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp},
		{Name: "n", Type: table.Int64}, {Name: "f", Type: table.Float64}, {Name: "ok", Type: table.Bool},
		{Name: "note", Type: table.String}, {Name: "doc", Type: table.JSON}}
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	day := time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC) // negative unix times: floorDiv
	const total = 5000
	rows := make([]table.Row, 0, total)
	for i := range total {
		r := table.Row{"user": "u" + strconv.Itoa(i%3), "ts": day.Add(time.Duration(i)*time.Second + time.Duration(i%1000)*time.Nanosecond)}
		if i%7 != 0 {
			r["n"], r["f"], r["ok"] = int64(i-2500), float64(i)/4, i%2 == 0
			r["note"], r["doc"] = "note "+strconv.Itoa(i*7919), `{"i":`+strconv.Itoa(i)+`}`
		}
		rows = append(rows, r)
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// The run's columns: n read as float64 too, and one the blocks lack.
	names := []string{"user", "ts", "n", "f", "ok", "note", "doc", "n", "absent"}
	runCols := []table.Column{cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6],
		{Name: "n", Type: table.Float64}, {Name: "absent", Type: table.Int64}}
	var want [][]any // per selected row, the values in runCols order
	sparse := func(g int) bool { return g%5 != 1 && g%11 != 3 }
	g := 0
	err = tb.QueryValues(ctx, table.Query{Columns: names[:7], ByKey: true}, func(_ []table.Column, vals []any) error {
		defer func() { g++ }()
		row := append([]any(nil), vals...)
		if v, ok := row[1].(time.Time); ok {
			row[1] = v.UnixMicro()
		}
		if v, ok := row[6].(json.RawMessage); ok {
			row[6] = string(v)
		}
		if v, ok := row[2].(int64); ok {
			row = append(row, float64(v))
		} else {
			row = append(row, nil)
		}
		want = append(want, append(row, nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != total {
		t.Fatalf("query gave %d rows, want %d", len(want), total)
	}
	for _, sel := range []struct {
		name string
		keep func(int) bool
	}{{"every row", func(int) bool { return true }}, {"sparse", sparse}} {
		t.Run(sel.name, func(t *testing.T) {
			fields := make([]arrow.Field, len(runCols))
			for i, c := range runCols {
				fields[i] = arrow.Field{Name: c.Name + strconv.Itoa(i), Type: arrowType(c.Type), Nullable: true}
			}
			b := array.NewRecordBuilder(memory.NewGoAllocator(), arrow.NewSchema(fields, nil))
			defer b.Release()
			app := vectorAppender{batchRows: 64}
			app.reserve(b)
			var picked []int
			g := 0
			blocks := 0
			err := tb.QueryBlocksSeqs(ctx, table.Query{Columns: names[:7], ByKey: true}, 0, 0, 2, func(_ []table.Column, blk *table.BlockRows) error {
				blocks++
				var part []int32
				for _, r := range blk.Rows {
					if sel.keep(g) {
						part = append(part, r)
						picked = append(picked, g)
					}
					g++
				}
				for i, c := range runCols {
					v := &blk.Cols[min(i, 6)]
					switch i {
					case 7:
						v = &blk.Cols[2]
					case 8:
						v = &table.ColumnVector{Type: table.Int64, Absent: true}
					}
					if err := app.appendVector(b.Field(i), c, v, part); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := b.NewRecordBatch()
			defer rec.Release()
			if int(rec.NumRows()) != len(picked) {
				t.Fatalf("%d rows built, want %d", rec.NumRows(), len(picked))
			}
			for k, gi := range picked {
				for i := range runCols {
					got := arrowValue(rec.Column(i), k)
					if w := want[gi][i]; fmt.Sprint(got) != fmt.Sprint(w) {
						t.Fatalf("row %d (query row %d) column %d (%s): got %v, want %v", k, gi, i, runCols[i].Name, got, w)
					}
				}
			}
			t.Logf("%d blocks, %d rows", blocks, len(picked))
		})
	}
}

// arrowValue is row k of a: nil for null, else the value as the row-wise
// query gives it (timestamps in unix µs).
func arrowValue(a arrow.Array, k int) any {
	if a.IsNull(k) {
		return nil
	}
	switch a := a.(type) {
	case *array.Int64:
		return a.Value(k)
	case *array.Float64:
		return a.Value(k)
	case *array.Boolean:
		return a.Value(k)
	case *array.String:
		return a.Value(k)
	case *array.Timestamp:
		return int64(a.Value(k))
	}
	return fmt.Sprintf("unexpected %T", a)
}

// TestRowSelKeepClonesTags hands the claims a block's batch tags the way a
// block-wise query gives them, as strings over the decoded block's bytes
// that the next block overwrites: the claims keep what they saw (the last
// tag, the sources of the rows written), so the reader must clone the tags
// it hands over, or the first block's source turns into the second's.
func TestRowSelKeepClonesTags(t *testing.T) {
	rc := newRunClaims("me", claims{})
	sel := rowSel{claims: rc}
	block := []byte("kafka/t/0/a@0-10")
	borrowed := unsafe.String(&block[0], len(block))
	var tag string
	keepBlock := func(off int64) {
		blk := &table.BlockRows{Rows: []int32{0}, Cols: []table.ColumnVector{
			{Type: table.String, Strs: []string{borrowed}}, {Type: table.Int64, Ints: []int64{off}}}}
		if kept := sel.keep(blk, 0, nil, &tag); len(kept) != 1 {
			t.Fatalf("kept %v, want row 0", kept)
		}
	}
	keepBlock(5)
	copy(block, "kafka/t/0/b@0-10") // the next block, decoded into the same bytes
	keepBlock(6)
	for _, src := range []string{"kafka/t/0/a", "kafka/t/0/b"} {
		if _, ok := rc.written[src]; !ok {
			t.Errorf("no rows written recorded for source %s: %v", src, rc.written)
		}
	}
}

// TestVectorAppenderWidenedNulls reads a column widened from int64 to
// string between two blocks, the string block first: the int64 block's
// null slots, converted, still hold the earlier block's strings, and must
// add no bytes to the Arrow column (only its values' bytes are there).
func TestVectorAppenderWidenedNulls(t *testing.T) {
	st, err := table.Open(filepath.Join(t.TempDir(), "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var ints, strs []table.Row
	for i := range 100 {
		r := table.Row{"user": "u", "ts": day.Add(time.Hour + time.Duration(i)*time.Second)}
		if i%2 == 0 {
			r["v"] = int64(i)
		}
		ints = append(ints, r)
		strs = append(strs, table.Row{"user": "u", "ts": day.Add(time.Duration(i) * time.Second), "v": "a long string value " + strconv.Itoa(i)})
	}
	if err := tb.Append(ctx, ints); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, strs); err != nil { // widens v to string; earlier in time: read first
		t.Fatal(err)
	}
	col := table.Column{Name: "v", Type: table.String}
	b := array.NewStringBuilder(memory.NewGoAllocator())
	defer b.Release()
	app := vectorAppender{batchRows: 1024}
	want := 0
	err = tb.QueryBlocksSeqs(ctx, table.Query{Columns: []string{"v"}, ByKey: true}, 0, 0, 1, func(cs []table.Column, blk *table.BlockRows) error {
		for _, r := range blk.Rows {
			if !blk.Cols[0].Null(r) {
				want += len(blk.Cols[0].Strs[r])
			}
		}
		return app.appendVector(b, col, &blk.Cols[0], blk.Rows)
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 200 || b.NullN() != 50 {
		t.Fatalf("%d values, %d null; want 200 and 50", b.Len(), b.NullN())
	}
	if b.DataLen() != want {
		t.Errorf("%d bytes of string data, want %d (the values')", b.DataLen(), want)
	}
}
