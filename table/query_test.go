package table

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"
)

// source rows of the query tests, kept as plain Go values so that the
// expected result of each predicate is computed here, not by the package.
type srcRow struct {
	i    int64
	ts   time.Time
	user string
	f    float64
	s    *string // nil: null
	b    bool
}

func queryFixture(t *testing.T) (*Table, []srcRow) {
	t.Helper()
	s := openStore(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	tb, err := s.Table(Config{Name: "q", HashBy: "user", SortBy: "ts", BlockSpan: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var src []srcRow
	for batch := range 4 {
		var rows []Row
		for j := range 250 {
			i := int64(batch*250 + j)
			r := srcRow{i: i, ts: t0.Add(time.Duration(i*7919%1000) * time.Second), user: fmt.Sprintf("u%d", i%5), f: float64(i%13) - 6, b: i%4 == 0}
			row := Row{"i": i, "ts": r.ts, "user": r.user, "f": r.f, "b": r.b}
			if i%6 != 0 {
				str := fmt.Sprintf("s%03d", i%50)
				r.s = &str
				row["s"] = str
			}
			src = append(src, r)
			rows = append(rows, row)
		}
		if err := tb.Append(context.Background(), rows); err != nil {
			t.Fatal(err)
		}
	}
	return tb, src
}

func TestQueryPredicates(t *testing.T) {
	tb, src := queryFixture(t)
	str := func(r srcRow) string {
		if r.s == nil {
			return ""
		}
		return *r.s
	}
	from, to := t0.Add(100*time.Second), t0.Add(700*time.Second)
	for _, tc := range []struct {
		name string
		q    Query
		keep func(srcRow) bool
	}{
		{"all", Query{}, func(srcRow) bool { return true }},
		{"time range", Query{From: from, To: to}, func(r srcRow) bool { return !r.ts.Before(from) && r.ts.Before(to) }},
		{"one partition", Query{HashIn: []any{"u3"}}, func(r srcRow) bool { return r.user == "u3" }},
		{"partitions in range", Query{HashIn: []any{"u1", "u4", "nobody"}, From: from, To: to},
			func(r srcRow) bool {
				return (r.user == "u1" || r.user == "u4") && !r.ts.Before(from) && r.ts.Before(to)
			}},
		{"= int", Query{Where: []Predicate{{Column: "i", Op: Eq, Value: "42"}}}, func(r srcRow) bool { return r.i == 42 }},
		{"!= float", Query{Where: []Predicate{{Column: "f", Op: Ne, Value: 0}}}, func(r srcRow) bool { return r.f != 0 }},
		{"< float", Query{Where: []Predicate{{Column: "f", Op: Lt, Value: -2.5}}}, func(r srcRow) bool { return r.f < -2.5 }},
		{"<= int", Query{Where: []Predicate{{Column: "i", Op: Le, Value: 10}}}, func(r srcRow) bool { return r.i <= 10 }},
		{"> string", Query{Where: []Predicate{{Column: "s", Op: Gt, Value: "s040"}}}, func(r srcRow) bool { return r.s != nil && *r.s > "s040" }},
		{">= time", Query{Where: []Predicate{{Column: "ts", Op: Ge, Value: to.Format(time.RFC3339)}}}, func(r srcRow) bool { return !r.ts.Before(to) }},
		{"< time", Query{Where: []Predicate{{Column: "ts", Op: Lt, Value: from}}}, func(r srcRow) bool { return r.ts.Before(from) }},
		{"= time", Query{Where: []Predicate{{Column: "ts", Op: Eq, Value: t0.Add(7919 * time.Second % (1000 * time.Second))}}},
			func(r srcRow) bool { return r.ts.Equal(t0.Add(7919 * time.Second % (1000 * time.Second))) }},
		{"<= and > time", Query{Where: []Predicate{{Column: "ts", Op: Le, Value: to.Unix()}, {Column: "ts", Op: Gt, Value: from}}},
			func(r srcRow) bool { return !r.ts.After(to) && r.ts.After(from) }},
		{"= bool", Query{Where: []Predicate{{Column: "b", Op: Eq, Value: true}}}, func(r srcRow) bool { return r.b }},
		{"IN string", Query{Where: []Predicate{{Column: "s", Op: In, Values: []any{"s001", "s002", nil}}}},
			func(r srcRow) bool { return str(r) == "s001" || str(r) == "s002" }},
		{"IN int", Query{Where: []Predicate{{Column: "i", Op: In, Values: []any{1, "2", 3.0}}}}, func(r srcRow) bool { return r.i >= 1 && r.i <= 3 }},
		{"IS NULL", Query{Where: []Predicate{{Column: "s", Op: IsNull}}}, func(r srcRow) bool { return r.s == nil }},
		{"IS NOT NULL and !=", Query{Where: []Predicate{{Column: "s", Op: NotNull}, {Column: "s", Op: Ne, Value: "s001"}}},
			func(r srcRow) bool { return r.s != nil && *r.s != "s001" }},
		{"!= skips nulls", Query{Where: []Predicate{{Column: "s", Op: Ne, Value: "zzz"}}}, func(r srcRow) bool { return r.s != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []int64
			for _, r := range src {
				if tc.keep(r) {
					want = append(want, r.i)
				}
			}
			q := tc.q
			q.Columns = []string{"i", "s"}
			var got []int64
			for _, r := range collect(t, tb, q) {
				if len(r) != 2 {
					t.Fatalf("row %v: projection of 2 columns gave %d", r, len(r))
				}
				got = append(got, r["i"].(int64))
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d rows %v..., want %d rows %v...", len(got), head(got), len(want), head(want))
			}
		})
	}
}

func head(s []int64) []int64 { return s[:min(len(s), 8)] }

func TestQueryErrorsLimitAndStop(t *testing.T) {
	tb, _ := queryFixture(t)
	ctx := context.Background()
	for _, q := range []Query{
		{Columns: []string{"i", "nope"}},
		{Where: []Predicate{{Column: "nope", Op: Eq, Value: 1}}},
	} {
		err := tb.Query(ctx, q, func(Row) error { return nil })
		if !errors.Is(err, ErrUnknownColumn) {
			t.Errorf("query %+v: %v, want ErrUnknownColumn", q, err)
		}
	}
	for _, p := range []Predicate{
		{Column: "i", Op: Eq, Value: "x"}, {Column: "i", Op: "~", Value: 1},
		{Column: "b", Op: Lt, Value: true}, {Column: "i", Op: Eq},
	} {
		if err := tb.Query(ctx, Query{Where: []Predicate{p}}, func(Row) error { return nil }); err == nil {
			t.Errorf("predicate %+v accepted", p)
		}
	}
	if got := collect(t, tb, Query{Limit: 17, HashIn: []any{"u2"}}); len(got) != 17 {
		t.Errorf("limit 17 gave %d rows", len(got))
	}
	stop := errors.New("stop")
	n := 0
	err := tb.Query(ctx, Query{}, func(Row) error {
		if n++; n == 5 {
			return stop
		}
		return nil
	})
	if err != stop || n != 5 {
		t.Errorf("emit error: got %v after %d rows, want stop after 5", err, n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := tb.Query(cctx, Query{}, func(Row) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled query: %v", err)
	}
	for _, s := range []string{"==", "<>", "in", "is  null", "Is Not Null"} {
		if _, err := ParseOp(s); err != nil {
			t.Errorf("ParseOp(%q): %v", s, err)
		}
	}
}

func TestTTLHidesThenRangeDeletes(t *testing.T) {
	ctx := context.Background()
	now := t0.Add(48 * time.Hour)
	s, err := Open(t.TempDir(), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := Config{Name: "ttl", HashBy: "p", SortBy: "ts", TTL: 24 * time.Hour}
	tb, err := s.Table(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	for h := range 48 { // one row per hour per partition, from t0 to now
		for p := range 3 {
			rows = append(rows, Row{"ts": t0.Add(time.Duration(h)*time.Hour + 30*time.Minute), "p": p, "h": h})
		}
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	cutoff := now.Add(-24 * time.Hour) // t0+24h
	for _, r := range collect(t, tb, Query{}) {
		if r["ts"].(time.Time).Before(cutoff) {
			t.Fatalf("expired row %v visible", r)
		}
	}
	if n, err := tb.Expire(ctx); err != nil || n != 3 {
		t.Fatalf("Expire: %d partitions, %v; want 3", n, err)
	}
	// Without the TTL the query shows what is really stored.
	cfg.TTL = 0
	if tb, err = s.Table(cfg); err != nil {
		t.Fatal(err)
	}
	got := collect(t, tb, Query{})
	if len(got) != 24*3 {
		t.Fatalf("%d rows stored after expiry, want %d", len(got), 24*3)
	}
	for _, r := range got {
		if r["ts"].(time.Time).Before(cutoff) {
			t.Fatalf("expired row %v still stored", r)
		}
	}
}

func TestQueryValuesMatchesQuery(t *testing.T) {
	tb, _ := queryFixture(t)
	ctx := context.Background()
	q := Query{HashIn: []any{"u2", "u3"}, Columns: []string{"s", "i", "ts"}, Where: []Predicate{{Column: "f", Op: Gt, Value: 0}}}
	var fromMaps [][3]any
	if err := tb.Query(ctx, q, func(r Row) error {
		fromMaps = append(fromMaps, [3]any{r["s"], r["i"], r["ts"]})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var fromValues [][3]any
	if err := tb.QueryValues(ctx, q, func(cols []Column, v []any) error {
		if len(cols) != 3 || cols[0] != (Column{"s", String}) || cols[1] != (Column{"i", Int64}) || cols[2] != (Column{"ts", Timestamp}) {
			return fmt.Errorf("columns %v", cols)
		}
		fromValues = append(fromValues, [3]any{v[0], v[1], v[2]})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(fromMaps) == 0 || !slices.Equal(fromMaps, fromValues) {
		t.Fatalf("Query gave %d rows, QueryValues %d, or they differ", len(fromMaps), len(fromValues))
	}
	cols, err := tb.Columns(q)
	if err != nil || len(cols) != 3 || cols[1].Name != "i" {
		t.Fatalf("Columns: %v, %v", cols, err)
	}
	if _, err := tb.Columns(Query{Columns: []string{"zz"}}); !errors.Is(err, ErrUnknownColumn) {
		t.Fatalf("Columns with an unknown column: %v", err)
	}
}

// TestWidenedColumnOrdersNumbers: an int64 column widened to string (one
// row had "n/a") still orders its numbers as numbers: amount >= 900 over
// 0..999 is 100 rows, in blocks written before the widening and after.
// Before, it compared text and returned 109 ("91" >= "900"). Equality
// stays exact text.
func TestWidenedColumnOrdersNumbers(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "w", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	var before, after []Row
	for i := range 1000 {
		r := Row{"ts": t0.Add(time.Duration(i) * time.Second), "amount": int64(i)}
		if i%2 == 0 {
			before = append(before, r)
		} else {
			r["amount"] = strconv.Itoa(i)
			after = append(after, r)
		}
	}
	after = append(after, Row{"ts": t0, "amount": "n/a"})
	for _, rows := range [][]Row{before, after} {
		if err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	if typ := tb.Schema()[1].Type; typ != String {
		t.Fatalf("amount is %v, want it widened to string", typ)
	}
	count := func(w ...Predicate) int {
		t.Helper()
		n := 0
		if err := tb.Query(ctx, Query{Where: w}, func(Row) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		p    Predicate
		want int
	}{
		{Predicate{Column: "amount", Op: Ge, Value: "900"}, 100},
		{Predicate{Column: "amount", Op: Ge, Value: 900}, 100},
		{Predicate{Column: "amount", Op: Lt, Value: "10"}, 10},
		{Predicate{Column: "amount", Op: Gt, Value: "9.5"}, 990},
		{Predicate{Column: "amount", Op: Eq, Value: "900"}, 1},
		{Predicate{Column: "amount", Op: Eq, Value: "900.0"}, 0},
		{Predicate{Column: "amount", Op: Gt, Value: "m"}, 1}, // "n/a": text against text
	} {
		if got := count(tc.p); got != tc.want {
			t.Errorf("%v: %d rows, want %d", tc.p, got, tc.want)
		}
	}
}
