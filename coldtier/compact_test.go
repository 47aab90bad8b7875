package coldtier_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// TestCompactToS3ReadByPyIcebergAndDuckDB compacts three days into the
// Iceberg table on the S3 server, then reads it back with pyiceberg (from
// the same SQLite catalog) and with DuckDB (read_parquet over the files the
// manifests list): both return exactly the rows and values sluice's query
// returned before the compaction, with the mapped types, and the store no
// longer holds them.
func TestCompactToS3ReadByPyIcebergAndDuckDB(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, "e2e")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	fill(t, tb, 0, 3000, 3)
	want := normRows(t, tb, table.Query{})

	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stats, err := c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Rows != 3000 || stats.SnapshotID == 0 || stats.Bytes == 0 {
		t.Fatalf("stats %+v: want 3000 rows in one snapshot", stats)
	}
	if left := normRows(t, tb, table.Query{}); len(left) != 0 {
		t.Fatalf("%d rows left in the store after remove", len(left))
	}

	v := readIceberg(t, cfg, "events")
	if !reflect.DeepEqual(v.PyIceberg, want) {
		t.Errorf("pyiceberg rows differ: %d rows, first %v; want %d, first %v", len(v.PyIceberg), first(v.PyIceberg), len(want), first(want))
	}
	if !reflect.DeepEqual(v.DuckDB, want) {
		t.Errorf("duckdb rows differ: %d rows, first %v; want %d, first %v", len(v.DuckDB), first(v.DuckDB), len(want), first(want))
	}
	wantTypes := map[string]string{"user": "string", "ts": "timestamptz", "n": "long", "f": "double", "ok": "boolean", "note": "string", "doc": "string"}
	for _, f := range v.Schema {
		if got := f[1].(string); wantTypes[f[0].(string)] != got {
			t.Errorf("iceberg column %v: type %s, want %s", f[0], got, wantTypes[f[0].(string)])
		}
	}
	duckTypes := map[string]string{"user": "VARCHAR", "ts": "TIMESTAMP WITH TIME ZONE", "n": "BIGINT", "f": "DOUBLE", "ok": "BOOLEAN", "note": "VARCHAR", "doc": "VARCHAR"}
	for _, f := range v.DuckDBTypes {
		if duckTypes[f[0]] != f[1] {
			t.Errorf("duckdb column %s: type %s, want %s", f[0], f[1], duckTypes[f[0]])
		}
	}
	if len(v.SortOrder) != 1 || v.SortOrder[0][0] != "user" || !strings.Contains(strings.ToLower(v.SortOrder[0][2]), "asc") {
		t.Errorf("sort order %v, want user ascending", v.SortOrder)
	}
	if len(v.UnsortedFiles) > 0 {
		t.Errorf("data files not sorted by user: %v", v.UnsortedFiles)
	}
	if len(v.Spec) != 1 || v.Spec[0][1] != "day" || v.Spec[0][0] != "ts_day" {
		t.Errorf("partition spec %v, want day(ts)", v.Spec)
	}
	days := map[string]bool{}
	for _, f := range v.Files {
		for _, p := range strings.Split(f, "/") {
			if strings.HasPrefix(p, "ts_day=") {
				days[p] = true
			}
		}
	}
	if len(days) != 3 {
		t.Errorf("files %v: want 3 day partitions", v.Files)
	}
	// One snapshot for the run (its three days' files), committed at once.
	if len(v.Snapshots) != 1 {
		t.Errorf("%d snapshots, want one for the run", len(v.Snapshots))
	}
	for _, s := range v.Snapshots {
		if s["sluice.node"] != "test-node" || s["sluice.watermark"] == nil || s["sluice.run"] != v.Snapshots[0]["sluice.run"] {
			t.Errorf("snapshot %v: want the sluice.* properties of one run", s)
		}
	}
}

// TestCompactKeepAndSchemaEvolution runs twice without removal: the second
// run compacts only the new day (no row twice), and a column that appeared
// in between is added to the Iceberg schema (older files read it as null).
func TestCompactKeepAndSchemaEvolution(t *testing.T) {
	t.Parallel() // its own directory, catalog and prefix in the bucket, no package hook
	dir := t.TempDir()
	cfg := testConfig(t, dir, "evolve")
	st, tb := openTable(t, dir, nil) // inferred schema
	defer st.Close()
	ctx := context.Background()
	fill(t, tb, 0, 500, 2) // days 0 and 1
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Compact(ctx, day0.Add(48*time.Hour), coldtier.Options{}); err != nil {
		t.Fatal(err)
	}
	late := table.Row{"user": "u1", "ts": day0.Add(50 * time.Hour), "n": int64(10000), "extra": "new column"}
	if err := tb.Append(ctx, []table.Row{late}); err != nil {
		t.Fatal(err)
	}
	stats, err := c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Rows != 1 {
		t.Fatalf("second run compacted %d rows, want only the new one", stats.Rows)
	}
	want := normRows(t, tb, table.Query{}) // keep mode: the store still has everything
	v := readIceberg(t, cfg, "events")
	if !reflect.DeepEqual(v.PyIceberg, want) {
		t.Errorf("pyiceberg: %d rows, want %d; last %v, want %v", len(v.PyIceberg), len(want), last(v.PyIceberg), last(want))
	}
	if !slices.ContainsFunc(v.Schema, func(f []any) bool { return f[0] == "extra" && f[1] == "string" }) {
		t.Errorf("schema %v lacks the added column extra", v.Schema)
	}
}

