package table

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func keyedTable(t testing.TB, s *Store, cfg Config) *Table {
	t.Helper()
	if cfg.Name == "" {
		cfg = Config{Name: "state", HashBy: "dev", SortBy: "ts", PrimaryKey: []string{"id"}}
	}
	tb, err := s.Table(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// state returns the table's rows by id (the test's key), failing on a key
// that comes out twice.
func state(t testing.TB, tb *Table) map[string]Row {
	t.Helper()
	out := map[string]Row{}
	for _, r := range collect(t, tb, Query{}) {
		id := fmt.Sprint(r["id"])
		if _, ok := out[id]; ok {
			t.Fatalf("key %s returned twice: %v and %v", id, out[id], r)
		}
		out[id] = r
	}
	return out
}

func appendRows(t testing.TB, tb *Table, rows ...Row) {
	t.Helper()
	if err := tb.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

func up(id string, v int64) Row {
	return Row{"id": id, "dev": "d" + id, "v": v, "ts": t0.Add(time.Duration(v) * time.Minute)}
}

func del(id string) Row { return Row{"id": id, OperationColumn: OperationDelete} }

// at is row r from source partition part at offset off.
func at(r Row, part string, off int64) Row {
	r[SourceBatchColumn] = fmt.Sprintf("%s@%d-%d", part, off, off+1)
	r[SourceOffsetColumn] = off
	return r
}

func wantState(t testing.TB, tb *Table, want map[string]int64) {
	t.Helper()
	got := state(t, tb)
	for id, v := range want {
		r, ok := got[id]
		if !ok {
			t.Errorf("key %s: absent, want v=%d", id, v)
			continue
		}
		if r["v"] != v {
			t.Errorf("key %s: v=%v, want %d", id, r["v"], v)
		}
		lr, ok, err := tb.Lookup(context.Background(), []any{id})
		if err != nil || !ok || lr["v"] != v {
			t.Errorf("Lookup(%s) = %v, %v, %v; want v=%d", id, lr, ok, err, v)
		}
	}
	for id, r := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("key %s present (%v), want absent", id, r)
			if _, ok, err := tb.Lookup(context.Background(), []any{id}); ok || err != nil {
				t.Errorf("Lookup(%s) = %v, %v", id, ok, err)
			}
		}
	}
}

func TestKeyedUpsertDelete(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	appendRows(t, tb, up("a", 1), up("b", 1), up("c", 1))
	wantState(t, tb, map[string]int64{"a": 1, "b": 1, "c": 1})
	// An update in another block (another time bucket and partition), a
	// delete, and several rows of one key in one append: the last wins.
	appendRows(t, tb, up("a", 200), del("b"), up("c", 2), up("c", 3), up("d", 1), del("d"))
	wantState(t, tb, map[string]int64{"a": 200, "c": 3})
	// A deleted key comes back with a later upsert.
	appendRows(t, tb, up("b", 5))
	wantState(t, tb, map[string]int64{"a": 200, "b": 5, "c": 3})
	// The operation column is read, not stored.
	var ops []any
	if err := tb.Query(context.Background(), Query{Columns: []string{"id", OperationColumn}}, func(r Row) error {
		ops = append(ops, r[OperationColumn])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(ops, func(v any) bool { return v != nil }) {
		t.Errorf("operation column stored: %v", ops)
	}
	// A key column without a value is refused.
	if err := tb.Append(context.Background(), []Row{{"v": int64(1)}}); !errors.As(err, new(*SchemaError)) {
		t.Errorf("row without key: %v, want a *SchemaError", err)
	}
	// The state survives a reopen (the index and the marks are stored).
	dir := s.dir
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	tb = keyedTable(t, s, Config{})
	wantState(t, tb, map[string]int64{"a": 200, "b": 5, "c": 3})
	appendRows(t, tb, up("a", 7))
	wantState(t, tb, map[string]int64{"a": 7, "b": 5, "c": 3})
}

func TestKeyedReplayAndOrder(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	appendRows(t, tb, at(up("a", 1), "kafka/t/0", 10), at(up("b", 1), "kafka/t/0", 11))
	// A replay (at or below the key's offset in the same partition)
	// changes nothing, nor does a replayed delete.
	appendRows(t, tb, at(up("a", 9), "kafka/t/0", 10), at(up("a", 9), "kafka/t/0", 3), at(del("b"), "kafka/t/0", 11))
	wantState(t, tb, map[string]int64{"a": 1, "b": 1})
	// Within one append, the highest offset of a partition wins whatever
	// the rows' order.
	appendRows(t, tb, at(up("a", 30), "kafka/t/0", 30), at(up("a", 20), "kafka/t/0", 20))
	wantState(t, tb, map[string]int64{"a": 30, "b": 1})
	// Another partition (or source) applies in arrival order.
	appendRows(t, tb, at(up("a", 4), "kafka/t/1", 1))
	wantState(t, tb, map[string]int64{"a": 4, "b": 1})
	// A delete at a position leaves a tombstone: the replay of an older
	// upsert of that partition does not bring the key back.
	appendRows(t, tb, at(del("b"), "kafka/t/0", 40))
	appendRows(t, tb, at(up("b", 8), "kafka/t/0", 39))
	wantState(t, tb, map[string]int64{"a": 4})
	appendRows(t, tb, at(up("b", 9), "kafka/t/0", 41))
	wantState(t, tb, map[string]int64{"a": 4, "b": 9})
	// A row without a position (HTTP) applies and keeps the key's last
	// position: a replay of that partition still changes nothing.
	appendRows(t, tb, up("b", 10))
	appendRows(t, tb, at(up("b", 8), "kafka/t/0", 41))
	wantState(t, tb, map[string]int64{"a": 4, "b": 10})
}

// TestKeyedBatchParts covers the paths that resolve keys in several parts
// of one batch: an Appender whose parts are encoded apart (a new column
// flushes the rows before it) and a stream Batch with a position.
func TestKeyedBatchParts(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	appendRows(t, tb, up("a", 1), up("b", 1))
	b, err := tb.NewAppender()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, []Row{up("a", 2), up("c", 2)}); err != nil {
		t.Fatal(err)
	}
	r := up("a", 3)
	r["extra"] = "x" // another column: the first part is encoded first
	if err := b.Add(ctx, []Row{r, del("c")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	wantState(t, tb, map[string]int64{"a": 3, "b": 1})

	sb, err := s.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Append(tb, []Row{at(up("b", 4), "kafka/t/0", 5), at(del("a"), "kafka/t/0", 6)}); err != nil {
		t.Fatal(err)
	}
	if err := sb.SetPosition("kafka/t/0", []byte("7")); err != nil {
		t.Fatal(err)
	}
	if err := sb.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sb.Close()
	wantState(t, tb, map[string]int64{"b": 4})
	// A batch closed without a commit changes nothing and frees the key
	// lock (the append below would wait for it otherwise).
	sb, err = s.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Append(tb, []Row{up("b", 99)}); err != nil {
		t.Fatal(err)
	}
	sb.Close()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tb.Append(tctx, []Row{up("e", 1)}); err != nil {
		t.Fatal(err)
	}
	wantState(t, tb, map[string]int64{"b": 4, "e": 1})
	// What the closed batch read and wrote is not taken for the stored
	// state (the entry cache): the next update of b supersedes b=4.
	appendRows(t, tb, up("b", 7))
	wantState(t, tb, map[string]int64{"b": 7, "e": 1})
}

func TestKeyedRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	st, err := s.NewStage()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Append(ctx, tb, []Row{up("a", 1)}); !errors.Is(err, ErrKeyed) {
		t.Errorf("staged append: %v, want ErrKeyed", err)
	}
	for _, key := range [][]string{nil, {"dev"}, {"id", "dev"}} {
		if _, err := s.Table(Config{Name: "state", HashBy: "dev", SortBy: "ts", PrimaryKey: key}); err == nil {
			t.Errorf("primary key %q accepted for a table created with [id]", key)
		}
	}
	for _, key := range [][]string{{"id", "id"}, {""}, {SourceOffsetColumn}} {
		if _, err := s.Table(Config{Name: "other", PrimaryKey: key}); err == nil {
			t.Errorf("primary key %q accepted", key)
		}
	}
	if _, err := s.Table(Config{Name: "static", SortBy: "ts", Columns: []Column{{Name: "ts", Type: Timestamp}}, PrimaryKey: []string{"id"}}); err == nil {
		t.Error("a primary key outside the static schema accepted")
	}
}

// TestKeyedTTL: a key whose row expired is absent (before and after the
// expiry deletes its block), comes back with an upsert, and the expiry
// deletes the dead-row marks with their blocks.
func TestKeyedTTL(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(t0.Add(100 * time.Hour).UnixNano())
	s, err := Open(t.TempDir(), Options{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := keyedTable(t, s, Config{Name: "state", HashBy: "dev", SortBy: "ts", PrimaryKey: []string{"id"}, TTL: 10 * time.Hour})
	at := func(id string, v int64, ts time.Time) Row { r := up(id, v); r["ts"] = ts; return r }
	fresh := t0.Add(99 * time.Hour)
	appendRows(t, tb, at("a", 1, t0), at("b", 1, t0), at("b", 2, t0), at("c", 1, fresh))
	appendRows(t, tb, at("c", 2, fresh.Add(time.Minute))) // marks c's first row dead
	wantState(t, tb, map[string]int64{"c": 2})
	for _, id := range []string{"a", "b"} { // expired, their blocks not deleted yet
		if r, ok, err := tb.Lookup(ctx, []any{id}); ok || err != nil {
			t.Errorf("Lookup(%s) of an expired row = %v, %v, %v", id, r, ok, err)
		}
	}
	marks := func() int {
		lo, hi := deadBounds(tb.id)
		it, err := s.db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		n := 0
		for it.SeekGE(lo); it.Valid() && string(it.Key()) < string(hi); it.Next() {
			n++
		}
		return n
	}
	if n := marks(); n != 1 {
		t.Fatalf("%d dead-row marks, want c's block's", n)
	}
	now.Add(int64(48 * time.Hour)) // every row expired
	if _, err := tb.Expire(ctx); err != nil {
		t.Fatal(err)
	}
	wantState(t, tb, map[string]int64{})
	if n := marks(); n != 0 {
		t.Errorf("%d dead-row marks left after every block expired", n)
	}
	nowT := time.Unix(0, now.Load())
	appendRows(t, tb, at("a", 3, nowT), at("c", 3, nowT))
	wantState(t, tb, map[string]int64{"a": 3, "c": 3})
}

// TestKeyedConcurrentQueries runs updates of every key while queries run:
// each query must see every key exactly once (never two versions, never
// none), whichever commits it falls between.
func TestKeyedConcurrentQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	const keys = 200
	batch := func(v int64) []Row {
		rows := make([]Row, keys)
		for i := range rows {
			rows[i] = up(fmt.Sprint(i), v)
			rows[i]["ts"] = t0.Add(time.Duration((int64(i)+v)%48) * time.Hour) // rows move between blocks
		}
		return rows
	}
	appendRows(t, tb, batch(0)...)
	var wg sync.WaitGroup
	var stop atomic.Bool
	var version atomic.Int64
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1 + w); !stop.Load() && ctx.Err() == nil; v += 2 {
				if err := tb.Append(ctx, batch(v)); err != nil {
					t.Error(err)
					return
				}
				version.Add(1)
			}
		}()
	}
	defer func() { // before the store closes, also when the test fails
		stop.Store(true)
		wg.Wait()
	}()
	queries := 0
	for version.Load() < 60 && ctx.Err() == nil {
		seen := make(map[string]bool, keys)
		err := tb.Query(ctx, Query{Columns: []string{"id"}}, func(r Row) error {
			id := r["id"].(string)
			if seen[id] {
				return fmt.Errorf("key %s twice in one query", id)
			}
			seen[id] = true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != keys {
			t.Fatalf("query %d saw %d of %d keys", queries, len(seen), keys)
		}
		queries++
	}
	stop.Store(true)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("timed out")
	}
	t.Logf("%d queries during %d appends", queries, version.Load())
}

// TestKeyedQueryViewDuringAppend commits an update of every key between
// the moment a query opens its blocks and the moment it reads the dead-row
// marks: the query must see the state before the update, whole (the marks
// of the update would hide every old row while its new rows are not in the
// query's view).
func TestKeyedQueryViewDuringAppend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	var rows, updates []Row
	want := map[string]int64{}
	for i := range 50 {
		rows = append(rows, up(fmt.Sprint(i), 1))
		updates = append(updates, up(fmt.Sprint(i), 2))
		want[fmt.Sprint(i)] = 1
	}
	appendRows(t, tb, rows...)
	var hookErr error
	scanOpenedHook = func() {
		scanOpenedHook = nil // once: the append below must not recurse
		hookErr = tb.Append(ctx, updates)
	}
	defer func() { scanOpenedHook = nil }()
	got := state(t, tb)
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if len(got) != len(want) {
		t.Fatalf("the query saw %d of %d keys", len(got), len(want))
	}
	for id, r := range got {
		if r["v"] != int64(1) {
			t.Fatalf("key %s: v=%v in a query opened before the update", id, r["v"])
		}
	}
	for id := range want {
		want[id] = 2
	}
	wantState(t, tb, want)
}

// TestKeyedAppendsResolveOneAtATime tries a second append of a key while a
// first one has read the key's entry and not committed: the second must
// wait for the key lock (here until its deadline), or the first would
// commit from a stale entry and leave two rows of the key.
func TestKeyedAppendsResolveOneAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	appendRows(t, tb, up("a", 1))
	var second error
	keyedLoadedHook = func(*Table) {
		keyedLoadedHook = nil
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer wcancel()
		second = tb.Append(wctx, []Row{up("a", 3)})
	}
	defer func() { keyedLoadedHook = nil }()
	appendRows(t, tb, up("a", 2))
	if !errors.Is(second, context.DeadlineExceeded) {
		t.Errorf("an append during another's resolution: %v, want it to wait (deadline exceeded)", second)
	}
	wantState(t, tb, map[string]int64{"a": 2})
}

