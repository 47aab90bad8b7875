package table

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coltype"
)

// nativeSchema is a declared schema with a column of each type beyond
// json.
var nativeSchema = []Column{
	{Name: "ts", Type: Timestamp}, {Name: "d", Type: Date}, {Name: "b", Type: Bytes},
	{Name: "u", Type: UUID}, {Name: "tod", Type: TimeOfDay}, {Name: "amount", Type: coltype.Decimal(10, 2)},
}

// nativeInput is the rows as JSON gives them (text, base64, numbers), and
// the values a query must return for them.
func nativeInput() (in []Row, want []Row) {
	in = []Row{
		{"ts": t0, "d": "2026-11-29", "b": "AAEC/w==", "u": "123e4567-e89b-12d3-a456-426614174000", "tod": "13:45:01.000123", "amount": "12.50"},
		{"ts": t0.Add(time.Second), "d": "1969-12-31", "b": "", "u": "00000000-0000-0000-0000-000000000001", "tod": "00:00:00", "amount": -0.01},
		{"ts": t0.Add(2 * time.Second), "d": nil, "b": nil, "u": nil, "tod": nil, "amount": int64(99999999)},
	}
	want = []Row{
		{"ts": t0, "d": coltype.DateValue(20786), "b": []byte{0, 1, 2, 255}, "u": coltype.UUIDValue{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0},
			"tod": coltype.TimeOfDayValue(49501000123), "amount": coltype.DecimalValue{Unscaled: 1250, Scale: 2}},
		{"ts": t0.Add(time.Second), "d": coltype.DateValue(-1), "b": []byte{}, "u": coltype.UUIDValue{15: 1},
			"tod": coltype.TimeOfDayValue(0), "amount": coltype.DecimalValue{Unscaled: -1, Scale: 2}},
		{"ts": t0.Add(2 * time.Second), "d": nil, "b": nil, "u": nil, "tod": nil, "amount": coltype.DecimalValue{Unscaled: 9999999900, Scale: 2}},
	}
	return in, want
}

