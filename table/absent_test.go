package table

import (
	"context"
	"errors"
	"testing"
)

// TestWithAbsent: columns the store lacks are answered as null in the
// query's order; a predicate on one keeps every row with IS NULL and none
// with any other operator; a column the whole schema lacks is an
// ErrUnknownColumn naming it.
func TestWithAbsent(t *testing.T) {
	tb, src := queryFixture(t)
	ctx := context.Background()
	other := func(name string) (Type, bool) { return Int64, name == "id" }
	count := func(q Query) (int, []Column) {
		t.Helper()
		a, err := tb.WithAbsent(q, other)
		if err != nil {
			t.Fatal(err)
		}
		if a == nil {
			t.Fatalf("%+v: no absent column found", q)
		}
		if a.None {
			return 0, a.Out
		}
		n := 0
		var row []any
		err = tb.QueryValues(ctx, a.Query, func(_ []Column, vals []any) error {
			row = a.Row(row, vals)
			if len(row) != len(a.Out) {
				t.Fatalf("row of %d values for %d columns", len(row), len(a.Out))
			}
			for i, c := range a.Out {
				if (c.Name == "id" || c.Name == "id.x") && row[i] != nil {
					t.Fatalf("id = %v, want null", row[i])
				}
				if c.Name == "i" && row[i] == nil {
					t.Fatal("i is null")
				}
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, a.Out
	}
	n, out := count(Query{Columns: []string{"i", "id"}})
	if n != len(src) || len(out) != 2 || out[0].Name != "i" || out[1].Name != "id" || out[1].Type != Int64 {
		t.Errorf("columns i,id: %d rows of %d, columns %v", n, len(src), out)
	}
	if n, out := count(Query{Columns: []string{"id"}}); n != len(src) || len(out) != 1 {
		t.Errorf("columns id alone: %d rows of %d, columns %v", n, len(src), out)
	}
	if n, _ := count(Query{Columns: []string{"i"}, Where: []Predicate{{Column: "id", Op: IsNull}}}); n != len(src) {
		t.Errorf("where id is null: %d rows, want every one (%d)", n, len(src))
	}
	for _, op := range []Op{NotNull, Eq, Ge} {
		if n, _ := count(Query{Columns: []string{"i"}, Where: []Predicate{{Column: "id", Op: op, Value: int64(1)}}}); n != 0 {
			t.Errorf("where id %v: %d rows, want none (a null matches only IS NULL)", op, n)
		}
	}
	// A path into an absent column is absent too: null, of type json.
	paths := map[string]ColumnPath{"id.x": {Column: "id", Path: ".x"}}
	if n, out := count(Query{Columns: []string{"i", "id.x"}, Paths: paths}); n != len(src) || len(out) != 2 || out[1].Name != "id.x" || out[1].Type != JSON {
		t.Errorf("columns i,id.x: %d rows of %d, columns %v", n, len(src), out)
	}
	if a, err := tb.WithAbsent(Query{Columns: []string{"i"}}, other); a != nil || err != nil {
		t.Errorf("no absent column: %v, %v; want nil, nil", a, err)
	}
	if _, err := tb.WithAbsent(Query{Columns: []string{"i", "nosuch"}}, other); !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("a column no one has: %v, want ErrUnknownColumn", err)
	}
}
