package table

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// byColumns is rows held by column, as ingest.DecodeColumns gives them.
func byColumns(rows []Row) *colbatch.Batch {
	cb := new(colbatch.Batch)
	for i, row := range rows {
		r := cb.AddRow(i + 1)
		for k, v := range row {
			cb.Set(cb.ColumnOf(k), r, v)
		}
	}
	return cb
}

// TestAddColumnsMatchesAdd: parts added by column store what Add stores
// and fail with Add's error (row, column, reason), for a static schema
// (conversions, values that do not fit, a column it lacks) and an inferred
// one (widening, new columns, null-only columns, the column limit).
func TestAddColumnsMatchesAdd(t *testing.T) {
	ctx := context.Background()
	static := []Column{{"ts", Timestamp}, {"k", String}, {"n", Int64}, {"f", Float64}, {"b", Bool}, {"j", JSON}, {"s", String}}
	good := []Row{
		{"ts": t0.Format(time.RFC3339Nano), "k": "a", "n": int64(1), "f": 1.5, "b": true, "j": map[string]any{"x": int64(1)}, "s": "x"},
		{"ts": t0.Unix(), "k": int64(7), "n": 2.0, "f": int64(3), "b": "false", "j": `{"y":[1]}`, "s": 2.5},
		{"ts": float64(t0.Unix()) + 0.25, "k": "a", "n": nil, "f": json.Number("4.5"), "b": false, "j": nil, "s": true},
		{"k": "b", "n": int64(-3), "s": int64(9)},
	}
	cases := []struct {
		name    string
		columns []Column
		limit   int
		parts   [][]Row
	}{
		{"static", static, 0, [][]Row{
			good,
			{{"ts": t0, "k": "a", "n": 2.5}},        // not a whole int64
			{{"ts": t0, "k": "a"}, {"ts": "never"}}, // no time
			{{"ts": t0, "k": "a", "n": "12"}, {"x": 1}}, // a column the schema lacks
			{{"ts": t0, "k": "a", "x": nil}},            // even null
			{{"ts": t0, "k": "a", "b": int64(1)}},       // not a bool
			{{"ts": t0, "k": "a", "j": "{"}},            // not JSON
			{{"ts": int64(1e18), "k": "a", "f": "1e3"}, {"ts": "2026-03-01T10:00:00Z", "n": json.Number("9223372036854775808")}},
		}},
		{"inferred", nil, 0, [][]Row{
			{{"ts": t0, "k": "a", "n": int64(1)}, {"ts": t0, "k": "b", "n": int64(2), "z": nil}},
			{{"ts": t0, "k": "a", "n": int64(3)}},
			{{"ts": t0, "k": "a", "n": 2.5, "new": "x"}},
			{{"ts": t0, "k": "a", "n": "text"}},
			{{"ts": t0, "k": int64(5), "n": 1.0, "new": int64(1), "o": map[string]any{"a": "b"}}},
			{{"ts": "bad", "k": "a"}},
			{{"ts": t0, "k": "c", "n": json.Number("12345678901234567890")}},
		}},
		{"limit", nil, 4, [][]Row{
			{{"ts": t0, "k": "a", "n": int64(1)}},
			{{"ts": t0, "k": "a", "n": int64(1), "x": 1.5, "y": 2.5}, {"ts": t0, "k": "a", "x": 1.5}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// 0: Appender.Add, 1: Appender.AddColumns, 2: Batch.Append, 3: Batch.AppendColumns.
			var tables [4]*Table
			var stores [4]*Store
			for i := range tables {
				s := openStore(t, t.TempDir())
				t.Cleanup(func() { s.Close() })
				tb, err := s.Table(Config{Name: "t", HashBy: "k", SortBy: "ts", Columns: tc.columns})
				if err != nil {
					t.Fatal(err)
				}
				tb.SetMaxColumns(tc.limit)
				tables[i], stores[i] = tb, s
			}
			for p, part := range tc.parts {
				var errs [4]string
				for i, tb := range tables {
					var err error
					if i < 2 {
						a, aerr := tb.NewAppender()
						if aerr != nil {
							t.Fatal(aerr)
						}
						if i == 0 {
							err = a.Add(ctx, part)
						} else {
							err = a.AddColumns(ctx, byColumns(part))
						}
						if err == nil {
							err = a.Commit(ctx)
						}
						a.Close()
					} else {
						b, berr := stores[i].NewBatch()
						if berr != nil {
							t.Fatal(berr)
						}
						if i == 2 {
							err = b.Append(tb, part)
						} else {
							err = b.AppendColumns(tb, byColumns(part))
						}
						if err == nil {
							err = b.Commit(ctx)
						}
						b.Close()
					}
					errs[i] = fmt.Sprint(err)
				}
				if errs[0] != errs[1] || errs[2] != errs[3] {
					t.Fatalf("part %d:\nAddColumns: %s\nAdd:        %s\nBatch.AppendColumns: %s\nBatch.Append:        %s", p, errs[1], errs[0], errs[3], errs[2])
				}
			}
			for _, pair := range [][2]int{{0, 1}, {2, 3}} {
				want, got := collect(t, tables[pair[0]], Query{}), collect(t, tables[pair[1]], Query{})
				if len(want) == 0 || fmt.Sprint(sortedRows(got)) != fmt.Sprint(sortedRows(want)) {
					t.Fatalf("stored by column:\n%v\nas maps:\n%v", sortedRows(got), sortedRows(want))
				}
				if fmt.Sprint(tables[pair[0]].Schema()) != fmt.Sprint(tables[pair[1]].Schema()) {
					t.Fatalf("schema by column %v, as maps %v", tables[pair[1]].Schema(), tables[pair[0]].Schema())
				}
			}
		})
	}
}

func sortedRows(rows []Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprint(r)
	}
	slices.Sort(out)
	return out
}

