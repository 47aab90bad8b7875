package coldtier_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// Two nodes of one keyed table sharing one Iceberg table: each has its own
// store and compactor, as the nodes of a cluster do. A key whose source
// partition moved from one node to the other (a rebalance) has changes in
// both stores, and the nodes commit them in either order.

// keyedPair opens nodes a and b of the keyed table on one catalog and
// warehouse (prefix names them in the bucket).
func keyedPair(t *testing.T, ctx context.Context, prefix string) (shared coldtier.Config, nodes [2]*coldtier.Compactor, tables [2]*table.Table) {
	t.Helper()
	dir := t.TempDir()
	shared = testConfig(t, dir, prefix)
	for i, name := range []string{"a", "b"} {
		nodeDir := filepath.Join(dir, name)
		st, tb := openKeyedTable(t, nodeDir)
		t.Cleanup(func() { st.Close() })
		cfg := shared
		cfg.Node, cfg.StateDir = name, nodeDir
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		nodes[i], tables[i] = c, tb
	}
	return shared, nodes, tables
}

// runNode runs one continuous compaction of node i.
func runNode(t *testing.T, ctx context.Context, nodes [2]*coldtier.Compactor, i int) coldtier.Stats {
	t.Helper()
	stats, err := nodes[i].Compact(ctx, time.Now(), coldtier.Options{Continuous: true})
	if err != nil {
		t.Fatalf("node %d's run: %v", i, err)
	}
	return stats
}

// TestKeyedQueryOtherNodeCommittedLater: node a's store holds changes of
// keys not committed yet, and node b, which took the keys' source partition
// over, commits later changes of them first. Until a's next run, a's
// two-tier query must answer b's rows, once each, for every kind of
// change a holds: an older upsert (keys 0-9), the very messages b
// committed (keys 10-19: a stored them too, and the claims leave a's copy
// out), and an older delete (keys 20-24). A query that takes every key its
// store changed for the key's state answers a's older rows, and misses the
// other keys: the Iceberg rows left out, and a's copies or deletes with
// them. This is the moment between two nodes' commits at which a cluster
// query through a once left a live key out.
func TestKeyedQueryOtherNodeCommittedLater(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shared, nodes, tables := keyedPair(t, ctx, "keyed-query-other-later")
	older, want := keyState{}, keyState{}
	offA, offB := new(int64), new(int64)

	// a, before the rebalance: offsets 0-9, 20-24, 50-59, then the deletes.
	older.upsert(t, tables[0], span(0, 10), "older", offA)
	*offA = 20
	older.upsert(t, tables[0], span(20, 25), "older", offA)
	*offA = 50
	older.upsert(t, tables[0], span(10, 20), "same", offA)
	older.remove(t, tables[0], span(20, 25), offA)
	// b, after it: from offset 50 again (a's last stored messages were
	// never acknowledged), then later changes of keys 0-9 and 20-24.
	*offB = 50
	want.upsert(t, tables[1], span(10, 20), "same", offB)
	*offB = 100
	want.upsert(t, tables[1], span(0, 10), "later", offB)
	want.upsert(t, tables[1], span(20, 25), "later", offB)
	if stats := runNode(t, ctx, nodes, 1); stats.Rows != 25 {
		t.Fatalf("b's run wrote %d rows, want 25", stats.Rows)
	}

	checkSluice(t, nodes[0], "a, between b's commit and its own", want)
	checkSluice(t, nodes[1], "b, after its commit", want)
	if got := len(sluiceState(t, nodes[0], table.Query{Limit: 7})); got != 7 {
		t.Errorf("a's query with limit 7: %d keys", got)
	}
	// A filter that a's older rows match and b's later ones do not: the
	// later Iceberg rows are weighed even though the query does not read
	// them.
	older10 := table.Query{Where: []table.Predicate{{Column: "note", Op: table.Eq, Value: "older"}}}
	if d := diffState(sluiceState(t, nodes[0], older10), keyState{}); d != "" {
		t.Errorf("a's query of the rows with note older: %s", d)
	}
	laterOnly := keyState{}
	for n, note := range want {
		if note == "later" {
			laterOnly[n] = note
		}
	}
	later := table.Query{Where: []table.Predicate{{Column: "note", Op: table.Eq, Value: "later"}}}
	if d := diffState(sluiceState(t, nodes[0], later), laterOnly); d != "" {
		t.Errorf("a's query of the rows with note later: %s", d)
	}

	// a's run: its older upserts, b's messages and its older deletes all
	// leave b's rows where they are.
	if stats := runNode(t, ctx, nodes, 0); stats.Rows != 0 || stats.Deleted != 0 {
		t.Errorf("a's run of changes older than the table's wrote %d rows and deleted %d, want none", stats.Rows, stats.Deleted)
	}
	checkSluice(t, nodes[0], "a, after its run", want)
	checkSluice(t, nodes[1], "b, after a's run", want)
	checkEngines(t, shared, "after both runs", want)
}

// TestKeyedDeleteOlderThanCommittedUpsert: node a deleted keys (at offsets
// of their source partition), node b took the partition over and upserted
// the keys again at later offsets, and b commits first. a's run of the
// deletes must not delete b's rows: every engine still reads them. A
// delete of a's at a later offset than the table's row still deletes it,
// and so does one without a position (an HTTP delete), both of a key
// whose only change had none and of a key whose delete keeps the position
// of the table's row (the upsert it followed).
func TestKeyedDeleteOlderThanCommittedUpsert(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shared, nodes, tables := keyedPair(t, ctx, "keyed-delete-older")
	want := keyState{}
	offA, offB := new(int64), new(int64)

	// The keys' first rows, committed by a.
	want.upsert(t, tables[0], span(0, 20), "first", offA)
	want.upsert(t, tables[0], span(100, 105), "http")
	runNode(t, ctx, nodes, 0)
	// a deletes keys 0-9 at offsets 20-29 and does not commit yet; b,
	// after the rebalance, upserts them at 40-49 and commits.
	gone := keyState{}
	gone.remove(t, tables[0], span(0, 10), offA)
	*offB = 40
	want.upsert(t, tables[1], span(0, 10), "later", offB)
	runNode(t, ctx, nodes, 1)
	checkEngines(t, shared, "after b's run", want)

	// a deletes keys 10-14 (after its own committed rows of them), and
	// over HTTP keys 100-101 and key 15, whose delete keeps the position
	// of the upsert it follows (offset 15, the table's row of it).
	*offA = 60
	want.remove(t, tables[0], span(10, 15), offA)
	want.remove(t, tables[0], []int64{100, 101, 15})
	checkSluice(t, nodes[0], "a, before its run", want)
	if stats := runNode(t, ctx, nodes, 0); stats.Rows != 0 || stats.Deleted != 8 {
		t.Errorf("a's run wrote %d rows and deleted %d, want 0 and 8: b's 10 later rows stay, 5 positioned and 3 HTTP deletes apply",
			stats.Rows, stats.Deleted)
	}
	checkSluice(t, nodes[0], "a, after its run", want)
	checkSluice(t, nodes[1], "b, after a's run", want)
	checkEngines(t, shared, "after a's run of older and later deletes", want)
}
