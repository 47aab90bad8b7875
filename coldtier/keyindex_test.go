package coldtier_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// TestKeyIndex builds the cold key index (key: column n) from the Iceberg
// table and checks it against the files themselves: after a first run
// every key's row holds that n; a restart at the same snapshot loads the
// saved index; after a run that deletes 200 rows and adds 100 the index,
// brought up to date from the new snapshot, no longer has the deleted
// keys; rows of keys committed twice without a delete are found stale;
// each index brought up to date equals one built from the table whole;
// a damaged index file is rebuilt.
func TestKeyIndex(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "keyindex")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fill(t, tb, 0, 2000, 3)
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := coldtier.Options{Remove: true, Continuous: true}
	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
		t.Fatal(err)
	}
	keyCols := []string{"n"}
	open := func(when string, wantRebuilt bool) coldtier.KeyIndexView {
		t.Helper()
		v, err := coldtier.OpenKeyIndex(ctx, c, keyCols)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if v.Rebuilt != wantRebuilt {
			t.Errorf("%s: rebuilt %v, want %v", when, v.Rebuilt, wantRebuilt)
		}
		whole, err := coldtier.BuildKeyIndex(ctx, c, keyCols)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v.Rows, whole.Rows) || len(v.Stale) != len(whole.Stale) || v.Snapshot != whole.Snapshot {
			t.Errorf("%s: the index (%d keys, %d stale, snapshot %d) differs from one built whole (%d keys, %d stale, snapshot %d)",
				when, len(v.Rows), len(v.Stale), v.Snapshot, len(whole.Rows), len(whole.Stale), whole.Snapshot)
		}
		return v
	}
	// check compares the index with the n each named row holds.
	files := map[string][]int64{}
	check := func(when string, v coldtier.KeyIndexView, want []int64) {
		t.Helper()
		if len(v.Rows) != len(want) {
			t.Errorf("%s: %d keys, want %d", when, len(v.Rows), len(want))
		}
		bad := 0
		for _, n := range want {
			key, err := coldtier.EncodeKey(n)
			if err != nil {
				t.Fatal(err)
			}
			ref, ok := v.Rows[key]
			if !ok {
				if bad++; bad < 5 {
					t.Errorf("%s: key %d not in the index", when, n)
				}
				continue
			}
			ns, ok := files[ref.File]
			if !ok {
				ns = readFileNs(t, ref.File)
				files[ref.File] = ns
			}
			if ref.Pos >= int64(len(ns)) || ns[ref.Pos] != n {
				if bad++; bad < 5 {
					t.Errorf("%s: key %d at %s row %d, which is not it", when, n, ref.File, ref.Pos)
				}
			}
		}
	}
	var all []int64
	for n := range int64(2000) {
		all = append(all, n)
	}
	check("after the first run", open("after the first run", true), all)
	check("reopened at the same snapshot", open("reopened at the same snapshot", false), all)

	fill(t, tb, 5000, 100, 3)
	coldtier.SetRunDeletes(c, deleteWhere(deletedN))
	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
		t.Fatal(err)
	}
	var added []int64
	for n := range int64(100) {
		added = append(added, 5000+n)
	}
	after := wantAfterDeletes(2000, added)
	check("after the run with deletes", open("after the run with deletes", false), after)

	// Keys 0..9 again, committed without deleting their rows: the new rows
	// are the keys' state, the old ones (but n=3's, deleted) stale.
	coldtier.SetRunDeletes(c, nil)
	earlier := map[string]bool{}
	for f := range files {
		earlier[f] = true
	}
	fill(t, tb, 0, 10, 1)
	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
		t.Fatal(err)
	}
	v := open("after the duplicate keys", false)
	dupWant := append([]int64{3}, after...)
	check("after the duplicate keys", v, dupWant)
	if len(v.Stale) != 9 {
		t.Errorf("%d stale rows, want 9 (keys 0..9 but 3)", len(v.Stale))
	}
	for n := range int64(10) {
		key, _ := coldtier.EncodeKey(n)
		if ref := v.Rows[key]; earlier[ref.File] {
			t.Errorf("key %d at %s, a file of the earlier runs: want the newer row", n, ref.File)
		}
	}

	// A damaged file is rebuilt.
	path := coldtier.KeyIndexPath(c)
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	buf[len(buf)/2] ^= 0xff
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	check("after damage", open("after damage", true), dupWant)
}

// readFileNs reads column n of a data file of the test's S3 server.
func readFileNs(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(s3.Root + "/" + path[len("s3://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ns, err := columnN(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestKeyedRunsUpsert is the cold side of an upsert end to end: runs that
// write new versions of keys delete the keys' older rows through the key
// index, in their commits; the Iceberg table holds one row per key, the
// newest, after each run (pyiceberg and sluice).
func TestKeyedRunsUpsert(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "keyed-upsert")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var written [][]any // the keys of the next run
	coldtier.SetKeyedDeletes(c, []string{"n"}, func() [][]any { return written })
	opts := coldtier.Options{Remove: true, Continuous: true}
	version := map[int64]string{}
	upsert := func(ns []int64, note string) {
		t.Helper()
		written = written[:0]
		var rows []table.Row
		for _, n := range ns {
			rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", n%7), "ts": day0.Add(time.Duration(n%3) * 24 * time.Hour),
				"n": n, "note": note})
			written = append(written, []any{n})
			version[n] = note
		}
		if err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
			t.Fatal(err)
		}
		got := map[int64]string{}
		for _, r := range readIceberg(t, cfg, "events").PyIceberg {
			n := int64(r["n"].(float64))
			if _, twice := got[n]; twice {
				t.Errorf("after %s: key %d has two rows in the Iceberg table", note, n)
			}
			got[n], _ = r["note"].(string)
		}
		if !reflect.DeepEqual(got, version) {
			t.Errorf("after %s: pyiceberg reads %d keys, want %d, each with its newest note", note, len(got), len(version))
		}
		if n := len(sluiceNs(t, c)); n != len(version) {
			t.Errorf("after %s: sluice reads %d rows, want %d", note, n, len(version))
		}
	}
	var all, some, few []int64
	for n := range int64(1000) {
		all = append(all, n)
		if n%4 == 0 {
			some = append(some, n)
		}
		if n%100 == 0 {
			few = append(few, n, n+1000) // one older key, one new key
		}
	}
	upsert(all, "v1")
	upsert(some, "v2")
	upsert(few, "v3")
}