// TestBatchPublishesItsWideningAtCommit: appends read the schema without
// the table's lock, so a Batch that widened it (and holds the lock until it
// ends) must not show the wider schema before it commits: an append taking
// its new column would store blocks of a column a rollback removes.
func TestBatchPublishesItsWideningAtCommit(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "t", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	has := func(name string) bool {
		schema, _ := tb.current()
		return slices.ContainsFunc(schema, func(c Column) bool { return c.Name == name })
	}
	for _, commit := range []bool{false, true} {
		b, err := s.NewBatch()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Append(tb, []Row{{"ts": t0, "k": "a", "w": int64(1)}}); err != nil {
			t.Fatal(err)
		}
		early := has("w")
		if commit {
			if err := b.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		b.Close() // before any Fatal: an open Batch holds the table (Close of the store waits)
		if early {
			t.Fatalf("the widening was visible before the batch ended")
		}
		if has("w") != commit {
			t.Fatalf("committed %v: the schema has w: %v", commit, has("w"))
		}
	}
}

// TestOneBlockPerGroup: an append writes one block per (partition, time
// bucket), whether its rows alternate between few partitions (found by a
// scan) or many (found by a map).
func TestOneBlockPerGroup(t *testing.T) {
	for _, parts := range []int{1, 10, 40} {
		s := openStore(t, t.TempDir())
		tb, err := s.Table(Config{Name: "t", HashBy: "k", SortBy: "ts"})
		if err != nil {
			t.Fatal(err)
		}
		var rows []Row
		for i := range 1000 {
			rows = append(rows, Row{"ts": t0.Add(time.Duration(i) * time.Millisecond), "k": int64(i % parts), "n": int64(i)})
		}
		if err := tb.Append(context.Background(), rows); err != nil {
			t.Fatal(err)
		}
		if got := tb.Stats().BlocksWritten; got != int64(parts) {
			t.Errorf("%d partitions: %d blocks", parts, got)
		}
		if got := len(collect(t, tb, Query{})); got != 1000 {
			t.Errorf("%d partitions: %d rows back", parts, got)
		}
		s.Close()
	}
}

// TestPartsAcrossAWidening: an Appender whose parts are converted with
// different schemas (another append widened it between them) encodes the
// earlier parts first and keeps every value of the later one (each part's
// columns live in a pooled slab until encoded), by column and as maps.
func TestPartsAcrossAWidening(t *testing.T) {
	ctx := context.Background()
	for _, byCol := range []bool{false, true} {
		s := openStore(t, t.TempDir())
		tb, err := s.Table(Config{Name: "t", HashBy: "k", SortBy: "ts"})
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.Append(ctx, []Row{{"ts": t0, "k": "a", "v": int64(1)}}); err != nil {
			t.Fatal(err)
		}
		a, err := tb.NewAppender()
		if err != nil {
			t.Fatal(err)
		}
		add := func(rows []Row) {
			t.Helper()
			if byCol {
				err = a.AddColumns(ctx, byColumns(rows))
			} else {
				err = a.Add(ctx, rows)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		add([]Row{{"ts": t0, "k": "a", "v": int64(10)}})
		if err := tb.Append(ctx, []Row{{"ts": t0, "k": "b", "w": "x"}}); err != nil { // widens
			t.Fatal(err)
		}
		add([]Row{{"ts": t0, "k": "a", "v": int64(20), "w": "y"}, {"ts": t0, "k": "a", "v": int64(30)}})
		if err := a.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		a.Close()
		got := sortedRows(collect(t, tb, Query{}))
		want := sortedRows([]Row{
			{"ts": t0, "k": "a", "v": int64(1), "w": nil}, {"ts": t0, "k": "a", "v": int64(10), "w": nil},
			{"ts": t0, "k": "b", "v": nil, "w": "x"}, {"ts": t0, "k": "a", "v": int64(20), "w": "y"},
			{"ts": t0, "k": "a", "v": int64(30), "w": nil},
		})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("by column %v:\n%v\nwant\n%v", byCol, got, want)
		}
		s.Close()
	}
}