// keyedChildEnv, when set to a directory, makes the test binary a child
// that appends keyedCrashBatches to a keyed table there (FaultEnv kills it
// at the step under test).
const keyedChildEnv = "SLUICE_TABLE_KEYED_CHILD"

// keyedCrashBatches are two appends: 100 keys, then an update of half of
// them and a delete of ten.
func keyedCrashBatches() [][]Row {
	var first, second []Row
	for i := range 100 {
		first = append(first, up(fmt.Sprint(i), 1))
	}
	for i := range 50 {
		r := up(fmt.Sprint(i), 2)
		r["ts"] = t0.Add(5 * time.Hour) // other blocks
		second = append(second, r)
	}
	for i := 50; i < 60; i++ {
		second = append(second, del(fmt.Sprint(i)))
	}
	return [][]Row{first, second}
}

func keyedChild(dir string) {
	s, err := Open(dir, Options{})
	if err == nil {
		var tb *Table
		if tb, err = s.Table(Config{Name: "state", HashBy: "dev", SortBy: "ts", PrimaryKey: []string{"id"}}); err == nil {
			for _, rows := range keyedCrashBatches() {
				if err = tb.Append(context.Background(), rows); err != nil {
					break
				}
			}
		}
	}
	fmt.Fprintln(os.Stderr, "keyed child: not killed:", err)
	os.Exit(3)
}

