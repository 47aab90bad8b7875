package coldtier_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// TestNestedColumnsColdRead: path columns answer the same values from the
// Iceberg table (the cold read of Parquet pages) as from the store, in one
// two-tier query: the first 200 rows committed and removed from the store,
// the last 100 only in it.
func TestNestedColumnsColdRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "nested-columns")
	st, tb := openTable(t, dir, nestedSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, made := nestedRows(300)
	if err := tb.Append(ctx, rows[:200]); err != nil {
		t.Fatal(err)
	}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, rows[200:]); err != nil {
		t.Fatal(err)
	}
	q := table.Query{
		Columns: []string{"n", "doc.address.city", "sku", "doc.tags.color", "qty", "items"},
		Paths: map[string]table.ColumnPath{
			"doc.address.city": {Column: "doc", Path: ".address.city"}, "sku": {Column: "doc", Path: ".items[0].sku"},
			"doc.tags.color": {Column: "doc", Path: `["tags"].color`}, "qty": {Column: "doc", Path: ".items[0].qty"},
			"items": {Column: "doc", Path: ".items"},
		},
	}
	str := func(v any) *string {
		if s, ok := v.(string); ok {
			return &s
		}
		return nil
	}
	var got []table.Row
	err = c.QueryValues(ctx, q, true, func(cols []table.Column, vals []any) error {
		if cols[1].Name != "doc.address.city" || cols[1].Type != table.JSON {
			t.Fatalf("column 1: %+v", cols[1])
		}
		r := table.Row{}
		for i, col := range cols {
			r[col.Name] = vals[i]
			if raw, ok := vals[i].(json.RawMessage); ok {
				r[col.Name] = string(raw) // the row's bytes may be reused
			}
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(made) {
		t.Fatalf("%d rows, want %d", len(got), len(made))
	}
	slices.SortFunc(got, func(a, b table.Row) int { return int(a["n"].(int64) - b["n"].(int64)) })
	for i, r := range got {
		f := made[i]
		same := func(p, q *string) bool { return (p == nil) == (q == nil) && (p == nil || *p == *q) }
		if r["n"] != f.N || !same(str(r["doc.address.city"]), f.City) || !same(str(r["sku"]), f.SKU) || !same(str(r["doc.tags.color"]), f.Color) {
			t.Errorf("n=%d: %v, want %s", f.N, r, fieldsText([]nestedFields{f}))
			continue
		}
		if f.SKU != nil && r["qty"] != json.Number([]string{"0", "1", "2", "3"}[f.N%4]) {
			t.Errorf("n=%d: qty %T %v, want the number %d", f.N, r["qty"], r["qty"], f.N%4)
		}
		if items, ok := r["items"].(string); f.City != nil && (!ok || !json.Valid([]byte(items))) {
			t.Errorf("n=%d: items %v, want the array's JSON text", f.N, r["items"])
		}
	}
	var left int
	if err := tb.QueryValues(ctx, table.Query{}, func([]table.Column, []any) error { left++; return nil }); err != nil || left != 100 {
		t.Fatalf("%d rows in the store (%v), want the 100 appended after the run", left, err)
	}
}