// queryAll returns every row of q, cloned.
func queryAll(t *testing.T, tb *Table, q Query) []Row {
	t.Helper()
	var got []Row
	if err := tb.Query(context.Background(), q, func(r Row) error {
		c := Row{}
		for k, v := range r {
			c[k] = v
		}
		got = append(got, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b Row) int { return a["ts"].(time.Time).Compare(b["ts"].(time.Time)) })
	return got
}

// TestNativeTypes: a declared date, bytes, uuid, time of day and decimal
// column takes JSON's text forms (by Add and by AddColumns), stores them,
// reads them back as their values after the store reopens, and a where
// clause compares each in its own order.
func TestNativeTypes(t *testing.T) {
	ctx := context.Background()
	for _, byCols := range []bool{false, true} {
		dir := t.TempDir()
		s := openStore(t, dir)
		tb, err := s.Table(Config{Name: "n", SortBy: "ts", Columns: nativeSchema})
		if err != nil {
			t.Fatal(err)
		}
		in, want := nativeInput()
		b, err := tb.NewAppender()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if byCols {
			err = b.AddColumns(ctx, byColumns(in))
		} else {
			err = b.Add(ctx, in)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openStore(t, dir)
		tb, err = s.Table(Config{Name: "n", SortBy: "ts", Columns: nativeSchema})
		if err != nil {
			t.Fatal(err)
		}
		if got := queryAll(t, tb, Query{}); !reflect.DeepEqual(got, want) {
			t.Fatalf("byColumns %v: read back\n%v\nwant\n%v", byCols, got, want)
		}
		for _, c := range []struct {
			p    Predicate
			rows []int
		}{
			{Predicate{Column: "d", Op: Eq, Value: "2026-11-29"}, []int{0}},
			{Predicate{Column: "d", Op: Lt, Value: "1970-01-01"}, []int{1}},
			{Predicate{Column: "d", Op: IsNull}, []int{2}},
			{Predicate{Column: "b", Op: Eq, Value: "AAEC/w=="}, []int{0}},
			{Predicate{Column: "b", Op: Lt, Value: "AA=="}, []int{1}},
			// Bytes that read as a number still compare as bytes, not
			// as a string column's numbers ("9").
			{Predicate{Column: "b", Op: Lt, Value: "OQ=="}, []int{0, 1}},
			{Predicate{Column: "u", Op: Eq, Value: "123E4567-E89B-12D3-A456-426614174000"}, []int{0}},
			{Predicate{Column: "u", Op: Gt, Value: "00000000-0000-0000-0000-000000000001"}, []int{0}},
			{Predicate{Column: "u", Op: In, Values: []any{"00000000000000000000000000000001", nil}}, []int{1}},
			{Predicate{Column: "tod", Op: Ge, Value: "12:00"}, []int{0}},
			{Predicate{Column: "tod", Op: Lt, Value: "00:00:00.000001"}, []int{1}},
			{Predicate{Column: "amount", Op: Gt, Value: 12.4}, []int{0, 2}},
			{Predicate{Column: "amount", Op: Eq, Value: "12.5"}, []int{0}},
			{Predicate{Column: "amount", Op: Lt, Value: int64(0)}, []int{1}},
			{Predicate{Column: "amount", Op: In, Values: []any{"-0.010", "99999999"}}, []int{1, 2}},
		} {
			got := queryAll(t, tb, Query{Where: []Predicate{c.p}})
			var wantRows []Row
			for _, r := range c.rows {
				wantRows = append(wantRows, want[r])
			}
			if !reflect.DeepEqual(got, wantRows) {
				t.Errorf("byColumns %v: where %v: got %v, want rows %v", byCols, c.p, got, c.rows)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNativeTypesRefused: values that are not of the type, or would lose
// something in it, are refused with the column named.
func TestNativeTypesRefused(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "n", SortBy: "ts", Columns: nativeSchema})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []Row{
		{"ts": t0, "d": "2026-02-30"},
		{"ts": t0, "d": t0}, // 10:00, not a whole day
		{"ts": t0, "b": "not base64!"},
		{"ts": t0, "u": "123e4567"},
		{"ts": t0, "tod": "24:00:00"},
		{"ts": t0, "amount": "1.234"},                // a third fraction digit
		{"ts": t0, "amount": "123456789.5"},          // 11 digits in decimal(10,2)
		{"ts": t0, "amount": math.Nextafter(0.3, 1)}, // 0.30000000000000004
	} {
		err := tb.Append(context.Background(), []Row{row})
		var se *SchemaError
		if err == nil || !errors.As(err, &se) {
			t.Errorf("%v: err = %v, want a SchemaError", row, err)
		}
	}
	for _, p := range []Predicate{{Column: "d", Op: Eq, Value: "yesterday"}, {Column: "amount", Op: Gt, Value: "0.001"}} {
		if _, err := tb.Columns(Query{Where: []Predicate{p}}); err == nil {
			t.Errorf("where %v accepted", p)
		}
	}
}

// TestNativeTypesInferred: the values a registry decoder gives (coltype's,
// BytesValue) make native columns of an inferred table, and a column
// created as the old type keeps the old text: a date becomes its midnight
// in a timestamp column, bytes base64, the rest their text in a string
// column.
func TestNativeTypesInferred(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	fresh, err := s.Table(Config{Name: "fresh", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Table(Config{Name: "old", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Append(ctx, []Row{{"ts": t0, "d": t0.Truncate(24 * time.Hour), "b": "x", "u": "x", "tod": "x", "amount": "x"}}); err != nil {
		t.Fatal(err)
	}
	u := coltype.UUIDValue{1, 2, 3}
	row := Row{"ts": t0.Add(time.Second), "d": coltype.DateValue(20786), "b": coltype.BytesValue{0, 255}, "u": u,
		"tod": coltype.TimeOfDayValue(1), "amount": coltype.DecimalValue{Unscaled: 1250, Scale: 2}}
	for _, tb := range []*Table{fresh, old} {
		if err := tb.Append(ctx, []Row{row}); err != nil {
			t.Fatal(err)
		}
	}
	wantTypes := map[string]Type{"ts": Timestamp, "d": Date, "b": Bytes, "u": UUID, "tod": TimeOfDay, "amount": coltype.Decimal(18, 2)}
	for _, c := range fresh.Schema() {
		if wantTypes[c.Name] != c.Type {
			t.Errorf("fresh column %s is %v, want %v", c.Name, c.Type, wantTypes[c.Name])
		}
	}
	got := queryAll(t, old, Query{})
	wantOld := Row{"ts": t0.Add(time.Second), "d": time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), "b": "AP8=",
		"u": u.String(), "tod": "00:00:00.000001", "amount": "12.50"}
	if len(got) != 2 || !reflect.DeepEqual(got[1], wantOld) {
		t.Errorf("old table read %v, want its second row %v", got, wantOld)
	}
}

// TestBlockWithoutNewTypes: a block as every sluice before these types
// wrote it (kept in testdata, bytes written by the encoder of the time)
// decodes as it did; and the decimal header's two bytes round-trip.
func TestBlockWithoutNewTypes(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "block-v1-before-native-types.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var d blockDecoder
	if err := d.decode([]byte("k"), old, func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, c := range d.cols[:d.n] {
		names = append(names, c.name+":"+c.typ.String())
	}
	if want := []string{"i:int64", "f:float64", "s:string", "b:bool", "ts:timestamp", "j:json"}; !reflect.DeepEqual(names, want) || d.rows != 2 {
		t.Fatalf("old block: %d rows, columns %v, want 2 rows of %v", d.rows, names, want)
	}
	if d.cols[0].ints[1] != -7 || d.cols[2].strs[0] != "a" || d.cols[5].strs[1] != `{"k":1}` {
		t.Errorf("old block values: %v %q %q", d.cols[0].ints, d.cols[2].strs, d.cols[5].strs)
	}
	dec := colData{name: "m", typ: coltype.Decimal(12, 3), vals: []value{{i: 5}, {i: -123456}}, null: []bool{false, false}}
	payload := encodeBlock(nil, []colData{dec}, []int{0, 1})
	// name length, name, kind, precision, scale
	if head := []byte{1, 'm', byte(coltype.DecimalKind), 12, 3}; !bytes.Equal(payload[2:7], head) {
		t.Errorf("decimal column head %v, want %v", payload[2:7], head)
	}
	if err := d.decode([]byte("k"), compressBlock(nil, payload), func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if c := d.cols[0]; c.typ != coltype.Decimal(12, 3) || c.ints[1] != -123456 {
		t.Errorf("decimal round trip: %v %v", c.typ, c.ints)
	}

}

// TestBlockNarrowDecimal: a block as sluice wrote decimals of up to 18
// digits before wider ones existed (testdata, bytes written by the encoder
// of the time) decodes as it did, its decimals in 64 bits.
func TestBlockNarrowDecimal(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "block-v1-native-types-narrow-decimal.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var d blockDecoder
	if err := d.decode([]byte("k"), old, func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, c := range d.cols[:d.n] {
		names = append(names, c.name+":"+c.typ.String())
	}
	if want := []string{"m:decimal(18,2)", "d:date", "u:uuid"}; !reflect.DeepEqual(names, want) || d.rows != 3 {
		t.Fatalf("block: %d rows, columns %v, want 3 rows of %v", d.rows, names, want)
	}
	m := d.cols[0]
	if m.ints[0] != 1250 || m.ints[1] != -999999999999999999 || !m.isNull(2) || d.cols[1].ints[1] != -1 || d.cols[2].strs[1] != "0123456789abcdef" {
		t.Errorf("block values: %v %v %q", m.ints, d.cols[1].ints, d.cols[2].strs)
	}
}

// wideSchema has a decimal of 38 digits, 10 after the point.
var wideSchema = []Column{{Name: "ts", Type: Timestamp}, {Name: "w", Type: coltype.Decimal(38, 10)}}

// TestWideDecimal: a decimal(38,10) column takes the largest values both
// ways (text, JSON numbers, DecimalValue; by Add and by AddColumns), keeps
// them exactly across a reopen, orders them in where clauses as numbers,
// and refuses what would be rounded.
func TestWideDecimal(t *testing.T) {
	ctx := context.Background()
	nines := "999999999999999999999999999.9999999999" // 10^37-1 at scale 10
	texts := []string{nines, "-" + nines, "0.0000000000", "-0.0000000001", "12.5000000000", "9223372036854775808.0000000000"}
	wantRows := func(idx ...int) []Row {
		var rows []Row
		for _, i := range idx {
			d, err := coltype.ParseDecimal(texts[i], 38, 10)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, Row{"ts": t0.Add(time.Duration(i) * time.Second), "w": d})
		}
		return rows
	}
	for _, byCols := range []bool{false, true} {
		dir := t.TempDir()
		s := openStore(t, dir)
		tb, err := s.Table(Config{Name: "w", SortBy: "ts", Columns: wideSchema})
		if err != nil {
			t.Fatal(err)
		}
		var in []Row
		for i, text := range texts {
			var v any = text
			switch i % 3 {
			case 1:
				v = json.Number(text)
			case 2:
				v, _ = coltype.ParseDecimal(text, 38, 10)
			}
			in = append(in, Row{"ts": t0.Add(time.Duration(i) * time.Second), "w": v})
		}
		in = append(in, Row{"ts": t0.Add(time.Minute), "w": nil})
		b, err := tb.NewAppender()
		if err != nil {
			t.Fatal(err)
		}
		if byCols {
			err = b.AddColumns(ctx, byColumns(in))
		} else {
			err = b.Add(ctx, in)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openStore(t, dir)
		tb, err = s.Table(Config{Name: "w", SortBy: "ts", Columns: wideSchema})
		if err != nil {
			t.Fatal(err)
		}
		want := append(wantRows(0, 1, 2, 3, 4, 5), Row{"ts": t0.Add(time.Minute), "w": nil})
		got := queryAll(t, tb, Query{})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("byColumns %v: read back\n%v\nwant\n%v", byCols, got, want)
		}
		for i, text := range texts {
			if s := got[i]["w"].(coltype.DecimalValue).String(); s != text {
				t.Errorf("row %d reads as %s, want %s", i, s, text)
			}
		}
		for _, c := range []struct {
			p    Predicate
			rows []int
		}{
			{Predicate{Column: "w", Op: Gt, Value: "0"}, []int{0, 4, 5}},
			{Predicate{Column: "w", Op: Lt, Value: "-0.00000000001e1"}, []int{1}},
			{Predicate{Column: "w", Op: Le, Value: "-0.0000000001"}, []int{1, 3}},
			{Predicate{Column: "w", Op: Eq, Value: json.Number(nines)}, []int{0}},
			{Predicate{Column: "w", Op: Ge, Value: "9223372036854775807.9999999999"}, []int{0, 5}},
			{Predicate{Column: "w", Op: In, Values: []any{"12.5", "0", nil}}, []int{2, 4}},
		} {
			got := queryAll(t, tb, Query{Where: []Predicate{c.p}})
			if w := wantRows(c.rows...); !reflect.DeepEqual(got, w) {
				t.Errorf("byColumns %v: where %v: got %v, want rows %v", byCols, c.p, got, c.rows)
			}
		}
		for _, bad := range []any{"10" + nines, "0.00000000001", 1e30, "NaN"} {
			var se *SchemaError
			if err := tb.Append(ctx, []Row{{"ts": t0, "w": bad}}); !errors.As(err, &se) {
				t.Errorf("%v: err = %v, want a SchemaError", bad, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWideDecimalInferred: an inferred decimal column is decimal(18,s)
// until a value needs more digits; then it widens to decimal(38,s) and the
// values stored before read back unchanged, as do a string column's texts.
func TestWideDecimalInferred(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "inf", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	small := coltype.DecimalValue{Unscaled: -1250, Scale: 2}
	if err := tb.Append(ctx, []Row{{"ts": t0, "m": small}}); err != nil {
		t.Fatal(err)
	}
	if typ := tb.Schema()[1].Type; typ != coltype.Decimal(18, 2) {
		t.Fatalf("first column type %v, want decimal(18,2)", typ)
	}
	wide, err := coltype.ParseDecimal("-123456789012345678901234567890.12", 38, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, []Row{{"ts": t0.Add(time.Second), "m": wide}}); err != nil {
		t.Fatal(err)
	}
	if typ := tb.Schema()[1].Type; typ != coltype.Decimal(38, 2) {
		t.Fatalf("widened column type %v, want decimal(38,2)", typ)
	}
	got := queryAll(t, tb, Query{})
	want := []Row{{"ts": t0, "m": small}, {"ts": t0.Add(time.Second), "m": wide}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}
	if got := queryAll(t, tb, Query{Where: []Predicate{{Column: "m", Op: Lt, Value: "-12.5"}}}); !reflect.DeepEqual(got, want[1:]) {
		t.Errorf("where m < -12.5: %v, want %v", got, want[1:])
	}

	// A registry's decimal(30,2): 38 digits from the first value, however
	// small, in a table whose first value fixes its types.
	fixed, err := s.Table(Config{Name: "fixed", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	fixed.SetFixedTypes(true)
	if err := fixed.Append(ctx, []Row{{"ts": t0, "m": coltype.DecimalValue{Unscaled: 5, Scale: 2, Precision: 30}}}); err != nil {
		t.Fatal(err)
	}
	wide.Precision = 30
	if err := fixed.Append(ctx, []Row{{"ts": t0.Add(time.Second), "m": wide}}); err != nil {
		t.Fatal(err)
	}
	if typ := fixed.Schema()[1].Type; typ != coltype.Decimal(38, 2) {
		t.Errorf("column of a decimal(30,2) is %v, want decimal(38,2)", typ)
	}
}
