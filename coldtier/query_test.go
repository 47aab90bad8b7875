package coldtier_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// TestQuerySpansBothTiers asks the same queries before a compaction (all
// rows hot) and after it (three days in the Iceberg table, the fourth
// still hot): the answers are the same rows, values and columns (time at
// the cold tier's microseconds), with no row twice at the boundary.
func TestQuerySpansBothTiers(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "query")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	fill(t, tb, 0, 4000, 4) // days 0-3
	ctx := context.Background()
	queries := map[string]table.Query{
		"all":        {},
		"boundary":   {From: day0.Add(60 * time.Hour), To: day0.Add(80 * time.Hour)},
		"hash":       {HashIn: []any{"u3", "u5"}, From: day0.Add(24 * time.Hour)},
		"where":      {Where: []table.Predicate{{Column: "n", Op: table.Ge, Value: "100"}, {Column: "ok", Op: table.Eq, Value: true}}},
		"in":         {Where: []table.Predicate{{Column: "user", Op: table.In, Values: []any{"u1", "u2"}}, {Column: "f", Op: table.Lt, Value: 500.5}}},
		"null":       {Where: []table.Predicate{{Column: "note", Op: table.IsNull}}},
		"projection": {Columns: []string{"n", "ts"}, To: day0.Add(50 * time.Hour)},
		"time-pred":  {Where: []table.Predicate{{Column: "ts", Op: table.Lt, Value: "2024-05-02T12:00:00Z"}}},
	}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[string][]map[string]any{}
	for name, q := range queries {
		want[name] = tieredRows(t, c, q)
	}
	stats, err := c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Rows != 3000 {
		t.Fatalf("compacted %d rows, want 3000", stats.Rows)
	}
	for name, q := range queries {
		got := tieredRows(t, c, q)
		if len(want[name]) == 0 {
			t.Fatalf("%s: the query matches nothing; a useless case", name)
		}
		if !reflect.DeepEqual(got, want[name]) {
			t.Errorf("%s: %d rows after compaction, %d before; first %v, want %v", name, len(got), len(want[name]), first(got), first(want[name]))
		}
	}
	// Limit counts rows over both tiers.
	q := table.Query{Limit: 3500}
	if n := len(tieredRows(t, c, q)); n != 3500 {
		t.Errorf("limit 3500 over both tiers: %d rows", n)
	}
}

func tieredRows(t *testing.T, c *coldtier.Compactor, q table.Query) []map[string]any {
	t.Helper()
	var out []map[string]any
	err := c.QueryValues(context.Background(), q, true, func(cols []table.Column, vals []any) error {
		m := map[string]any{}
		for i, v := range vals {
			switch x := v.(type) {
			case time.Time:
				v = x.UnixMicro()
			case json.RawMessage:
				v = string(x)
			}
			m[cols[i].Name] = v
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 0 && out[0]["n"] == nil {
		return out
	}
	return canon(t, out)
}