// TestFilesSortedByKey: the Iceberg table declares the sort order hashBy
// ascending, and every data file is sorted by it as a whole, also when it
// has many row groups (iceberg-go sorts each batch it is given; the run's
// read in key order makes the file sorted across batches, and so the row
// groups' statistics of the key column narrow).
func TestFilesSortedByKey(t *testing.T) {
	t.Parallel()
	for _, unsorted := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsorted=%v", unsorted), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir, fmt.Sprintf("sorted-%v", unsorted))
			cfg.RowGroupRows = 128
			cfg.Unsorted = unsorted
			st, tb := openTable(t, dir, staticSchema)
			defer st.Close()
			rows := make([]table.Row, 0, 3000)
			for i := range 3000 {
				rows = append(rows, table.Row{"user": fmt.Sprintf("user-%03d", (i*37)%101), "ts": day0.Add(time.Duration(i) * time.Second), "n": int64(i)})
			}
			if err := tb.Append(context.Background(), rows); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			c, err := coldtier.Open(ctx, cfg, tb)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Compact(ctx, day0.Add(24*time.Hour), coldtier.Options{Remove: true}); err != nil {
				t.Fatal(err)
			}
			v := readIceberg(t, cfg, "events")
			if len(v.PyIceberg) != 3000 || len(v.Files) == 0 {
				t.Fatalf("pyiceberg read %d rows from %d files, want 3000", len(v.PyIceberg), len(v.Files))
			}
			if unsorted {
				// compact.iceberg.unsorted: no declared order, files in the
				// store's hash order.
				if len(v.SortOrder) != 0 || len(v.UnsortedFiles) != len(v.Files) {
					t.Errorf("unsorted: sort order %v, %d of %d files unsorted; want none declared and every file in hash order", v.SortOrder, len(v.UnsortedFiles), len(v.Files))
				}
				return
			}
			if len(v.SortOrder) != 1 || v.SortOrder[0][0] != "user" || !strings.Contains(strings.ToLower(v.SortOrder[0][2]), "asc") {
				t.Errorf("sort order %v, want user ascending", v.SortOrder)
			}
			if len(v.UnsortedFiles) > 0 {
				t.Errorf("data files %v; not sorted by user: %v", v.Files, v.UnsortedFiles)
			}
		})
	}
}

func first(rows []map[string]any) map[string]any {
	if len(rows) == 0 {
		return nil
	}
	return rows[0]
}

func last(rows []map[string]any) map[string]any {
	if len(rows) == 0 {
		return nil
	}
	return rows[len(rows)-1]
}

// TestCompactToLocalWarehouse keeps the Iceberg table in a local directory
// (no S3): the same protocol, and the cold rows answer queries.
func TestCompactToLocalWarehouse(t *testing.T) {
	dir := t.TempDir()
	cfg := coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "local"}
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	fill(t, tb, 0, 900, 3)
	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := tieredRows(t, c, table.Query{})
	if _, err := c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	if left := normRows(t, tb, table.Query{}); len(left) != 0 {
		t.Fatalf("%d rows left in the store", len(left))
	}
	files, err := c.DataFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || !strings.HasPrefix(strings.TrimPrefix(files[0], "file://"), filepath.Join(dir, "warehouse", "sluice", "events", "data")) {
		t.Errorf("data files %v: want 3 under the warehouse directory", files)
	}
	if got := tieredRows(t, c, table.Query{}); !reflect.DeepEqual(got, want) {
		t.Errorf("%d rows from the local Iceberg table, want %d", len(got), len(want))
	}
}

// TestCompactAtColumnLimit: an inferred schema at the table's default column
// limit, with 64-byte column names, compacts; a row past the limit is refused
// before it widens the schema. Before the limit, one row of 100k fields
// widened the schema so far that every later compaction failed (`ocf:
// metadata "schema" value length ... exceeds the 1048576-byte limit`, from
// about 17k columns of 6-byte names on).
func TestCompactAtColumnLimit(t *testing.T) {
	dir := t.TempDir()
	st, tb := openTable(t, dir, nil)
	defer st.Close()
	ctx := context.Background()
	name := func(prefix string, i int) string { return fmt.Sprintf("%s%063d", prefix, i) }
	// ts, user and the columns of one row up to the limit.
	row := table.Row{"user": "u", "ts": day0}
	for i := range table.DefaultMaxColumns - 2 {
		row[name("c", i)] = int64(i)
	}
	if err := tb.Append(ctx, []table.Row{row}); err != nil {
		t.Fatal(err)
	}
	over := table.Row{"user": "u", "ts": day0, name("d", 0): int64(1)}
	if err := tb.Append(ctx, []table.Row{over}); !errors.Is(err, table.ErrTooManyColumns) {
		t.Fatalf("a row past the limit: %v", err)
	}
	c, err := coldtier.Open(ctx, coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "local"}, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Compact(ctx, day0.Add(48*time.Hour), coldtier.Options{Remove: true})
	if err != nil {
		t.Fatalf("compaction of a schema of %d columns: %v", len(tb.Schema()), err)
	}
	if res.Rows != 1 {
		t.Fatalf("compacted %d rows, want 1", res.Rows)
	}
}
