package coldread_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/coldread"
	"github.com/sluicedb/sluice/table"
)

// TestColdReadDeleteCache deletes rows of a compacted table in two
// commits (n ending in 3, then n ending in 7), so each data file is
// covered by two position delete files of different commits, and reads
// it: the first query decodes the delete files, the next takes every one
// from the cache, and both return what a query without the cache and
// iceberg-go's Arrow path return, no deleted row among them. Then four
// queries at once with a cache that holds one delete file (evicting as
// they go): the same rows each.
func TestColdReadDeleteCache(t *testing.T) {
	defer coldread.SwapDeleteCache(coldread.DeleteCacheBytes)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	_, tb := openReadTable(t, dir, []table.Column{
		{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
	})
	const rows = 3000
	var batch []table.Row
	for i := range rows {
		batch = append(batch, table.Row{"user": fmt.Sprintf("u%d", i%4), "ts": readDay0.Add(time.Duration(i%2)*24*time.Hour + time.Duration(i)*time.Second), "n": int64(i)})
	}
	if err := tb.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	c := localCompactor(t, dir, tb, 100)
	if _, err := c.Compact(ctx, readDay0.Add(48*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	gone := func(n int64) bool { return n%10 == 3 || n%10 == 7 }
	for _, last := range []int64{3, 7} {
		tbl, err := c.cat.LoadTable(ctx, c.Identifier())
		if err != nil {
			t.Fatal(err)
		}
		var del []int64
		for n := range int64(rows) {
			if n%10 == last {
				del = append(del, n)
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
	var want []int64
	for n := range int64(rows) {
		if !gone(n) {
			want = append(want, n)
		}
	}
	cols, err := c.t.Columns(table.Query{})
	if err != nil {
		t.Fatal(err)
	}
	nAt := slices.IndexFunc(cols, func(c table.Column) bool { return c.Name == "n" })
	read := func(arrow bool) ([]int64, coldread.Stats, error) {
		if arrow {
			*coldread.ForceArrow = true
			defer func() { *coldread.ForceArrow = false }()
		}
		var ns []int64
		_, st, err := c.scan(ctx, table.Query{}, cols, func(_ []table.Column, vals []any) error {
			ns = append(ns, vals[nAt].(int64))
			return nil
		})
		slices.Sort(ns)
		return ns, st, err
	}
	check := func(what string, arrow bool) coldread.Stats {
		t.Helper()
		got, st, err := read(arrow)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(got, want) {
			if i := slices.IndexFunc(got, gone); i >= 0 {
				t.Errorf("%s: the deleted row n=%d is read (%d rows, want %d; %+v)", what, got[i], len(got), len(want), st)
			} else {
				t.Errorf("%s: %d rows, want %d (%+v)", what, len(got), len(want), st)
			}
		}
		return st
	}

	first := check("first query", false)
	if first.DeleteFiles < 2 || first.DeleteFilesCached != 0 {
		t.Errorf("first query: %+v: want the two commits' delete files decoded, none from the cache", first)
	}
	again := check("second query", false)
	if again.DeleteFiles != first.DeleteFiles || again.DeleteFilesCached != again.DeleteFiles {
		t.Errorf("second query: %+v: want its %d delete files from the cache", again, first.DeleteFiles)
	}
	check("the Arrow path", true)
	restore := coldread.SwapDeleteCache(0)
	for i := range 2 {
		if st := check(fmt.Sprintf("no cache, query %d", i), false); st.DeleteFilesCached != 0 {
			t.Errorf("no cache: %+v: delete files from a cache that keeps nothing", st)
		}
	}
	restore()

	// Room for about one delete file: concurrent queries evict each
	// other's entries while they read them.
	defer coldread.SwapDeleteCache(16 << 10)()
	var wg sync.WaitGroup
	for q := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				got, st, err := read(false)
				if err != nil {
					t.Errorf("concurrent query %d: %v", q, err)
					return
				}
				if !slices.Equal(got, want) {
					t.Errorf("concurrent query %d: %d rows, want %d (%+v)", q, len(got), len(want), st)
					return
				}
			}
		}()
	}
	wg.Wait()
}
