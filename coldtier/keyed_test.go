package coldtier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// A keyed table (primary key n) with a continuous cold tier: the store's
// upserts and deletes reach the Iceberg table in each run's commit, and
// sluice's two-tier query, pyiceberg and DuckDB's iceberg_scan read one
// row per key, the latest, and no deleted key.

// keyedChildEnv makes the test binary a child that opens the keyed table
// in the directory it names and runs one continuous compaction, configured
// as childEnv's child (childConfigEnv; remove when keyedChildRemoveEnv is
// set); the parent kills it at coldtier.FaultEnv's step (killAt, with this
// variable set beside childEnv).
const (
	keyedChildEnv       = "SLUICE_COLDTIER_KEYED_CHILD"
	keyedChildRemoveEnv = "SLUICE_COLDTIER_KEYED_CHILD_REMOVE"
)

func runKeyedChild(dir string) int {
	var cfg coldtier.Config
	if err := json.Unmarshal([]byte(os.Getenv(childConfigEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	tb, err := st.Table(keyedTableConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts := coldtier.Options{Continuous: true, Remove: os.Getenv(keyedChildRemoveEnv) != ""}
	if _, err := c.Compact(ctx, time.Now(), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintln(os.Stderr, "child: compaction done")
	return 0
}

var keyedTableConfig = table.Config{Name: "events", HashBy: "user", SortBy: "ts", Columns: staticSchema, PrimaryKey: []string{"n"}}

func openKeyedTable(t testing.TB, dir string) (*table.Store, *table.Table) {
	t.Helper()
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := st.Table(keyedTableConfig)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return st, tb
}

// keyState is the state a keyed table must hold: each live key's note.
type keyState map[int64]string

func (m keyState) clone() keyState {
	out := keyState{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// upsert appends rows for keys ns with note (each row's day depends on the
// note too, so a new version may land in another day partition) and
// records them in m. With src, the rows are one stream batch of a source
// partition, at the offsets from *src on (as a Kafka consumer stores
// them).
func (m keyState) upsert(t testing.TB, tb *table.Table, ns []int64, note string, src ...*int64) {
	t.Helper()
	rows := make([]table.Row, 0, len(ns))
	for _, n := range ns {
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", n%7), "ts": day0.Add(time.Duration((n+int64(len(note)))%3) * 24 * time.Hour),
			"n": n, "note": note})
		m[n] = note
	}
	appendFrom(t, tb, rows, src)
}

// remove appends deletes of keys ns and records them in m (src as for
// upsert).
func (m keyState) remove(t testing.TB, tb *table.Table, ns []int64, src ...*int64) {
	t.Helper()
	rows := make([]table.Row, 0, len(ns))
	for _, n := range ns {
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", n%7), "ts": day0, "n": n, table.OperationColumn: table.OperationDelete})
		delete(m, n)
	}
	appendFrom(t, tb, rows, src)
}

// appendFrom appends rows, as a stream batch from offset *src[0] on when
// src is given.
func appendFrom(t testing.TB, tb *table.Table, rows []table.Row, src []*int64) {
	t.Helper()
	if len(src) > 0 {
		first := *src[0]
		batch := fmt.Sprintf("kafka/events/0/id@%d-%d", first, first+int64(len(rows)))
		for i, r := range rows {
			r[table.SourceBatchColumn], r[table.SourceOffsetColumn] = batch, first+int64(i)
		}
		*src[0] += int64(len(rows))
	}
	if err := tb.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

func span(from, to int64) []int64 {
	var ns []int64
	for n := from; n < to; n++ {
		ns = append(ns, n)
	}
	return ns
}

// diffState says how got differs from want (keys twice are counted by the
// caller): the first few keys missing, extra, or with another note.
func diffState(got, want keyState) string {
	var missing, extra, stale []int64
	for n, note := range want {
		g, ok := got[n]
		switch {
		case !ok:
			missing = append(missing, n)
		case g != note:
			stale = append(stale, n)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			extra = append(extra, n)
		}
	}
	if len(missing)+len(extra)+len(stale) == 0 {
		return ""
	}
	for _, s := range [][]int64{missing, extra, stale} {
		slices.Sort(s)
	}
	first := func(s []int64) []int64 { return s[:min(len(s), 6)] }
	return fmt.Sprintf("%d keys missing (first %v), %d keys that should be absent (deleted or never written; first %v), %d keys with an older note (first %v)",
		len(missing), first(missing), len(extra), first(extra), len(stale), first(stale))
}

// rowsState makes a state of (n, note) rows, reporting the keys read twice.
func rowsState(t testing.TB, who string, rows [][2]any) keyState {
	t.Helper()
	got := keyState{}
	var twice []int64
	for _, r := range rows {
		var n int64
		switch x := r[0].(type) {
		case int64:
			n = x
		case float64:
			n = int64(x)
		default:
			t.Fatalf("%s: key %v (%T)", who, r[0], r[0])
		}
		note, _ := r[1].(string)
		if _, ok := got[n]; ok {
			twice = append(twice, n)
		}
		got[n] = note
	}
	if len(twice) > 0 {
		slices.Sort(twice)
		t.Errorf("%s: %d keys read more than once (first %v)", who, len(twice), twice[:min(len(twice), 6)])
	}
	return got
}

// sluiceState reads the table through sluice's two-tier query.
func sluiceState(t testing.TB, c *coldtier.Compactor, q table.Query) keyState {
	t.Helper()
	q.Columns = []string{"n", "note"}
	var rows [][2]any
	err := c.QueryValues(context.Background(), q, true, func(_ []table.Column, vals []any) error {
		rows = append(rows, [2]any{vals[0], vals[1]})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rowsState(t, "sluice's query", rows)
}

func checkSluice(t testing.TB, c *coldtier.Compactor, when string, want keyState) {
	t.Helper()
	if d := diffState(sluiceState(t, c, table.Query{}), want); d != "" {
		t.Errorf("%s: sluice's query: %s", when, d)
	}
}

// checkEngines reads the Iceberg table with pyiceberg and DuckDB's
// iceberg_scan and compares each with want.
func checkEngines(t testing.TB, cfg coldtier.Config, when string, want keyState) {
	t.Helper()
	coldtest.Require(t, pyErr)
	script, err := os.ReadFile("testdata/keyed_readers.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := pyPool.Run(ctx, string(script), cfg.Catalog.URI, "sluice.events", s3.Endpoint, coldtest.AccessKey, coldtest.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		PyIceberg [][2]any `json:"pyiceberg"`
		DuckDB    struct {
			Available bool
			Why       string
			Rows      [][2]any
		} `json:"duckdb"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("keyed_readers.py output: %v: %.500s", err, out)
	}
	if d := diffState(rowsState(t, when+": pyiceberg", res.PyIceberg), want); d != "" {
		t.Errorf("%s: pyiceberg: %s", when, d)
	}
	if !res.DuckDB.Available {
		t.Logf("DuckDB iceberg_scan not run: %s", res.DuckDB.Why)
		return
	}
	if d := diffState(rowsState(t, when+": DuckDB", res.DuckDB.Rows), want); d != "" {
		t.Errorf("%s: DuckDB iceberg_scan: %s", when, d)
	}
}

// TestKeyedIcebergRuns: upserts and deletes over several continuous runs,
// with the store keeping the committed rows (remove false) and removing
// them (remove true). Before each run sluice's query returns the store's
// state (the Iceberg rows of the keys changed since the last run left
// out); after it, pyiceberg and DuckDB read that state too. Covered: keys
// updated, deleted, deleted and written again between two runs, deleted
// when the store no longer holds their row (remove), deleted twice, never
// written, and a run with deletes only. With source, every change is a
// stream batch of one source partition (rows with source positions: the
// runs commit claims of their offsets and the query's hot side filters by
// them).
func TestKeyedIcebergRuns(t *testing.T) {
	for _, mode := range []struct{ remove, source bool }{{false, false}, {true, false}, {true, true}} {
		remove := mode.remove
		t.Run(fmt.Sprintf("remove=%v/source=%v", remove, mode.source), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := testConfig(t, dir, fmt.Sprintf("keyed-runs-%v-%v", remove, mode.source))
			st, tb := openKeyedTable(t, dir)
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			c, err := coldtier.Open(ctx, cfg, tb)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			want := keyState{}
			var src []*int64
			if mode.source {
				src = []*int64{new(int64)}
			}
			run := func(step string, wantRows, wantDeleted int64) {
				t.Helper()
				checkSluice(t, c, step+", before its run", want)
				stats, err := c.Compact(ctx, time.Now(), coldtier.Options{Continuous: true, Remove: remove})
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if stats.Rows != wantRows || stats.Deleted != wantDeleted {
					t.Errorf("%s: the run wrote %d rows and deleted %d, want %d and %d", step, stats.Rows, stats.Deleted, wantRows, wantDeleted)
				}
				checkSluice(t, c, step+", after its run", want)
				checkEngines(t, cfg, step+", after its run", want)
			}

			want.upsert(t, tb, span(0, 200), "v1", src...)
			run("200 new keys", 200, 0)

			want.upsert(t, tb, span(0, 50), "v2", src...)
			want.upsert(t, tb, span(0, 10), "v2b", src...) // superseded in the store before the run
			want.remove(t, tb, span(150, 200), src...)
			run("50 keys updated (10 twice), 50 deleted", 50, 100)

			want.remove(t, tb, span(0, 10), src...)
			want.upsert(t, tb, span(0, 5), "v3", src...) // deleted, then written again
			want.upsert(t, tb, []int64{300}, "v3", src...)
			want.remove(t, tb, []int64{150, 500}, src...) // deleted before; never written
			run("keys deleted and written again", 6, 10)

			want.remove(t, tb, span(50, 60), src...)
			run("deletes only", 0, 10)

			want.upsert(t, tb, []int64{60, 61}, "v4", src...)
			want.remove(t, tb, []int64{60}, src...)
			want.upsert(t, tb, []int64{61}, "v5", src...)
			run("a key written then deleted, another written twice", 1, 2)

			var left int
			if err := tb.DeletedKeys(ctx, 0, 0, func([]any, table.Position) error { left++; return nil }); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Errorf("the store's delete log holds %d records after every delete was committed", left)
			}
		})
	}
}

// TestKeyedQueryDuringChange forces the two moments a keyed table's
// two-tier query could show a key twice or a deleted key: an append that
// upserts and deletes keys of the Iceberg table lands between the query's
// read of the Iceberg table and its read of the store, and a commit of the
// store's changes lands there (both through the query's hook). The query
// answers the state before the append (the keys it leaves out of the
// Iceberg rows and the store's rows are read through one view) and the
// state before or after the commit, each key once.
func TestKeyedQueryDuringChange(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "keyed-query-during")
	st, tb := openKeyedTable(t, dir)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keep := coldtier.Options{Continuous: true}
	want := keyState{}
	want.upsert(t, tb, span(0, 100), "v1")
	if _, err := c.Compact(ctx, time.Now(), coldtier.Options{Remove: true}); err == nil {
		t.Error("a keyed table's time-mode run (by event time) was not refused")
	}
	if _, err := c.Compact(ctx, time.Now(), keep); err != nil {
		t.Fatal(err)
	}
	want.upsert(t, tb, span(0, 20), "v2") // in the store only
	want.remove(t, tb, span(90, 100))

	// An append between the two reads.
	before, after := want.clone(), want.clone()
	restore := coldtier.SetAfterColdRead(func() {
		after.upsert(t, tb, span(20, 30), "v3")
		after.remove(t, tb, span(30, 40))
	})
	if d := diffState(sluiceState(t, c, table.Query{}), before); d != "" {
		t.Errorf("an append between the query's reads: %s", d)
	}
	restore()
	checkSluice(t, c, "after that append", after)
	want = after

	// A commit between the two reads: it waits for the query.
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
	checkSluice(t, c, "a commit between the query's reads", want)
	if err := <-committed; err != nil {
		t.Fatalf("the commit during the query: %v", err)
	}
	checkSluice(t, c, "after that commit", want)
	checkEngines(t, cfg, "after that commit", want)
}

// TestKeyedKill9 kills a process in a keyed table's run (upserts, deletes
// and new keys since the last run) after its files are uploaded and before
// its commit, and after its commit before its local step, with the store
// keeping and removing committed rows: killed before, the Iceberg table
// still holds the last run's state; after, the new state. The restart and
// its next run leave the Iceberg table, sluice's query, pyiceberg and
// DuckDB with the store's final state, key by key, and the delete log
// empty.
func TestKeyedKill9(t *testing.T) {
	for _, remove := range []bool{false, true} {
		for _, step := range []string{"after-upload", "after-commit"} {
			t.Run(fmt.Sprintf("%s/remove=%v", step, remove), func(t *testing.T) {
				dir := t.TempDir()
				cfg := testConfig(t, dir, fmt.Sprintf("keyed-kill9-%s-%v", step, remove))
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				opts := coldtier.Options{Continuous: true, Remove: remove}
				st, tb := openKeyedTable(t, dir)
				c, err := coldtier.Open(ctx, cfg, tb)
				if err != nil {
					t.Fatal(err)
				}
				committed := keyState{}
				committed.upsert(t, tb, span(0, 300), "v1")
				if _, err := c.Compact(ctx, time.Now(), opts); err != nil {
					t.Fatal(err)
				}
				c.Close()
				final := committed.clone()
				final.upsert(t, tb, span(0, 100), "v2")
				final.remove(t, tb, span(200, 250))
				final.remove(t, tb, span(90, 100))
				final.upsert(t, tb, span(95, 100), "v3")
				final.upsert(t, tb, span(1000, 1050), "v2")
				st.Close()

				if remove {
					t.Setenv(keyedChildRemoveEnv, "1")
				}
				t.Setenv(keyedChildEnv, dir)
				killAt(t, dir, cfg, step)
				os.Unsetenv(keyedChildEnv)
				switch step {
				case "after-upload":
					checkEngines(t, cfg, "killed before the commit", committed)
				case "after-commit":
					checkEngines(t, cfg, "killed after the commit", final)
				}

				st, tb = openKeyedTable(t, dir)
				defer st.Close()
				c, err = coldtier.Open(ctx, cfg, tb) // the restart: recovery runs here
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				checkSluice(t, c, "after the restart", final)
				stats, err := c.Compact(ctx, time.Now(), opts)
				if err != nil {
					t.Fatal(err)
				}
				wantRows := map[string]int64{"after-upload": 145, "after-commit": 0}[step]
				if stats.Rows != wantRows {
					t.Errorf("the run after the restart committed %d rows, want %d", stats.Rows, wantRows)
				}
				checkSluice(t, c, "after the next run", final)
				checkEngines(t, cfg, "after the next run", final)
				var left int
				if err := tb.DeletedKeys(ctx, 0, 0, func([]any, table.Position) error { left++; return nil }); err != nil {
					t.Fatal(err)
				}
				if left != 0 {
					t.Errorf("the store's delete log holds %d records after the restart's run", left)
				}
			})
		}
	}
}

// TestKeyedLaterChangeCommittedFirst: two nodes hold changes of the same
// keys from one source partition (a rebalance moved it from node a to
// node b), and b commits its later changes before a commits its older
// ones. a's run must neither delete b's rows (the later changes) nor write
// its own (they would be a second, older row of each key): after both
// runs every engine reads b's rows, once each, and only an upsert after
// them replaces them.
func TestKeyedLaterChangeCommittedFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shared := testConfig(t, dir, "keyed-later-first")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var nodes [2]*coldtier.Compactor
	var tables [2]*table.Table
	for i, name := range []string{"a", "b"} {
		nodeDir := filepath.Join(dir, name)
		st, tb := openKeyedTable(t, nodeDir)
		defer st.Close()
		cfg := shared
		cfg.Node, cfg.StateDir = name, nodeDir
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		nodes[i], tables[i] = c, tb
	}
	older, later := keyState{}, keyState{}
	offA, offB := new(int64), new(int64)
	*offB = 100
	older.upsert(t, tables[0], span(0, 10), "older", offA)
	later.upsert(t, tables[1], span(0, 10), "later", offB)

	run := func(node int) coldtier.Stats {
		t.Helper()
		stats, err := nodes[node].Compact(ctx, time.Now(), coldtier.Options{Continuous: true})
		if err != nil {
			t.Fatalf("node %d: %v", node, err)
		}
		return stats
	}
	run(1)
	checkEngines(t, shared, "after b's run", later)
	if stats := run(0); stats.Rows != 0 || stats.Deleted != 0 {
		t.Errorf("a's run of changes older than the table's wrote %d rows and deleted %d, want none", stats.Rows, stats.Deleted)
	}
	checkEngines(t, shared, "after a's run of older changes", later)
	checkSluice(t, nodes[1], "b, after a's run", later)

	// A later change through a still replaces b's rows.
	*offA = 200
	later.upsert(t, tables[0], span(0, 3), "latest", offA)
	if stats := run(0); stats.Rows != 3 || stats.Deleted != 3 {
		t.Errorf("a's run of three later changes wrote %d rows and deleted %d, want 3 and 3", stats.Rows, stats.Deleted)
	}
	checkEngines(t, shared, "after a's run of later changes", later)
}
