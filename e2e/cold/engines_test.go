package cold

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// What the engine tests (Spark, Trino) share: the rows sluice compacts,
// sluice's own view of them, and the comparison with an engine's view.

const docPath = "../../docs/cold-tier.md"

var day0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// inputRows is the rows the test appends: every sluice type, nulls in
// each nullable column, strings a JSON writer must escape, int64
// values past float64's 53 bits, floats at the ends of their range. The
// second run's rows (day 2) add two columns (the schema widens); the first
// run's files lack them, and every reader must show them as null.
func inputRows(first, n int, days int, widen bool) []table.Row {
	rows := make([]table.Row, 0, n)
	for i := range n {
		k := first + i
		day := k % days
		if widen {
			day = 2
		}
		r := table.Row{
			"user": fmt.Sprintf("u%d", k%4),
			"ts":   day0.Add(time.Duration(day)*24*time.Hour + time.Duration(k)*time.Second + time.Duration(k)*time.Microsecond),
			"n":    int64(k),
			"big":  int64(1)<<62 + int64(k)*7 + 1, // not exact in a float64
			"f":    float64(k) / 7,
			"ok":   k%3 == 0,
			"note": fmt.Sprintf("note %d: \"quoted\", tab\t, ünïcode ✓, backslash \\", k),
			"doc":  json.RawMessage(fmt.Sprintf(`{"k":%d,"a":[1,2.5,"x"],"o":{"s":"t\"q"}}`, k)),
			"seen": day0.Add(-time.Duration(k) * time.Hour),
		}
		switch k % 7 {
		case 0:
			r["f"], r["note"], r["doc"], r["seen"], r["ok"] = nil, nil, nil, nil, nil
		case 1:
			r["note"] = ""
			r["f"] = 1.5e300
		case 2:
			r["f"] = -2.5e-300
		case 3:
			r["big"] = int64(-1) << 63
		}
		if widen {
			r["extra"] = fmt.Sprintf("extra %d", k)
			r["level"] = int64(k % 5)
			if k%4 == 0 {
				r["extra"], r["level"] = nil, nil
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// lake is one sluice table compacted into an Iceberg table that an engine
// reads through catalog.
type lake struct {
	catalog string // the engine's catalog name
	ident   string // <catalog>.<namespace>.<table>
	cfg     coldtier.Config
	cols    []table.Column
	want    [][]any // sluice's rows (normalized), sorted by n
	runs    []coldtier.Stats
}

// compactRESTLake starts Iceberg's REST catalog server in dir, its
// warehouse on the test's S3 server through S3FileIO (as the documented
// Spark and Trino setups have it), stopped when t ends, and compacts the
// test's rows into it (compactLake) under warehouse, as node. It returns
// the lake and the catalog's URI.
func compactRESTLake(t *testing.T, dir, warehouse, node string) (*lake, string) {
	t.Helper()
	rest, err := coldtest.StartREST(dir,
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO", "CATALOG_S3_ENDPOINT="+s3.Endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true", "CATALOG_CLIENT_REGION="+coldtest.Region)
	coldtest.Require(t, err)
	t.Cleanup(rest.Stop)
	return compactLake(t, dir, coldtier.Config{
		Warehouse: warehouse,
		S3:        coldtier.S3{Endpoint: s3.Endpoint, Region: coldtest.Region, PathStyle: true},
		Catalog:   coldtier.Catalog{Type: "rest", URI: rest.URI},
		Node:      node,
		StateDir:  dir,
	}), rest.URI
}

// compactLake fills a store with two days, compacts them (run 1),
// appends a third day with two new columns, compacts it (run 2), then
// reads every row back with sluice's own query over both tiers.
func compactLake(t *testing.T, dir string, cfg coldtier.Config) *lake {
	t.Helper()
	ctx := context.Background()
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts"}) // schema inferred, so it widens
	if err != nil {
		t.Fatal(err)
	}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := &lake{cfg: cfg}
	input := inputRows(0, 400, 2, false)
	if err := tb.Append(ctx, input); err != nil {
		t.Fatal(err)
	}
	run, err := c.Compact(ctx, day0.Add(48*time.Hour), coldtier.Options{Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	l.runs = append(l.runs, run)
	widened := inputRows(400, 150, 1, true)
	if err := tb.Append(ctx, widened); err != nil {
		t.Fatal(err)
	}
	input = append(input, widened...)
	if run, err = c.Compact(ctx, day0.Add(72*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}
	l.runs = append(l.runs, run)
	for i, r := range l.runs {
		if r.SnapshotID == 0 || r.Rows == 0 {
			t.Fatalf("run %d: %+v, want a snapshot with rows", i+1, r)
		}
	}

	err = c.QueryValues(ctx, table.Query{}, true, func(cols []table.Column, vals []any) error {
		l.cols = cols
		row := make([]any, len(vals))
		for i, v := range vals {
			row[i] = normalize(t, cols[i].Type, v)
		}
		l.want = append(l.want, row)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	nAt := columnIndex(t, l.cols, "n")
	sort.Slice(l.want, func(i, j int) bool { return l.want[i][nAt].(int64) < l.want[j][nAt].(int64) })

	// sluice's rows are the input (a check of the reference itself, so an
	// engine agreeing with sluice cannot hide a loss both share).
	if len(l.want) != len(input) {
		t.Fatalf("sluice's query returned %d rows, %d appended", len(l.want), len(input))
	}
	for _, r := range input {
		got := l.want[r["n"].(int64)]
		for i, col := range l.cols {
			if w := normalize(t, col.Type, r[col.Name]); !reflect.DeepEqual(got[i], w) {
				t.Fatalf("sluice's query, row n=%d column %s: %#v, appended %#v", r["n"], col.Name, got[i], w)
			}
		}
	}
	return l
}

// normalize makes a value of sluice type typ, from sluice (Go values) or
// from an engine's JSON (json.Number, strings, bools), comparable with
// reflect.DeepEqual: int64, float64, bool, string, timestamps as unix
// microseconds (the Iceberg unit), JSON as its text.
func normalize(t *testing.T, typ table.Type, v any) any {
	t.Helper()
	if v == nil {
		return nil
	}
	switch x := v.(type) {
	case time.Time:
		return x.UnixMicro()
	case json.RawMessage:
		return string(x)
	case []byte:
		return string(x)
	case json.Number:
		var (
			out any
			err error
		)
		switch typ {
		case table.Int64, table.Timestamp:
			out, err = strconv.ParseInt(string(x), 10, 64)
		case table.Float64:
			out, err = strconv.ParseFloat(string(x), 64)
		default:
			err = fmt.Errorf("a number for a %v column", typ)
		}
		if err != nil {
			t.Fatalf("value %s: %v", x, err)
		}
		return out
	}
	return v
}

func columnIndex(t *testing.T, cols []table.Column, name string) int {
	t.Helper()
	for i, c := range cols {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("no column %q in %v", name, cols)
	return -1
}

// docBlock returns the fenced block (Spark's spark-defaults.conf lines,
// a Trino catalog file) that follows marker in docs/cold-tier.md with each placeholder replaced; a placeholder that
// is not in the block fails the test.
func docBlock(t *testing.T, marker string, replace [][2]string) string {
	t.Helper()
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte(marker))
	if !ok {
		t.Fatalf("%s: no %q", docPath, marker)
	}
	_, after, ok = bytes.Cut(after, []byte("```"))
	if ok {
		_, after, ok = bytes.Cut(after, []byte("\n")) // the fence's info string
	}
	block, _, closed := bytes.Cut(after, []byte("\n```"))
	if !ok || !closed {
		t.Fatalf("%s: no fenced block after %q", docPath, marker)
	}
	conf := string(block)
	for _, r := range replace {
		if !strings.Contains(conf, r[0]) {
			t.Fatalf("%s: the block after %q no longer has %q; update the test's placeholders", docPath, marker, r[0])
		}
		conf = strings.ReplaceAll(conf, r[0], r[1])
	}
	return conf
}

// engineView is what an engine returned for a lake: the column types by
// name, the rows (col -> value, each timestamp column also as
// <col>__micros, exact), the partitions metadata table (day,
// record_count), the snapshots (snapshot_id, summary).
type engineView struct {
	engine     string
	types      map[string]any
	rows       []map[string]any
	partitions []map[string]any
	snapshots  []map[string]any
}

// check compares an engine's view of l with sluice's rows and runs;
// engineTypes maps each sluice type to the engine's name of its Iceberg
// type.
func (l *lake) check(t *testing.T, v engineView, engineTypes map[table.Type]string) {
	t.Helper()
	name := v.engine + " via " + l.catalog

	// Types: every sluice column, with the engine's type of its Iceberg type.
	for _, col := range l.cols {
		if got := v.types[col.Name]; got != engineTypes[col.Type] {
			t.Errorf("%s: type of column %s (%v) is %v, want %s", name, col.Name, col.Type, got, engineTypes[col.Type])
		}
	}
	if len(v.types) != len(l.cols) {
		t.Errorf("%s: columns %v, sluice's %v", name, v.types, l.cols)
	}

	// Rows and values.
	if len(v.rows) != len(l.want) {
		t.Fatalf("%s: read %d rows, sluice %d", name, len(v.rows), len(l.want))
	}
	bad := 0
	for i, sr := range v.rows {
		for j, col := range l.cols {
			key := col.Name
			if col.Type == table.Timestamp {
				key += "__micros" // exact; Spark's JSON and Trino's text may round
			}
			raw, ok := sr[key]
			if !ok {
				t.Fatalf("%s: row %d has no column %s: %v", name, i, key, sr)
			}
			if got := normalize(t, col.Type, raw); !reflect.DeepEqual(got, l.want[i][j]) {
				if bad++; bad <= 10 {
					t.Errorf("%s: row %d column %s: %#v, sluice %#v", name, i, col.Name, got, l.want[i][j])
				}
			}
		}
	}

	// Day partitioning: one partition per UTC day of ts, with its rows.
	wantDays := map[string]int64{}
	tsAt := columnIndex(t, l.cols, "ts")
	for _, r := range l.want {
		wantDays[time.UnixMicro(r[tsAt].(int64)).UTC().Format(time.DateOnly)]++
	}
	gotDays := map[string]int64{}
	for _, p := range v.partitions {
		n, err := p["record_count"].(json.Number).Int64()
		if err != nil {
			t.Fatal(err)
		}
		gotDays[fmt.Sprint(p["day"])] = n
	}
	if !reflect.DeepEqual(gotDays, wantDays) {
		t.Errorf("%s: partitions %v, want the day partitions %v", name, gotDays, wantDays)
	}

	// Snapshot summaries: each snapshot names its sluice run and node;
	// each run's snapshots add its rows (Iceberg's added-records); the last snapshot is the last
	// run's, with its watermark.
	runRows := map[string]int64{}
	var runOrder []string // runs in commit order
	var lastWatermark string
	for _, s := range v.snapshots {
		sum, _ := s["summary"].(map[string]any)
		run, _ := sum["sluice.run"].(string)
		if run == "" || sum["sluice.node"] != l.cfg.Node {
			t.Errorf("%s: snapshot %v: want sluice.run and sluice.node=%s", name, s, l.cfg.Node)
			continue
		}
		n, err := strconv.ParseInt(fmt.Sprint(sum["added-records"]), 10, 64)
		if err != nil {
			t.Errorf("%s: snapshot %v: added-records: %v", name, s, err)
		}
		if _, seen := runRows[run]; !seen {
			runOrder = append(runOrder, run)
		}
		runRows[run] += n
		lastWatermark = fmt.Sprint(sum["sluice.watermark"])
	}
	if len(runOrder) != len(l.runs) {
		t.Fatalf("%s: snapshots of %d runs (%v), want %d", name, len(runOrder), runRows, len(l.runs))
	}
	for i, run := range runOrder {
		if runRows[run] != l.runs[i].Rows {
			t.Errorf("%s: run %d (%s): its snapshots add %d rows, it compacted %d", name, i+1, run, runRows[run], l.runs[i].Rows)
		}
	}
	if want := strconv.FormatInt(l.runs[len(l.runs)-1].Watermark.UnixNano(), 10); lastWatermark != want {
		t.Errorf("%s: last snapshot's sluice.watermark %s, want %s", name, lastWatermark, want)
	}
	if id := v.snapshots[len(v.snapshots)-1]["snapshot_id"]; fmt.Sprint(id) != strconv.FormatInt(l.runs[len(l.runs)-1].SnapshotID, 10) {
		t.Errorf("%s: last snapshot %v, sluice committed %d", name, id, l.runs[len(l.runs)-1].SnapshotID)
	}
}
