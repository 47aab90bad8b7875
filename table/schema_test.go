package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStaticSchemaRejectsWholeBatchNamingRowAndColumn(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "st", HashBy: "id", SortBy: "ts", Columns: []Column{
		{"ts", Timestamp}, {"id", Int64}, {"price", Float64}, {"ok", Bool}, {"name", String},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// CSV-like strings parse into the static types.
	good := []Row{{"ts": "1772359200", "id": "7", "price": "2.5", "ok": "true", "name": "a"}}
	if err := tb.Append(ctx, good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		row            Row
		column, reason string
	}{
		{Row{"id": "x7"}, "id", "not an int64"},
		{Row{"id": 1, "price": "cheap"}, "price", "not a float64"},
		{Row{"id": 1, "ok": 3}, "ok", "not a bool"},
		{Row{"id": 1, "ts": "yesterday"}, "ts", "neither RFC 3339"},
		{Row{"id": 1.5}, "id", "not a whole int64"},
		{Row{"id": 1, "extra": 1}, "extra", "not in the static schema"},
	} {
		rows := []Row{{"id": 1}, {"id": 2}, tc.row}
		err := tb.Append(ctx, rows)
		var se *SchemaError
		if !errors.As(err, &se) || se.Row != 2 || se.Column != tc.column || !strings.Contains(se.Reason, tc.reason) {
			t.Errorf("row %v: error %v, want a SchemaError for row 2 column %q (%s)", tc.row, err, tc.column, tc.reason)
		}
	}
	got := collect(t, tb, Query{})
	if len(got) != 1 || got[0]["id"] != int64(7) || got[0]["price"] != 2.5 || got[0]["ok"] != true ||
		!got[0]["ts"].(time.Time).Equal(time.Unix(1772359200, 0)) {
		t.Fatalf("store holds %v, want only the good row (rejected batches leave nothing)", got)
	}
}

func TestInferredSchemaWidensAndKeepsPartitions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	tb, err := s.Table(Config{Name: "w", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	ts := t0.Format(time.RFC3339)
	steps := []struct {
		rows []Row
		typ  Type
	}{
		{[]Row{{"ts": ts, "k": int64(5), "v": int64(1)}}, Int64},
		{[]Row{{"ts": ts, "k": 5.0, "v": 2.5}}, Float64},
		{[]Row{{"ts": ts, "k": "5", "v": "three"}}, String},
	}
	for i, st := range steps {
		if err := tb.Append(ctx, st.rows); err != nil {
			t.Fatal(err)
		}
		sc := tb.Schema()
		k := slices.IndexFunc(sc, func(c Column) bool { return c.Name == "v" })
		if k < 0 || sc[k].Type != st.typ {
			t.Fatalf("step %d: schema %v, want v %v", i, sc, st.typ)
		}
	}
	s.Close()
	s = openStore(t, dir)
	defer s.Close()
	tb, err = s.Table(Config{Name: "w", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []any{5, "5", 5.0} {
		got := collect(t, tb, Query{HashIn: []any{key}, Columns: []string{"k", "v"}})
		var vs []string
		for _, r := range got {
			if r["k"] != "5" {
				t.Fatalf("k read back as %#v, want string 5", r["k"])
			}
			vs = append(vs, r["v"].(string))
		}
		slices.Sort(vs)
		if want := []string{"1", "2.5", "three"}; !slices.Equal(vs, want) {
			t.Fatalf("partition %v: v = %v, want %v (old blocks converted to the widened type)", key, vs, want)
		}
	}
	if _, err := s.Table(Config{Name: "w", HashBy: "other", SortBy: "ts"}); err == nil {
		t.Fatal("changing hashBy of an existing table should fail")
	}
}

func TestParseTime(t *testing.T) {
	want := time.Date(2026, 3, 1, 10, 0, 0, 123000000, time.UTC).UnixNano()
	sec := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Unix()
	for _, in := range []any{
		"2026-03-01T10:00:00.123Z", "2026-03-01T18:00:00.123+08:00",
		sec*1000 + 123, float64(sec) + 0.123, "1772359200.123", (sec*1000 + 123) * 1000, (sec*1000 + 123) * 1000000,
		time.Date(2026, 3, 1, 10, 0, 0, 123000000, time.UTC),
	} {
		got, err := ParseTime(in)
		if err != nil || abs64(got-want) > 1000 { // float seconds round at the µs
			t.Errorf("ParseTime(%#v) = %v, %v; want %v", in, time.Unix(0, got).UTC(), err, time.Unix(0, want).UTC())
		}
	}
	if got, err := ParseTime(sec); err != nil || got != sec*1e9 {
		t.Errorf("ParseTime(seconds) = %d, %v", got, err)
	}
	for _, bad := range []any{"soon", true, "2026-13-01T00:00:00Z"} {
		if _, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%#v) accepted", bad)
		}
	}
}

func TestRowWithoutEventTimeGetsIngestionTime(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "i", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(context.Background(), []Row{{"a": 1}, {"a": 2, "ts": nil}}); err != nil {
		t.Fatal(err)
	}
	now := s.opts.Now()
	got := collect(t, tb, Query{})
	if len(got) != 2 || !got[0]["ts"].(time.Time).Equal(now) || !got[1]["ts"].(time.Time).Equal(now) {
		t.Fatalf("rows %v, want ts = ingestion time %v", got, now)
	}
}

func TestNullOnlyColumnIsNotAdded(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "n", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := tb.Append(ctx, []Row{{"ts": t0, "a": int64(1), "z": nil}}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, []Row{{"ts": t0, "a": int64(2), "z": nil}, {"ts": t0, "a": 3.5}}); err != nil {
		t.Fatal(err)
	}
	if got, want := tb.Schema(), []Column{{"ts", Timestamp}, {"a", Float64}}; !slices.Equal(got, want) {
		t.Fatalf("schema %v, want %v", got, want)
	}
	var as []float64
	for _, r := range collect(t, tb, Query{}) {
		as = append(as, r["a"].(float64))
	}
	slices.Sort(as)
	if !slices.Equal(as, []float64{1, 2, 3.5}) {
		t.Fatalf("a = %v", as)
	}
}

// Unix times whose nanoseconds do not fit an int64 used to wrap silently
// (9300000000 s stored as 1680-02-24): in every unit band they are errors,
// and the largest values that fit still convert exactly.
func TestParseTimeRejectsOutOfRange(t *testing.T) {
	for _, in := range []any{
		int64(9300000000), int64(99999999999), int64(-99999999999999), int64(9300000000000), int64(-9300000000000000),
		"9300000000", 9300000000.0, json.Number("99999999999"), int64(math.MinInt64),
	} {
		if got, err := ParseTime(in); err == nil {
			t.Errorf("ParseTime(%#v) = %v, want an out-of-range error", in, time.Unix(0, got).UTC())
		} else if !strings.Contains(err.Error(), "out of range") {
			t.Errorf("ParseTime(%#v): error %q does not say out of range", in, err)
		}
	}
	for in, want := range map[int64]int64{
		9223372036: 9223372036e9, -9223372036: -9223372036e9,
		9223372036854: 9223372036854e6, 9223372036854775: 9223372036854775e3,
	} {
		if got, err := ParseTime(in); err != nil || got != want {
			t.Errorf("ParseTime(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "r", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	err = tb.Append(context.Background(), []Row{{"ts": int64(1714557600)}, {"ts": int64(9300000000)}})
	var se *SchemaError
	if !errors.As(err, &se) || se.Row != 1 || se.Column != "ts" {
		t.Fatalf("Append of an out-of-range time: %v, want a SchemaError on row 1, column ts", err)
	}
}

// TestColumnLimitRefusesWideRows: rows that would take an inferred schema
// past SetMaxColumns are listed in a ColumnLimitError (a SchemaError about
// the first, wrapping ErrTooManyColumns); nothing of the append is stored
// and the schema does not change; an Appender stays usable for the other
// rows; a Store batch (the stream path) fails whole, as with any
// SchemaError.
func TestColumnLimitRefusesWideRows(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "w", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	tb.SetMaxColumns(5) // ts and four more
	wide := func(prefix string, n int) Row {
		r := Row{}
		for i := 0; i < n; i++ {
			r[fmt.Sprintf("%s%d", prefix, i)] = int64(i)
		}
		return r
	}
	rows := []Row{wide("a", 3), wide("b", 2), wide("a", 4), wide("c", 1)}
	// a0-a2 make 4 columns; b0,b1 would make 6; a3 makes 5; c0 would make 6.
	err = tb.Append(ctx, rows)
	var cle *ColumnLimitError
	var se *SchemaError
	if !errors.As(err, &cle) || !errors.As(err, &se) || !errors.Is(err, ErrTooManyColumns) {
		t.Fatalf("Append: %v, want a ColumnLimitError", err)
	}
	if !slices.Equal(cle.Rows, []int{1, 3}) || !slices.Equal(cle.Columns, []int{6, 6}) || se.Row != 1 || se.Column != "b0" {
		t.Fatalf("left out rows %v (columns %v), first row %d column %q: want [1 3], [6 6], 1, b0", cle.Rows, cle.Columns, se.Row, se.Column)
	}
	if got := len(tb.Schema()); got != 1 {
		t.Fatalf("a refused append changed the schema to %d columns", got)
	}
	b, err := tb.NewAppender()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Add(ctx, rows); !errors.Is(err, ErrTooManyColumns) {
		t.Fatalf("Appender.Add: %v", err)
	}
	if err := b.Add(ctx, []Row{rows[0], rows[2]}); err != nil {
		t.Fatalf("Appender.Add of the rows that fit, after a ColumnLimitError: %v", err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(tb.Schema()); got != 5 {
		t.Fatalf("schema has %d columns, want 5", got)
	}
	// Columns the schema has are no new columns: a wide row of them fits.
	if err := tb.Append(ctx, []Row{wide("a", 4)}); err != nil {
		t.Fatal(err)
	}
	batch, err := s.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	if err := batch.Append(tb, []Row{wide("z", 1)}); !errors.As(err, &se) || se.Row != 0 {
		t.Fatalf("Store batch Append: %v", err)
	}
}