// TestKeyedKill9 kills a process (SIGKILL) just before and just after the
// commit of a keyed append that updates and deletes keys: after reopening,
// the rows, the key index and the dead-row marks are all of the state
// before that append, or all of the state after it.
func TestKeyedKill9(t *testing.T) {
	before := map[string]int64{}
	for i := range 100 {
		before[fmt.Sprint(i)] = 1
	}
	after := map[string]int64{}
	for i := range 100 {
		switch {
		case i < 50:
			after[fmt.Sprint(i)] = 2
		case i >= 60:
			after[fmt.Sprint(i)] = 1
		}
	}
	for _, c := range []struct {
		fault string
		want  map[string]int64
	}{{"append-before-commit:2", before}, {"append-after-commit:2", after}} {
		t.Run(c.fault, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), keyedChildEnv+"="+dir, FaultEnv+"="+c.fault)
			cmd.Stderr = os.Stderr
			err := cmd.Run()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die of SIGKILL at %s: %v", c.fault, err)
			}
			s := openStore(t, dir)
			defer s.Close()
			tb := keyedTable(t, s, Config{})
			wantState(t, tb, c.want)
			// The index still drives the next append: one more update of
			// every key leaves one row per key.
			var rows []Row
			for i := range 100 {
				rows = append(rows, up(fmt.Sprint(i), 3))
			}
			appendRows(t, tb, rows...)
			all := map[string]int64{}
			for i := range 100 {
				all[fmt.Sprint(i)] = 3
			}
			wantState(t, tb, all)
		})
	}
}

