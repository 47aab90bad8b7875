package coldread_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/coldread"
	"github.com/sluicedb/sluice/table"
)

// TestColdReadPlanFromCache writes a table in three runs over two day
// partitions with position deletes committed between them (so a delete
// file applies to the data files written before it and not to those
// written after), and plans it from the cached manifests: for every
// query shape (all, a day, a hash value, both) the plan names the same
// data files as iceberg-go's, each with the same delete files. The first
// query decodes the manifests, the next takes every one from the cache,
// and both read the rows that were not deleted. A cache smaller than the
// table's manifests never holds more than its bound, and the rows stay
// right as it evicts.
//
// Not parallel: it swaps the package's caches, as the other tests here
// that do.
func TestColdReadPlanFromCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	_, tb := openReadTable(t, dir, []table.Column{
		{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
	})
	c := localCompactor(t, dir, tb, 0)
	gone := map[int64]bool{}
	next := int64(0)
	appendRun := func(rows int) {
		t.Helper()
		var batch []table.Row
		for range rows {
			n := next
			next++
			batch = append(batch, table.Row{"user": fmt.Sprintf("u%d", n%4), "ts": readDay0.Add(time.Duration(n%2)*24*time.Hour + time.Duration(n)*time.Second), "n": n})
		}
		if err := tb.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compact(ctx, readDay0.Add(72*time.Hour), coldtier.Options{Remove: true}); err != nil {
			t.Fatal(err)
		}
	}
	deleteEnding := func(last int64) {
		t.Helper()
		tbl, err := c.cat.LoadTable(ctx, c.Identifier())
		if err != nil {
			t.Fatal(err)
		}
		var del []int64
		for n := range next {
			if n%10 == last {
				del = append(del, n)
				gone[n] = true
			}
		}
		tx := tbl.NewTransaction()
		if err := tx.SetProperties(iceberg.Properties{itable.WriteDeleteModeKey: itable.WriteModeMergeOnRead}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Delete(ctx, iceberg.IsIn(iceberg.Reference("n"), del...), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendRun(1000)
	deleteEnding(3)
	appendRun(400)
	deleteEnding(7)
	appendRun(200) // after both deletes: neither applies to its files

	tbl, err := c.cat.LoadTable(ctx, c.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string]table.Query{
		"all":      {},
		"day 1":    {From: readDay0.Add(24 * time.Hour), To: readDay0.Add(48 * time.Hour)},
		"u1":       {HashIn: []any{"u1"}},
		"u2, day0": {HashIn: []any{"u2"}, From: readDay0, To: readDay0.Add(24 * time.Hour)},
		"no user":  {HashIn: []any{"nobody"}},
	}
	for name, q := range queries {
		ours, theirs, planned, err := coldread.Plans(ctx, tbl, tb, q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !planned {
			t.Fatalf("%s: the snapshot was left to iceberg-go's planning", name)
		}
		if !maps.EqualFunc(ours, theirs, slices.Equal) {
			for path, dels := range theirs {
				if got, ok := ours[path]; !ok || !slices.Equal(got, dels) {
					t.Errorf("%s: data file %s: delete files %v, iceberg-go's %v (planned: %v)", name, path, got, dels, ok)
				}
			}
			for path := range ours {
				if _, ok := theirs[path]; !ok {
					t.Errorf("%s: data file %s planned, not in iceberg-go's plan", name, path)
				}
			}
		}
	}
	withDeletes := 0
	ours, _, _, _ := coldread.Plans(ctx, tbl, tb, table.Query{})
	for _, dels := range ours {
		if len(dels) > 0 {
			withDeletes++
		}
	}
	if withDeletes == 0 || withDeletes == len(ours) {
		t.Fatalf("%d of %d data files have delete files: want some with and some without", withDeletes, len(ours))
	}

	cols, err := c.t.Columns(table.Query{})
	if err != nil {
		t.Fatal(err)
	}
	nAt := slices.IndexFunc(cols, func(c table.Column) bool { return c.Name == "n" })
	var want []int64
	for n := range next {
		if !gone[n] {
			want = append(want, n)
		}
	}
	read := func(what string) coldread.Stats {
		t.Helper()
		var ns []int64
		_, st, err := c.scan(ctx, table.Query{}, cols, func(_ []table.Column, vals []any) error {
			ns = append(ns, vals[nAt].(int64))
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		slices.Sort(ns)
		if !slices.Equal(ns, want) {
			t.Fatalf("%s: %d rows, want %d (%+v)", what, len(ns), len(want), st)
		}
		return st
	}
	// The package's other tests share the process's caches: this part
	// has its own.
	restore := coldread.SwapManifestCache(coldread.ManifestCacheBytes)
	first := read("first query")
	again := read("second query")
	restore()
	if first.Manifests < 5 || first.ManifestsCached != 0 {
		t.Errorf("first query: %+v: want the snapshot's manifests decoded, none from the cache", first)
	}
	if again.Manifests != first.Manifests || again.ManifestsCached != again.Manifests {
		t.Errorf("second query: %+v: want its %d manifests from the cache", again, first.Manifests)
	}

	// Room for about two manifests.
	const bound = 12 << 10
	defer coldread.SwapManifestCache(bound)()
	for i := range 3 {
		st := read(fmt.Sprintf("small cache, query %d", i))
		used, entries := coldread.ManifestCacheState()
		if used > bound || entries >= st.Manifests {
			t.Fatalf("small cache, query %d: %d bytes in %d entries held (bound %d, %d manifests)", i, used, entries, bound, st.Manifests)
		}
	}
}
