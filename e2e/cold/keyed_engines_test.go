package cold

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// The package's one Trino and one Spark JVM, started by the first test
// that needs them and stopped by TestMain: a JVM start costs half a minute
// of CPU, so each test adds a catalog of its own to the Trino
// (AddCatalog) and sends its statements to the Spark server.
var (
	sharedTrino coldtest.SharedTrino
	sharedSpark coldtest.SharedSpark
)

// keyState is the state a keyed table must hold, as the test produced
// it: each live key's note.
type keyState map[int64]string

// diff says how got differs from want: how many keys are missing, extra
// (deleted or never written) or with another note, and the first few.
func (want keyState) diff(got keyState) string {
	var missing, extra, stale []int64
	for n, note := range want {
		switch g, ok := got[n]; {
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
	first := func(s []int64) []int64 { slices.Sort(s); return s[:min(len(s), 6)] }
	return fmt.Sprintf("%d keys missing (first %v), %d keys that should be absent (first %v), %d keys with another note (first %v)",
		len(missing), first(missing), len(extra), first(extra), len(stale), first(stale))
}

// readState makes a state of an engine's (n, note) rows; a key read twice
// is an error of its own (two versions of a key, or a deleted row read
// beside its successor).
func readState(who string, ns []int64, notes []string) (keyState, error) {
	got := keyState{}
	var twice []int64
	for i, n := range ns {
		if _, ok := got[n]; ok {
			twice = append(twice, n)
		}
		got[n] = notes[i]
	}
	if len(twice) > 0 {
		slices.Sort(twice)
		return got, fmt.Errorf("%s: %d keys read more than once (first %v)", who, len(twice), twice[:min(len(twice), 6)])
	}
	return got, nil
}

// keyedRuns is what the keyed engines test writes: a table with primary
// key n compacted by continuous runs into the Iceberg table.
type keyedRuns struct {
	tb   *table.Table
	want keyState
}

// upsert appends a row for each of ns with note; the row's day depends on
// the note, so a key's new version often lands in another day partition
// than its old one (the run deletes a row of another partition's file).
func (k *keyedRuns) upsert(t *testing.T, ns []int64, note string) {
	t.Helper()
	rows := make([]table.Row, 0, len(ns))
	for _, n := range ns {
		day := (n + int64(len(note))) % 3
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", n%5), "ts": day0.Add(time.Duration(day)*24*time.Hour + time.Duration(n)*time.Second),
			"n": n, "note": note})
		k.want[n] = note
	}
	if err := k.tb.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// remove appends deletes of ns.
func (k *keyedRuns) remove(t *testing.T, ns []int64) {
	t.Helper()
	rows := make([]table.Row, 0, len(ns))
	for _, n := range ns {
		rows = append(rows, table.Row{"user": fmt.Sprintf("u%d", n%5), "ts": day0, "n": n, table.OperationColumn: table.OperationDelete})
		delete(k.want, n)
	}
	if err := k.tb.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// keysWhere is the keys below keys that pick chooses.
func keysWhere(keys int64, pick func(n int64) bool) []int64 {
	var ns []int64
	for n := range keys {
		if pick(n) {
			ns = append(ns, n)
		}
	}
	return ns
}

// TestKeyedTableEngines: a keyed table (primary key n) with a continuous
// cold tier in the REST catalog on S3 takes seven runs of changes: 1,000
// keys, then in each run a tenth of them updated (many into another day
// partition), some updated twice, some deleted (some of those updated in
// the same run first), the keys deleted the run before written again. Each
// run deletes the old rows by position delete files in its commit, so they
// accumulate (the test checks there are some). Maintenance then rewrites
// the files, leaving out the deleted rows and dropping the delete files.
// Trino's Iceberg connector reads the state before and after maintenance;
// Spark (one JVM) reads the snapshot before maintenance by time travel and
// the current one; sluice's two-tier query reads it too. Each must equal
// the state the test produced, key by key: one row per key, its last
// note, no deleted key.
func TestKeyedTableEngines(t *testing.T) {
	coldtest.Require(t, s3Err)
	spark := sharedSpark.Require(t)
	tr := sharedTrino.Require(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rest, err := coldtest.StartREST(dir,
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO", "CATALOG_S3_ENDPOINT="+s3.Endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true", "CATALOG_CLIENT_REGION="+coldtest.Region)
	coldtest.Require(t, err)
	defer rest.Stop()
	cfg := coldtier.Config{
		Warehouse: "s3://" + coldtest.Bucket + "/keyed-engines",
		S3:        coldtier.S3{Endpoint: s3.Endpoint, Region: coldtest.Region, PathStyle: true},
		Catalog:   coldtier.Catalog{Type: "rest", URI: rest.URI},
		Node:      "keyed-engines-node",
		StateDir:  dir,
	}
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts", PrimaryKey: []string{"n"},
		Columns: []table.Column{{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp},
			{Name: "n", Type: table.Int64}, {Name: "note", Type: table.String}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keyedRuns{tb: tb, want: keyState{}}
	run := func(step string) {
		t.Helper()
		if _, err := c.Compact(ctx, time.Now(), coldtier.Options{Continuous: true, Remove: true}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}

	const keys = 1000
	k.upsert(t, keysWhere(keys, func(int64) bool { return true }), "v1")
	run("run 1")
	for r := int64(2); r <= 7; r++ {
		note := "v" + strconv.FormatInt(r, 10)
		k.upsert(t, keysWhere(keys, func(n int64) bool { return n%10 == r }), note)
		k.upsert(t, keysWhere(keys, func(n int64) bool { return n%50 == r }), note+"b") // twice in one run
		k.remove(t, keysWhere(keys, func(n int64) bool { return n%37 == r }))           // some updated just before
		k.upsert(t, keysWhere(keys, func(n int64) bool { return n%37 == r-1 }), note+"again")
		run("run " + strconv.FormatInt(r, 10))
	}
	sluiceState := func() keyState {
		var ns []int64
		var notes []string
		err := c.QueryValues(ctx, table.Query{Columns: []string{"n", "note"}}, true, func(_ []table.Column, vals []any) error {
			ns = append(ns, vals[0].(int64))
			note, _ := vals[1].(string)
			notes = append(notes, note)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := readState("sluice's query", ns, notes)
		if err != nil {
			t.Error(err)
		}
		return got
	}

	// Trino: the catalog file of docs/cold-tier.md, as a catalog of the
	// package's server.
	props := docBlock(t, trinoRESTMarker, [][2]string{
		{"http://catalog:8181", rest.URI},
		{"http://127.0.0.1:7070", s3.Endpoint},
		{"us-east-1", coldtest.Region},
	})
	tr.AddCatalog(ctx, t, "keyed", props)
	trinoRows := func(sql string) [][]any {
		t.Helper()
		_, rows, err := tr.Query(ctx, sql)
		if err != nil {
			t.Fatalf("Trino: %s: %v", sql, err)
		}
		return rows
	}
	trinoInt := func(v any) int64 {
		t.Helper()
		n, err := v.(json.Number).Int64()
		if err != nil {
			t.Fatalf("Trino number %v: %v", v, err)
		}
		return n
	}
	trinoState := func(when string) keyState {
		t.Helper()
		var ns []int64
		var notes []string
		for _, r := range trinoRows("SELECT n, note FROM keyed.sluice.events") {
			ns = append(ns, trinoInt(r[0]))
			note, _ := r[1].(string)
			notes = append(notes, note)
		}
		got, err := readState("Trino "+when, ns, notes)
		if err != nil {
			t.Error(err)
		}
		return got
	}
	// deleteFiles counts the current snapshot's position delete files
	// (content 1 of the files metadata table).
	deleteFiles := func() int64 {
		return trinoInt(trinoRows(`SELECT count(*) FROM keyed.sluice."events$files" WHERE content = 1`)[0][0])
	}

	if d := k.want.diff(sluiceState()); d != "" {
		t.Errorf("sluice's query before maintenance: %s", d)
	}
	if n := deleteFiles(); n < 6 {
		t.Fatalf("%d position delete files after seven runs, want at least one per run after the first", n)
	}
	if d := k.want.diff(trinoState("before maintenance")); d != "" {
		t.Errorf("Trino before maintenance: %s", d)
	}
	before := trinoInt(trinoRows(`SELECT snapshot_id FROM keyed.sluice."events$snapshots" ORDER BY committed_at DESC LIMIT 1`)[0][0])

	ms, err := c.Maintain(ctx, coldtier.MaintainOptions{NoExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("maintenance: %+v", ms)
	if n := deleteFiles(); n != 0 {
		t.Errorf("%d position delete files after maintenance, want none (the rewrite applies them)", n)
	}
	if d := k.want.diff(trinoState("after maintenance")); d != "" {
		t.Errorf("Trino after maintenance: %s", d)
	}
	if d := k.want.diff(sluiceState()); d != "" {
		t.Errorf("sluice's query after maintenance: %s", d)
	}

	// Spark: the REST block of docs/cold-tier.md; one JVM reads the
	// snapshot before maintenance (time travel) and the current one.
	conf := docBlock(t, sparkRESTMarker, [][2]string{
		{"http://catalog:8181", rest.URI},
		{"http://127.0.0.1:7070", s3.Endpoint},
		{"us-east-1", coldtest.Region},
	})
	confPath := filepath.Join(dir, "spark-defaults.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		fmt.Sprintf("SELECT n, note FROM sluice.sluice.events VERSION AS OF %d", before),
		"SELECT n, note FROM sluice.sluice.events",
	}
	out, err := spark.Run(ctx, confPath, stmts...)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range parseSpark(t, out, len(stmts)) {
		when := [...]string{"before maintenance (time travel)", "after maintenance"}[i]
		var ns []int64
		var notes []string
		for _, r := range res.Rows {
			n, err := r["n"].(json.Number).Int64()
			if err != nil {
				t.Fatalf("Spark n %v: %v", r["n"], err)
			}
			ns = append(ns, n)
			note, _ := r["note"].(string)
			notes = append(notes, note)
		}
		got, err := readState("Spark "+when, ns, notes)
		if err != nil {
			t.Error(err)
		}
		if d := k.want.diff(got); d != "" {
			t.Errorf("Spark %s: %s", when, d)
		}
	}
	if t.Failed() {
		t.Logf("the state: %d live keys; statements: %s", len(k.want), strings.Join(stmts, "; "))
	}
}
