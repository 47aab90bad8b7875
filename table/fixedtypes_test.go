package table

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestFixedTypes: with SetFixedTypes an inferred column keeps the type of its
// first value. A later value that converts without loss is stored converted
// (1.0 into int64, 1 into float64, a number into a string column as its
// text); one that does not (1.5 or "abc" into int64, 2^53+1 into float64, a
// number into bool) leaves its row out with a *TypeMismatchError naming the
// rows, the column, the value and both types, by Add and by AddColumns
// alike, and the batch takes the other rows after. A column widened before
// stays as it is.
func TestFixedTypes(t *testing.T) {
	ctx := context.Background()
	for _, byCols := range []bool{false, true} {
		s := openStore(t, t.TempDir())
		tb, err := s.Table(Config{Name: "e", SortBy: "ts"})
		if err != nil {
			t.Fatal(err)
		}
		// A column widened before the types were fixed stays widened.
		if err := tb.Append(ctx, []Row{{"ts": t0, "w": int64(1)}, {"ts": t0, "w": 1.5}}); err != nil {
			t.Fatal(err)
		}
		tb.SetFixedTypes(true)
		if err := tb.Append(ctx, []Row{{"ts": t0, "i": int64(1), "f": 1.5, "s": "a", "b": true}}); err != nil {
			t.Fatal(err)
		}
		rows := []Row{
			{"ts": t0.Add(1), "i": 2.0, "f": int64(2), "s": int64(7), "w": int64(3)}, // fits, converted
			{"ts": t0.Add(2), "i": 1.5},                             // fractional into int64
			{"ts": t0.Add(3), "i": "abc"},                           // text into int64
			{"ts": t0.Add(4), "f": int64(1<<53 + 1)},                // not exact as a float64
			{"ts": t0.Add(5), "b": int64(1)},                        // number into bool
			{"ts": t0.Add(6), "s": 2.5, "n": int64(1)},              // fits; a new column
			{"ts": t0.Add(7), "n": 0.5},                             // the new column is int64 since row 5
			{"ts": t0.Add(8), "i": int64(math.MaxInt64), "f": 0.25}, // fits
		}
		b, err := tb.NewAppender()
		if err != nil {
			t.Fatal(err)
		}
		if byCols {
			err = b.AddColumns(ctx, byColumns(rows))
		} else {
			err = b.Add(ctx, rows)
		}
		var me *TypeMismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrTypeMismatch) {
			t.Fatalf("byColumns %v: err = %v, want a *TypeMismatchError", byCols, err)
		}
		if want := []int{1, 2, 3, 4, 6}; !reflect.DeepEqual(me.Rows, want) {
			t.Fatalf("byColumns %v: rows left out %v, want %v (%q)", byCols, me.Rows, want, me.Reasons)
		}
		if want := []string{"i", "i", "f", "b", "n"}; !reflect.DeepEqual(me.Columns, want) {
			t.Errorf("byColumns %v: columns %v, want %v", byCols, me.Columns, want)
		}
		for _, want := range []string{`column "i" (int64)`, "1.5 (float64)", "whole int64"} {
			if !strings.Contains(me.RowReason(0), want) {
				t.Errorf("reason %q lacks %q", me.RowReason(0), want)
			}
		}
		var se *SchemaError
		if !errors.As(err, &se) || se.Row != 1 || se.Column != "i" {
			t.Errorf("the first row's SchemaError = %+v", se)
		}
		// The batch survives the error and takes the rows that fit.
		var kept []Row
		for r, row := range rows {
			if !containsInt(me.Rows, r) {
				kept = append(kept, row)
			}
		}
		if err := b.Add(ctx, kept); err != nil {
			t.Fatalf("the rows that fit: %v", err)
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		b.Close()
		types := map[string]Type{}
		for _, c := range tb.Schema() {
			types[c.Name] = c.Type
		}
		if want := (map[string]Type{"ts": Timestamp, "w": Float64, "i": Int64, "f": Float64, "s": String, "b": Bool, "n": Int64}); !reflect.DeepEqual(types, want) {
			t.Errorf("schema %v, want %v", types, want)
		}
		got := collect(t, tb, Query{})
		if len(got) != 6 {
			t.Fatalf("%d rows, want 6: %v", len(got), got)
		}
		if got[0]["w"] != 1.0 || got[1]["w"] != 1.5 {
			t.Errorf("the widened column: %v %v", got[0], got[1])
		}
		got = got[1:]
		if r := got[2]; r["i"] != int64(2) || r["f"] != 2.0 || r["s"] != "7" || r["w"] != 3.0 {
			t.Errorf("converted row %v", r)
		}
		if r := got[3]; r["s"] != "2.5" || r["n"] != int64(1) {
			t.Errorf("row %v", r)
		}
		if r := got[4]; r["i"] != int64(math.MaxInt64) || r["f"] != 0.25 {
			t.Errorf("row %v", r)
		}
		s.Close()
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
