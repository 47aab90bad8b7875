package coldread_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/coldread"
	"github.com/sluicedb/sluice/table"
)

// TestPredicatesAgreeHotAndCold runs the same queries, table-driven, on
// two tables holding the same rows: one all hot, one whose first two days
// were compacted into Iceberg (then removed from the store) before two
// columns widened (w from int64 to float64, s from int64 to string, which
// Iceberg cannot follow: the files keep int64). Every operator on every
// type, nulls, NaN, values of other types than the column's, numeric order
// on a widened string column, hash values, and each query's rows must be
// the same rows with the same values and Go types in both; a query the
// store refuses is refused by both. The cold rows go through the
// parquet-go path and, again, through iceberg-go's Arrow path.
func TestPredicatesAgreeHotAndCold(t *testing.T) {
	dir := t.TempDir()
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hot, err := st.Table(table.Config{Name: "hot", HashBy: "user", SortBy: "ts"}) // inferred schemas
	if err != nil {
		t.Fatal(err)
	}
	cold, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var early, late []table.Row
	for i := range 600 {
		r := table.Row{"user": fmt.Sprintf("u%d", i%7), "ts": readDay0.Add(time.Duration(i%2)*24*time.Hour + time.Duration(i)*time.Second),
			"n": int64(i), "f": float64(i) / 8, "ok": i%3 == 0, "note": fmt.Sprintf("note %03d", i%90),
			"doc": json.RawMessage(fmt.Sprintf(`{"k":%d}`, i%11)), "at": readDay0.Add(time.Duration(i) * time.Minute),
			"w": int64(i % 40), "s": int64(i)}
		switch {
		case i%7 == 0:
			r["note"], r["f"], r["doc"], r["at"], r["w"], r["s"] = nil, nil, nil, nil, nil, nil
		case i == 5:
			r["f"] = math.NaN()
		}
		early = append(early, r)
	}
	for i := range 100 {
		late = append(late, table.Row{"user": fmt.Sprintf("u%d", i%7), "ts": readDay0.Add(48*time.Hour + time.Duration(i)*time.Second),
			"n": int64(1000 + i), "f": float64(i), "ok": i%2 == 0, "note": fmt.Sprintf("note %03d", i),
			"doc": json.RawMessage(`{"k":1}`), "at": readDay0.Add(48 * time.Hour),
			"w": float64(i) + 0.5, "s": []string{"n/a", "950", "12", "abc"}[i%4]})
	}
	for _, tb := range []*table.Table{hot, cold} {
		if err := tb.Append(ctx, early); err != nil {
			t.Fatal(err)
		}
	}
	c := localCompactor(t, dir, cold, 100)
	if run, err := c.Compact(ctx, readDay0.Add(48*time.Hour), coldtier.Options{Remove: true}); err != nil || run.Rows != 600 {
		t.Fatalf("compaction: %+v, %v", run, err)
	}
	for _, tb := range []*table.Table{hot, cold} {
		if err := tb.Append(ctx, late); err != nil {
			t.Fatal(err)
		}
	}
	for _, col := range cold.Schema() {
		if col.Name == "w" && col.Type != table.Float64 || col.Name == "s" && col.Type != table.String {
			t.Fatalf("column %s is %v: the widening this test needs did not happen", col.Name, col.Type)
		}
	}

	p := func(col string, op table.Op, v any) table.Predicate {
		return table.Predicate{Column: col, Op: op, Value: v}
	}
	in := func(col string, vals ...any) table.Predicate {
		return table.Predicate{Column: col, Op: table.In, Values: vals}
	}
	where := func(ps ...table.Predicate) table.Query { return table.Query{Where: ps} }
	cases := []struct {
		name    string
		q       table.Query
		none    bool // matches no row (still a useful case)
		refused bool // the store refuses the query
	}{
		{name: "all", q: table.Query{}},
		{name: "int-ops", q: where(p("n", table.Ge, "100"), p("n", table.Lt, 1500), p("n", table.Ne, json.Number("200")))},
		{name: "int-eq-float", q: where(p("n", table.Eq, 5.0))},
		{name: "int-in-with-null", q: where(in("n", int64(1), "2", 3.0, nil))},
		{name: "float-ops", q: where(p("f", table.Gt, "10.5"), p("f", table.Le, 60))},
		{name: "float-ne-nan", q: where(p("f", table.Ne, math.NaN()))},
		{name: "float-eq-nan", q: where(p("f", table.Eq, math.NaN())), none: true},
		{name: "float-in", q: where(in("f", 0.125, 1, nil, math.NaN()))},
		{name: "bool", q: where(p("ok", table.Eq, "true"))},
		{name: "bool-ne", q: where(p("ok", table.Ne, false))},
		{name: "bool-order", q: where(p("ok", table.Lt, true)), refused: true},
		{name: "string-lt", q: where(p("note", table.Lt, "note 050"))},
		{name: "string-number-order", q: where(p("note", table.Ge, "7")), none: true}, // "note ..." is no number
		{name: "string-in", q: where(in("note", "note 007", "note 012", 42))},
		{name: "string-null", q: where(p("note", table.IsNull, nil))},
		{name: "string-not-null", q: where(p("note", table.NotNull, nil), p("note", table.Ne, "note 001"))},
		{name: "json-eq", q: where(p("doc", table.Eq, `{"k":3}`))},
		{name: "json-in", q: where(in("doc", `{"k":1}`, json.RawMessage(`{"k":2}`)))},
		{name: "json-order", q: where(p("doc", table.Lt, `{"k":3}`)), refused: true},
		{name: "time-ops", q: where(p("at", table.Ge, "2024-05-01T05:00:00Z"), p("at", table.Lt, readDay0.Add(8*time.Hour)))},
		{name: "time-unix", q: where(p("at", table.Eq, readDay0.Add(10*time.Minute).Unix()))},
		{name: "time-in", q: where(in("at", "2024-05-01T00:05:00Z", "2024-05-03T00:00:00Z", nil))},
		{name: "widened-float", q: where(p("w", table.Gt, 10.5), p("w", table.Le, "30"))},
		{name: "widened-float-eq", q: where(p("w", table.Eq, 7))},
		{name: "widened-float-in", q: where(in("w", 3, 4.0, 0.5))},
		{name: "widened-string-numeric", q: where(p("s", table.Ge, "500"))},
		{name: "widened-string-lt", q: where(p("s", table.Lt, 20))},
		{name: "widened-string-eq", q: where(p("s", table.Eq, "43"))},
		{name: "widened-string-in", q: where(in("s", "1", 2, "n/a", 12.0))},
		{name: "widened-string-text", q: where(p("s", table.Gt, "abc"))},
		{name: "widened-string-ne", q: where(p("s", table.Ne, "7"))},
		{name: "hash", q: table.Query{HashIn: []any{"u3", "u5", nil}}},
		{name: "hash-empty-list", q: table.Query{HashIn: []any{}}},
		{name: "hash-missing", q: table.Query{HashIn: []any{"nobody"}}, none: true},
		{name: "hash-and-where", q: table.Query{HashIn: []any{"u2"}, Where: []table.Predicate{p("f", table.Ge, 20)}}},
		{name: "time-range", q: table.Query{From: readDay0.Add(100*time.Second + 500*time.Nanosecond), To: readDay0.Add(24*time.Hour + 300*time.Second)}},
		{name: "sort-column", q: where(p("ts", table.Lt, "2024-05-01T00:03:00Z"))},
		{name: "null-value", q: where(p("n", table.Eq, nil)), refused: true},
		{name: "unknown-column", q: where(p("nope", table.Eq, 1)), refused: true},
		{name: "projection", q: table.Query{Columns: []string{"s", "w", "n"}, Where: []table.Predicate{p("n", table.Le, 30)}}},
	}
	for _, arrow := range []bool{false, true} {
		*coldread.ForceArrow = arrow
		for _, tc := range cases {
			want, wantErr := agreeRows(func(emit func([]table.Column, []any) error) error { return hot.QueryValues(ctx, tc.q, emit) })
			got, gotErr := agreeRows(func(emit func([]table.Column, []any) error) error { return c.QueryValues(ctx, tc.q, true, emit) })
			if tc.refused {
				if wantErr == nil || gotErr == nil {
					t.Errorf("%s (arrow %v): hot %v, cold %v; want both refused", tc.name, arrow, wantErr, gotErr)
				}
				continue
			}
			if wantErr != nil || gotErr != nil {
				t.Fatalf("%s (arrow %v): hot %v, cold %v", tc.name, arrow, wantErr, gotErr)
			}
			if tc.none != (len(want) == 0) {
				t.Fatalf("%s: the hot table gives %d rows; the case is wrong", tc.name, len(want))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (arrow %v): %d rows over both tiers, %d hot; %s", tc.name, arrow, len(got), len(want), firstDiff(got, want))
			}
		}
	}
	*coldread.ForceArrow = false
}

// agreeRows runs a query and returns its rows ordered by n, each as
// column -> value with NaN as the string "NaN" (DeepEqual never finds two
// NaNs equal).
func agreeRows(query func(emit func([]table.Column, []any) error) error) ([]map[string]any, error) {
	var rows []map[string]any
	err := query(func(cols []table.Column, vals []any) error {
		r := map[string]any{}
		for i, v := range vals {
			if f, ok := v.(float64); ok && math.IsNaN(f) {
				v = "NaN"
			}
			r[cols[i].Name] = v
		}
		rows = append(rows, r)
		return nil
	})
	sort.Slice(rows, func(i, j int) bool { return rows[i]["n"].(int64) < rows[j]["n"].(int64) })
	return rows, err
}

func firstDiff(got, want []map[string]any) string {
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			return fmt.Sprintf("row %d: %#v, want %#v", i, got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}