// TestKeyedCompositeAndStatic: a key of two columns, one an integer that
// later arrives as a float and as text (one key: keys compare by text), on
// a static schema (which takes the operation column as a hidden one).
func TestKeyedCompositeAndStatic(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "acct", SortBy: "ts", PrimaryKey: []string{"tenant", "id"}, Columns: []Column{
		{Name: "ts", Type: Timestamp}, {Name: "tenant", Type: String}, {Name: "id", Type: Int64}, {Name: "v", Type: Int64}}})
	if err != nil {
		t.Fatal(err)
	}
	row := func(tenant string, id any, v int64) Row {
		return Row{"tenant": tenant, "id": id, "v": v, "ts": t0.Add(time.Duration(v) * time.Minute)}
	}
	appendRows(t, tb, row("x", 1, 1), row("y", 1, 1), row("x", 2, 1))
	appendRows(t, tb, row("x", 1.0, 2), row("y", "1", 3), Row{"tenant": "x", "id": int64(2), OperationColumn: OperationDelete})
	got := map[[2]any]int64{}
	if err := tb.Query(ctx, Query{}, func(r Row) error {
		k := [2]any{r["tenant"], r["id"]}
		if _, ok := got[k]; ok {
			return fmt.Errorf("key %v twice", k)
		}
		got[k] = r["v"].(int64)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[[2]any]int64{{"x", int64(1)}: 2, {"y", int64(1)}: 3}
	if len(got) != len(want) || got[[2]any{"x", int64(1)}] != 2 || got[[2]any{"y", int64(1)}] != 3 {
		t.Fatalf("state %v, want %v", got, want)
	}
	for _, c := range []struct {
		key []any
		v   int64
		ok  bool
	}{{[]any{"x", 1}, 2, true}, {[]any{"y", "1"}, 3, true}, {[]any{"x", 2}, 0, false}, {[]any{"z", 1}, 0, false}} {
		r, ok, err := tb.Lookup(ctx, c.key)
		if err != nil || ok != c.ok || (ok && r["v"] != c.v) {
			t.Errorf("Lookup(%v) = %v, %v, %v; want v=%d, %v", c.key, r, ok, err, c.v, c.ok)
		}
	}
}

// TestKeyedLongKeys: key values longer than a one-byte length (the key
// bytes' uvarint grows) stay distinct and found.
func TestKeyedLongKeys(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := keyedTable(t, s, Config{})
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	ids := []string{long("a", 127), long("a", 128), long("a", 300), long("a", 20000), long("b", 300)}
	want := map[string]int64{}
	for _, v := range []int64{1, 2} {
		var rows []Row
		for _, id := range ids {
			rows = append(rows, up(id, v))
			want[id] = v
		}
		appendRows(t, tb, rows...)
	}
	wantState(t, tb, want)
}

// TestKeyedCachesCloneKeys checks that the caches of entries and marks
// keep keys of their own: a part's keys are substrings of one string of
// all of them, which a cached key would keep alive as long as it stays
// cached (a 64k-entry cache could hold thousands of parts' strings).
func TestKeyedCachesCloneKeys(t *testing.T) {
	joined := strings.Repeat("key-0001key-0002", 4)
	inJoined := func(s string) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(joined)))
		return p >= lo && p < lo+uintptr(len(joined))
	}
	a, b := joined[0:8], joined[8:16]
	var entries entryCache
	var marks markCache
	for range 2 { // a new key, then one cached already
		entries.put(map[string]*keyState{a: {live: true, pending: -1}, b: {pending: -1}})
		marks.put(map[string][]byte{a: newMark(3), b: newMark(9)})
	}
	for k := range entries.m {
		if inJoined(k) {
			t.Errorf("entry cache key %q is the part's string", k)
		}
	}
	for k := range marks.m {
		if inJoined(k) {
			t.Errorf("mark cache key %q is the part's string", k)
		}
	}
	if len(entries.m) != 2 || len(marks.m) != 2 {
		t.Fatalf("cached %d entries and %d marks, want 2 and 2", len(entries.m), len(marks.m))
	}
	var got []keyState
	entries.getAll([]string{a, b, "other"}, []int{0, 1, 2}, func(_ int, s keyState, ok bool) {
		if ok {
			got = append(got, s)
		}
	})
	if len(got) != 2 || !got[0].live || got[1].live {
		t.Errorf("getAll = %+v, want a live and b not", got)
	}
}
