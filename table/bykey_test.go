package table

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

// TestQueryByKey: with ByKey the rows of a range come out sorted by the
// hashBy value (nulls first; numbers by value, not by text), and they are
// the same rows as without it, also with a time range, predicates, a limit
// and a sequence bound (the compaction's read).
func TestQueryByKey(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))

	str, err := s.Table(Config{Name: "s", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	num, err := s.Table(Config{Name: "n", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	var rowsS, rowsN []Row
	for i := range 3000 {
		ts := t0.Add(time.Duration(rng.IntN(72*60)) * time.Minute)
		var ks any = fmt.Sprintf("key-%d", rng.IntN(300))
		if i%97 == 0 {
			ks = nil
		}
		rowsS = append(rowsS, Row{"k": ks, "ts": ts, "n": int64(i)})
		rowsN = append(rowsN, Row{"k": int64(rng.IntN(300) - 150), "ts": ts, "n": int64(i)})
	}
	for i := 0; i < len(rowsS); i += 250 { // many appends: many blocks per partition
		if err := str.Append(ctx, rowsS[i:i+250]); err != nil {
			t.Fatal(err)
		}
		if err := num.Append(ctx, rowsN[i:i+250]); err != nil {
			t.Fatal(err)
		}
	}
	_, high, _, err := num.BlockRange(ctx, t0.Add(200*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	less := map[string]func(a, b any) bool{
		"s": func(a, b any) bool {
			if a == nil || b == nil {
				return a == nil && b != nil
			}
			return a.(string) < b.(string)
		},
		"n": func(a, b any) bool { return a.(int64) < b.(int64) },
	}
	for _, tb := range []*Table{str, num} {
		for _, q := range []Query{
			{},
			{From: t0.Add(20 * time.Hour), To: t0.Add(50 * time.Hour)},
			{Where: []Predicate{{Column: "n", Op: Ge, Value: int64(1000)}}},
			{Limit: 500},
		} {
			name := fmt.Sprintf("%s/%+v", tb.Name(), q)
			plain := collect(t, tb, q)
			q.ByKey = true
			sorted := collect(t, tb, q)
			if q.Limit == 0 && !sameRows(plain, sorted) {
				t.Errorf("%s: ByKey returned %d rows, without it %d: not the same rows", name, len(sorted), len(plain))
			}
			if q.Limit != 0 && len(sorted) != q.Limit {
				t.Errorf("%s: %d rows, want the limit %d", name, len(sorted), q.Limit)
			}
			if !sort.SliceIsSorted(sorted, func(i, j int) bool { return less[tb.Name()](sorted[i]["k"], sorted[j]["k"]) }) {
				t.Errorf("%s: rows not in key order", name)
			}
			if sort.SliceIsSorted(plain, func(i, j int) bool { return less[tb.Name()](plain[i]["k"], plain[j]["k"]) }) {
				t.Errorf("%s: even the unordered query came out sorted: the test cannot tell", name)
			}
		}
	}
	// The compaction's read: ByKey under a sequence bound sees only the
	// blocks below it.
	if err := num.Append(ctx, []Row{{"k": int64(-1000), "ts": t0, "n": int64(-1)}}); err != nil {
		t.Fatal(err)
	}
	var got []int64
	err = num.QueryValuesBelow(ctx, Query{ByKey: true, Columns: []string{"k", "n"}}, high+1, func(_ []Column, vals []any) error {
		got = append(got, vals[0].(int64))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rowsN) || !slices.IsSorted(got) || slices.Contains(got, -1000) {
		t.Errorf("below the bound: %d rows (want %d), sorted %v, late row included %v", len(got), len(rowsN), slices.IsSorted(got), slices.Contains(got, -1000))
	}
}

func sameRows(a, b []Row) bool {
	key := func(r Row) string { return fmt.Sprint(r["n"], r["k"], r["ts"]) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = key(a[i])
	}
	for i := range b {
		kb[i] = key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}
