package coldtier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// TestKeepQueryEachRowOnce: a continuous tier that keeps committed rows in
// its store (remove false) answers a two-tier query with every row once
// before a commit, after it, and when a commit lands between the query's
// read of the Iceberg table and its read of the store (forced there
// through the query's hook): the snapshot read and the committed-sequence
// mark the store's side leaves out rows by are one cut.
func TestKeepQueryEachRowOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "keep-query")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keep := coldtier.Options{Continuous: true}
	check := func(when string, want int) {
		t.Helper()
		seen := make([]int, want)
		err := c.QueryValues(ctx, table.Query{Columns: []string{"n"}}, true, func(_ []table.Column, vals []any) error {
			n, ok := vals[0].(int64)
			if !ok || n < 0 || int(n) >= want {
				return fmt.Errorf("row n=%v: not stored", vals[0])
			}
			seen[n]++
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		var missing, twice []int
		for n, k := range seen {
			switch {
			case k == 0:
				missing = append(missing, n)
			case k > 1:
				twice = append(twice, n)
			}
		}
		if len(missing) > 0 || len(twice) > 0 {
			t.Fatalf("%s: %d of %d rows missing (first %v), %d more than once (first %v)", when, len(missing), want, head(missing), len(twice), head(twice))
		}
	}

	fill(t, tb, 0, 1000, 2)
	check("before any commit", 1000)
	if st, err := c.Compact(ctx, time.Now(), keep); err != nil || st.Rows != 1000 {
		t.Fatalf("first commit: %d rows, %v", st.Rows, err)
	}
	check("after the first commit (every row in Iceberg and in the store)", 1000)
	fill(t, tb, 1000, 500, 2)
	check("with 500 rows not committed", 1500)

	// A commit of the 500 rows starts once the query has read the Iceberg
	// table; the query goes on to the store only when that commit is
	// staged and waits for the lock (or, without the lock, is done).
	committed := make(chan error, 1)
	staged := make(chan struct{}, 1)
	defer coldtier.SetRunStaged(func() { staged <- struct{}{} })()
	var fired bool
	defer coldtier.SetAfterColdRead(func() {
		if fired {
			return
		}
		fired = true
		go func() {
			_, err := c.Compact(ctx, time.Now(), keep)
			committed <- err
		}()
		select {
		case <-staged:
		case <-ctx.Done():
			t.Error("the commit never staged its files")
			return
		}
		for !coldtier.CommitWaiting(c) {
			select {
			case err := <-committed:
				committed <- err
				return
			case <-ctx.Done():
				t.Error("the commit never reached the lock")
				return
			case <-time.After(time.Millisecond):
			}
		}
		// The commit waits for the lock, or holds it if the query does
		// not: give an unguarded commit the time to land.
		select {
		case err := <-committed:
			committed <- err
		case <-time.After(300 * time.Millisecond):
		}
	})()
	check("during a commit", 1500)
	if err := <-committed; err != nil {
		t.Fatalf("the commit during the query: %v", err)
	}
	check("after the second commit", 1500)
}

func head(s []int) []int { return s[:min(len(s), 5)] }
