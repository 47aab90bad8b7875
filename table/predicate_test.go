package table

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestConditionValue: Condition.Value, which the cold tier runs on boxed
// values (and on values of files written before a column widened), agrees
// with the typed entries the scans use, converts as Convert does, and
// orders a time beyond the store's nanoseconds past every query value.
func TestConditionValue(t *testing.T) {
	at := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		p    Predicate
		typ  Type
		v    any
		want bool
	}{
		{Predicate{Op: Ge, Value: "10"}, Int64, int64(10), true},
		{Predicate{Op: Lt, Value: 10.5}, Float64, int64(10), true},   // an int64 file value in a float64 column
		{Predicate{Op: Ge, Value: "900"}, String, int64(1000), true}, // widened to string: numbers as numbers
		{Predicate{Op: Eq, Value: "5"}, String, 5.0, true},
		{Predicate{Op: Eq, Value: "true"}, String, true, true},
		{Predicate{Op: Eq, Value: "2024-05-01T00:00:00Z"}, String, at, true},
		{Predicate{Op: Ne, Value: math.NaN()}, Float64, math.NaN(), true},
		{Predicate{Op: Eq, Value: math.NaN()}, Float64, math.NaN(), false},
		{Predicate{Op: In, Values: []any{nil, "a"}}, String, nil, false},
		{Predicate{Op: IsNull}, Int64, nil, true},
		{Predicate{Op: NotNull}, Int64, "not an int", true},
		{Predicate{Op: Eq, Value: 1}, Int64, "not an int", false},
		{Predicate{Op: Eq, Value: `{"k":1}`}, JSON, json.RawMessage(`{"k":1}`), true},
		{Predicate{Op: Eq, Value: "true"}, Bool, true, true},
		{Predicate{Op: Lt, Value: at}, Timestamp, time.Date(1200, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{Predicate{Op: Gt, Value: at}, Timestamp, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{Predicate{Op: Eq, Value: at}, Timestamp, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), false},
	}
	for _, c := range cases {
		c.p.Column = "x"
		cond, err := c.p.Compile(c.typ)
		if err != nil {
			t.Fatalf("%s (%v): %v", c.p, c.typ, err)
		}
		if got := cond.Value(c.v); got != c.want {
			t.Errorf("%s (%v) on %#v: %v, want %v", c.p, c.typ, c.v, got, c.want)
		}
	}
}

// BenchmarkQueryWhere is a scan whose rows go through five predicates of
// four types (int, float, string, bool), with few rows emitted: the cost
// of the evaluator per row.
func BenchmarkQueryWhere(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, b.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "bench", HashBy: "user", SortBy: "ts"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		if err := tb.Append(ctx, benchRows(i, 1000, 4)); err != nil {
			b.Fatal(err)
		}
	}
	q := Query{From: t0, To: t0.Add(time.Hour), Columns: []string{"n"}, Where: []Predicate{
		{Column: "latency", Op: Ge, Value: 10}, {Column: "amount", Op: Lt, Value: 130.5},
		{Column: "country", Op: Ne, Value: "SG"}, {Column: "ok", Op: Eq, Value: false},
		{Column: "path", Op: In, Values: []any{"/", "/cart", "/pay"}}}}
	b.ResetTimer()
	rows := 0
	cpu0 := cpuTime()
	for b.Loop() {
		if err := tb.QueryValues(ctx, q, func([]Column, []any) error { rows++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	if rows == 0 {
		b.Fatal("no rows")
	}
	reportRate(b, rows, cpu0)
}
