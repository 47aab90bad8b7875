package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParsePath(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		p, err := ParsePath(in)
		if err != nil {
			t.Fatalf("ParsePath(%q): %v", in, err)
		}
		if got := p.String(); got != want {
			t.Errorf("ParsePath(%q) = %s, want %s", in, got, want)
		}
	}
	f("city", ".city")
	f(".address.city", ".address.city")
	f("items[0].sku", ".items[0].sku")
	f(`["k.8s"].name`, `["k.8s"].name`)
	f(`."a b"`, `["a b"]`)
	f(`[""]`, `[""]`)
	f("[12][3]", "[12][3]")
	for _, bad := range []string{".", "a..b", "a[", "a[x]", "a[-1]", "a[+1]", `a."b`, `a["b"`, "a]"} {
		if _, err := ParsePath(bad); !errors.Is(err, ErrBadPath) {
			t.Errorf("ParsePath(%q): %v, want ErrBadPath", bad, err)
		}
	}
}

func TestSplitColumnPath(t *testing.T) {
	f := func(in, col, path string, ok bool) {
		t.Helper()
		c, p, got, err := SplitColumnPath(in)
		if err != nil {
			t.Fatalf("SplitColumnPath(%q): %v", in, err)
		}
		if c != col || got != ok || ok && p.String() != path {
			t.Errorf("SplitColumnPath(%q) = %q %s %v, want %q %s %v", in, c, p, got, col, path, ok)
		}
	}
	f("user", "user", "", false)
	f("address.city", "address", ".city", true)
	f("items[0].sku", "items", "[0].sku", true)
	f(`"resource.attrs".city`, "resource.attrs", ".city", true)
	f(`"a.b"`, "a.b", "", false)
	if _, _, _, err := SplitColumnPath(`"a"b`); !errors.Is(err, ErrBadPath) {
		t.Errorf(`SplitColumnPath("a"b): %v, want ErrBadPath`, err)
	}
}

func TestPathLookup(t *testing.T) {
	doc := `{ "address" : {"city":"Oslo","zip":"0150", "geo":{"lat":59.9}},
		"items":[{"sku":"x","n":2},{"sku":"y\"z","n":-3.5}], "esc\u0061ped":true,
		"k.8s":{"name":"pod"}, "nothing":null, "brace":"}]{[", "dup":1, "dup":2}`
	f := func(path, want string, ok bool) {
		t.Helper()
		p, err := ParsePath(path)
		if err != nil {
			t.Fatal(err)
		}
		got, gotOK := p.Lookup(doc)
		if got != want || gotOK != ok {
			t.Errorf("Lookup(%s) = %q %v, want %q %v", path, got, gotOK, want, ok)
		}
	}
	f("address.city", `"Oslo"`, true)
	f("address.geo.lat", `59.9`, true)
	f("address.geo", `{"lat":59.9}`, true)
	f("items[1].sku", `"y\"z"`, true)
	f("items[1].n", `-3.5`, true)
	f("items[2].sku", "", false)
	f("items.sku", "", false) // a key step into an array
	f("address[0]", "", false)
	f("escaped", "true", true) // a key written with an escape
	f(`["k.8s"].name`, `"pod"`, true)
	f("nothing", "null", true)
	f("brace", `"}]{["`, true)
	f("dup", "1", true)
	f("missing.deeper", "", false)
	for _, bad := range []string{``, `{`, `{"a"`, `{"a":`, `[1,`, `"str"`, `{"x":"unterminated}`, `not json`} {
		p, _ := ParsePath("a")
		if got, ok := p.Lookup(bad); ok {
			t.Errorf("Lookup(.a) in %q = %q, want missing", bad, got)
		}
	}
}

// TestPathLookupAllocs: the per-row lookup does not allocate (a key with
// escapes is the one case that does).
func TestPathLookupAllocs(t *testing.T) {
	doc := `{"id":7,"address":{"street":"Main","city":"Oslo"},"items":[{"sku":"a"},{"sku":"x"}]}`
	c, err := Predicate{Column: "doc", Path: "items[1].sku", Op: Eq, Value: "x"}.Compile(JSON)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Predicate{Column: "doc", Path: "id", Op: Ge, Value: "5"}.Compile(JSON)
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() {
		if !c.Text(doc) || !n.Text(doc) {
			t.Fatal("no match")
		}
	}); a != 0 {
		t.Errorf("%v allocations per row, want 0", a)
	}
}

// TestPathConditions: the semantics of a where clause on a nested value
// (pathCond's doc): nulls, the kind of the found value deciding the
// comparison, != on a missing path.
func TestPathConditions(t *testing.T) {
	doc := `{"city":"Oslo","n":10,"big":9007199254740993,"f":2.5,"ok":true,"tags":["a","b"],"obj":{"k":1},"nil":null,"num":"10"}`
	cases := []struct {
		path string
		op   Op
		v    any
		vals []any
		want bool
	}{
		{"city", Eq, "Oslo", nil, true},
		{"city", Ne, "Oslo", nil, false},
		{"city", Ne, "Bergen", nil, true},
		{"city", Lt, "P", nil, true},
		{"n", Eq, "10", nil, true},
		{"n", Eq, 10.0, nil, true},
		{"n", Eq, "10.0", nil, true},
		{"n", Gt, "9", nil, true}, // as numbers, not text
		{"n", Eq, "ten", nil, false},
		{"n", Ne, "ten", nil, false}, // no comparison: != is false too
		{"big", Eq, "9007199254740993", nil, true},
		{"big", Eq, "9007199254740992", nil, false}, // exact as integers
		{"f", Ge, "2.5", nil, true},
		{"f", Lt, 3, nil, true},
		{"ok", Eq, "true", nil, true},
		{"ok", Ne, "false", nil, true},
		{"ok", Gt, "false", nil, false},
		{"ok", Eq, "1", nil, false},
		{"tags[1]", Eq, "b", nil, true},
		{"tags", Eq, `["a","b"]`, nil, true},
		{"tags", Lt, "z", nil, false},
		{"obj.k", In, nil, []any{"3", 1.0}, true},
		{"obj.k", In, nil, []any{nil, "3"}, false},
		{"num", Gt, "9", nil, true}, // a string: as CompareText orders it
		{"num", Eq, "10.0", nil, false},
		{"city", Eq, `"Oslo"`, nil, true}, // a JSON string: the text inside the quotes
		{"n", Eq, `"10"`, nil, false},     // a string never equals a number
		{"num", Eq, `"10"`, nil, true},
		{"nil", IsNull, nil, nil, true},
		{"nil", Eq, "null", nil, false},
		{"missing", IsNull, nil, nil, true},
		{"missing", NotNull, nil, nil, false},
		{"missing", Ne, "x", nil, false}, // a missing path never satisfies !=
		{"city", NotNull, nil, nil, true},
	}
	for _, c := range cases {
		p := Predicate{Column: "doc", Path: c.path, Op: c.op, Value: c.v, Values: c.vals}
		cond, err := p.Compile(JSON)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if got := cond.Text(doc); got != c.want {
			t.Errorf("%s: %v, want %v", p, got, c.want)
		}
		if got := cond.Value(json.RawMessage(doc)); got != c.want {
			t.Errorf("%s on a boxed value: %v, want %v", p, got, c.want)
		}
		if got := cond.Value(nil); got != (c.op == IsNull) {
			t.Errorf("%s on a null column: %v", p, got)
		}
	}
	if _, err := (Predicate{Column: "n", Path: "a", Op: Eq, Value: "1"}).Compile(Int64); err == nil {
		t.Error("a path into an int64 column compiled")
	}
	if _, err := (Predicate{Column: "doc", Path: "a[", Op: Eq, Value: "1"}).Compile(JSON); !errors.Is(err, ErrBadPath) {
		t.Errorf("a bad path: %v, want ErrBadPath", err)
	}
}

// TestQueryWherePath: a where clause on a nested field through the
// store's scan, beside a column whose name has a dot.
func TestQueryWherePath(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "orders", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	for i := range 6 {
		r := Row{"ts": t0.Add(time.Duration(i) * time.Second), "user": fmt.Sprintf("u%d", i%2), "id": int64(i),
			"address.city": "dotted", // a top-level column whose name has a dot
			"address":      json.RawMessage(fmt.Sprintf(`{"city":%q,"zip":%d}`, []string{"Oslo", "Bergen", "Oslo"}[i%3], 1000+i)),
		}
		if i != 4 {
			r["items"] = json.RawMessage(fmt.Sprintf(`[{"sku":"s%d","qty":%d}]`, i, i))
		}
		rows = append(rows, r)
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	ids := func(where ...Predicate) []int64 {
		var got []int64
		for _, r := range collect(t, tb, Query{Columns: []string{"id"}, Where: where}) {
			got = append(got, r["id"].(int64))
		}
		slices.Sort(got)
		return got
	}
	f := func(want []int64, where ...Predicate) {
		t.Helper()
		if got := ids(where...); !slices.Equal(got, want) {
			t.Errorf("where %v: ids %v, want %v", where, got, want)
		}
	}
	f([]int64{0, 2, 3, 5}, Predicate{Column: "address", Path: ".city", Op: Eq, Value: "Oslo"})
	f([]int64{1, 4}, Predicate{Column: "address", Path: ".city", Op: Ne, Value: "Oslo"})
	f([]int64{3, 5}, Predicate{Column: "address", Path: "city", Op: Eq, Value: "Oslo"}, Predicate{Column: "address", Path: "zip", Op: Gt, Value: "1002"})
	f([]int64{0, 1, 2, 3, 4, 5}, Predicate{Column: "address.city", Op: Eq, Value: "dotted"})
	f([]int64{2}, Predicate{Column: "items", Path: "[0].sku", Op: Eq, Value: "s2"})
	f([]int64{3, 5}, Predicate{Column: "items", Path: "[0].qty", Op: Ge, Value: 3})
	f([]int64{4}, Predicate{Column: "items", Path: "[0].sku", Op: IsNull})
	f([]int64{0, 1, 2, 3, 5}, Predicate{Column: "items", Path: "[0].sku", Op: Ne, Value: "nope"}) // the row without items is not one
	f(nil, Predicate{Column: "items", Path: "[1].sku", Op: NotNull})
}

// TestQueryColumnPath: a path in the projection answers, per row, the
// value it addresses typed as JSON typed it, null when missing, in the
// row-wise, the values and the encoded query alike.
func TestQueryColumnPath(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "orders", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{
		`{"city":"Oslo","zip":1000,"vip":true,"geo":{"lat":59.9},"tags":["a","b"]}`,
		`{"city":"Ber\u0067en","zip":-5.25e2,"vip":false,"geo":null}`,
		`{"zip":"0150"}`,
		`[1,2]`,
	}
	var rows []Row
	for i, d := range docs {
		rows = append(rows, Row{"ts": t0.Add(time.Duration(i) * time.Second), "user": "u", "id": int64(i),
			"address": json.RawMessage(d), "note": []string{`{"a":1}`, `not json`, `{"a":{x}}`, `{"a":"t"}`}[i]})
	}
	rows = append(rows, Row{"ts": t0.Add(9 * time.Second), "user": "u", "id": int64(9)}) // no address, no note
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	q := Query{
		Columns: []string{"id", "address.city", "zip", "vip", "geo", "tags", "note.a", "address"},
		Paths: map[string]ColumnPath{
			"address.city": {Column: "address", Path: ".city"}, "zip": {Column: "address", Path: "zip"},
			"vip": {Column: "address", Path: ".vip"}, "geo": {Column: "address", Path: ".geo"},
			"tags": {Column: "address", Path: ".tags"}, "note.a": {Column: "note", Path: ".a"},
		},
	}
	want := []string{
		`0|string Oslo|json.Number 1000|bool true|json.RawMessage {"lat":59.9}|json.RawMessage ["a","b"]|json.Number 1|`,
		`1|string Bergen|json.Number -5.25e2|bool false|<nil>|<nil>|<nil>|`,
		`2|<nil>|string 0150|<nil>|<nil>|<nil>|<nil>|`, // a string column's object that is not JSON: null
		`3|<nil>|<nil>|<nil>|<nil>|<nil>|string t|`,
		`9|<nil>|<nil>|<nil>|<nil>|<nil>|<nil>|`,
	}
	encode := func(buf []byte, vals []any) ([]byte, error) {
		buf = fmt.Appendf(buf, "%v|", vals[0])
		for _, v := range vals[1 : len(vals)-1] {
			if v == nil {
				buf = append(buf, "<nil>|"...)
				continue
			}
			if raw, ok := v.(json.RawMessage); ok {
				v = string(raw)
				buf = append(buf, "json.RawMessage "...)
			} else {
				buf = fmt.Appendf(buf, "%T ", v)
			}
			buf = fmt.Appendf(buf, "%v|", v)
		}
		return append(buf, '\n'), nil
	}
	var got []byte
	if err := tb.QueryValues(ctx, q, func(cols []Column, vals []any) error {
		if cols[1].Name != "address.city" || cols[1].Type != JSON {
			t.Errorf("column 1: %+v, want address.city of type json", cols[1])
		}
		got, _ = encode(got, vals)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if g := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n"); !slices.Equal(g, want) {
		t.Errorf("QueryValues:\n%s\nwant\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
	var chunks []byte
	if err := tb.QueryEncoded(ctx, q, encode, func(chunk []byte, _ int) error { chunks = append(chunks, chunk...); return nil }); err != nil {
		t.Fatal(err)
	}
	if string(chunks) != string(got) {
		t.Errorf("QueryEncoded:\n%s\nwant the same as QueryValues:\n%s", chunks, got)
	}
	r := collect(t, tb, Query{Columns: []string{"address.city"}, Paths: q.Paths, Where: []Predicate{{Column: "id", Op: Eq, Value: int64(0)}}})
	if len(r) != 1 || r[0]["address.city"] != "Oslo" {
		t.Errorf("Query: %v, want address.city Oslo", r)
	}
	for _, bad := range []ColumnPath{{Column: "id", Path: ".a"}, {Column: "address", Path: "a["}} {
		if _, err := tb.Columns(Query{Columns: []string{"x"}, Paths: map[string]ColumnPath{"x": bad}}); !errors.Is(err, ErrBadQuery) {
			t.Errorf("path %+v: error %v, want ErrBadQuery", bad, err)
		}
	}
	if _, err := tb.Columns(Query{Columns: []string{"x"}, Paths: map[string]ColumnPath{"x": {Column: "nope", Path: ".a"}}}); !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("a path into a column the table lacks: error %v, want ErrUnknownColumn", err)
	}
}

// TestColumnPathAllocs: a path column costs no allocation per row beyond
// its answer's value (none for a string without escapes or a number).
func TestColumnPathAllocs(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "allocs", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]Row, 2000)
	for i := range rows {
		rows[i] = Row{"ts": t0.Add(time.Duration(i) * time.Millisecond), "user": "u", "city": "Oslo",
			"address": json.RawMessage(fmt.Sprintf(`{"street":"Storgata %d","zip":%d,"city":"Oslo"}`, i, i))}
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	count := func(q Query) float64 {
		return testing.AllocsPerRun(5, func() {
			if err := tb.QueryValues(ctx, q, func([]Column, []any) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
	paths := map[string]ColumnPath{"c": {Column: "address", Path: ".city"}, "z": {Column: "address", Path: ".zip"}}
	plain := count(Query{Columns: []string{"city"}})
	path := count(Query{Columns: []string{"c", "z"}, Paths: paths})
	if path > plain+100 {
		t.Errorf("%d rows: a query of two path columns allocates %.0f times, one of a top-level column %.0f", len(rows), path, plain)
	}
}

// benchCities are the cities of benchAddresses' rows, in turn.
var benchCities = []string{"Oslo", "Bergen", "Trondheim", "Stavanger", "Tromsø"}

// benchAddresses is a table of 100,000 rows with a city both as a
// top-level column and inside a json column's address.
func benchAddresses(b *testing.B) *Table {
	ctx := context.Background()
	s := openStore(b, b.TempDir())
	b.Cleanup(func() { s.Close() })
	tb, err := s.Table(Config{Name: "bench", HashBy: "user", SortBy: "ts"})
	if err != nil {
		b.Fatal(err)
	}
	cities := benchCities
	for batch := range 100 {
		rows := make([]Row, 1000)
		for i := range rows {
			k := batch*1000 + i
			city := cities[k%len(cities)]
			rows[i] = Row{"ts": t0.Add(time.Duration(k) * time.Millisecond), "user": fmt.Sprintf("user-%d", k%4), "n": int64(k),
				"city": city,
				"address": json.RawMessage(fmt.Sprintf(`{"street":"Storgata %d","zip":"%04d","city":%q,"geo":{"lat":59.91,"lon":10.75}}`,
					k%200, k%10000, city)),
			}
		}
		if err := tb.Append(ctx, rows); err != nil {
			b.Fatal(err)
		}
	}
	return tb
}

// BenchmarkColumnPath compares a path column (the city inside a json
// column's address) with the same value as a top-level column, over the
// same rows, in one run: the cost of selecting a nested field.
func BenchmarkColumnPath(b *testing.B) {
	ctx := context.Background()
	tb := benchAddresses(b)
	paths := map[string]ColumnPath{"address.city": {Column: "address", Path: ".city"}}
	for _, c := range []struct {
		name string
		q    Query
	}{
		{"column", Query{Columns: []string{"n", "city"}}},
		{"path", Query{Columns: []string{"n", "address.city"}, Paths: paths}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			scanned, cities := 0, 0
			cpu0 := cpuTime()
			for b.Loop() {
				if err := tb.QueryValues(ctx, c.q, func(_ []Column, vals []any) error {
					if _, ok := vals[1].(string); ok {
						cities++
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				scanned += 100_000
			}
			if cities != scanned {
				b.Fatalf("%d cities in %d rows", cities, scanned)
			}
			reportRate(b, scanned, cpu0)
		})
	}
}

// BenchmarkWherePath compares a where clause on a nested field (a path
// into a json column) with the same filter on a top-level column, over
// the same rows: the cost of reading a field out of the JSON text.
func BenchmarkWherePath(b *testing.B) {
	ctx := context.Background()
	tb := benchAddresses(b)
	cities := benchCities
	for _, c := range []struct {
		name  string
		where Predicate
	}{
		{"column", Predicate{Column: "city", Op: Eq, Value: "Tromsø"}},
		{"path", Predicate{Column: "address", Path: ".city", Op: Eq, Value: "Tromsø"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			q := Query{Columns: []string{"n"}, Where: []Predicate{c.where}}
			scanned, rows := 0, 0
			cpu0 := cpuTime()
			for b.Loop() {
				if err := tb.QueryValues(ctx, q, func([]Column, []any) error { rows++; return nil }); err != nil {
					b.Fatal(err)
				}
				scanned += 100_000
			}
			if rows != scanned/len(cities) {
				b.Fatalf("%d rows of %d, want a fifth", rows, scanned)
			}
			reportRate(b, scanned, cpu0)
		})
	}
}

// FuzzPathLookup: on any text and path, Lookup does not panic; on valid
// JSON without repeated keys, it finds what encoding/json finds, and the
// value it returns is valid JSON.
func FuzzPathLookup(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a":{"b":[1,{"c":"x"}]}}`, "a.b[1].c"},
		{`{"a\u0062":true, "k.8s" : [ null ] }`, `ab`},
		{`[{"x":"}"},2]`, "[0].x"},
		{`{"a":"\"]}"}`, `["a"]`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, doc, path string) {
		p, err := ParsePath(path)
		if err != nil {
			return
		}
		got, ok := p.Lookup(doc)
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil || hasRepeatedKeys(doc) {
			return
		}
		for _, s := range p.steps {
			switch x := v.(type) {
			case map[string]any:
				if s.isIndex {
					v = nil
				} else {
					v = x[s.key]
				}
			case []any:
				if !s.isIndex || s.index >= len(x) {
					v = nil
				} else {
					v = x[s.index]
				}
			default:
				v = nil
			}
			if v == nil {
				break
			}
		}
		if v == nil {
			if ok && got != "null" {
				t.Fatalf("Lookup(%s) in %s = %s, encoding/json finds nothing", p, doc, got)
			}
			return
		}
		var found any
		if !ok || json.Unmarshal([]byte(got), &found) != nil || !reflect.DeepEqual(found, v) {
			t.Fatalf("Lookup(%s) in %s = %q %v, encoding/json finds %v", p, doc, got, ok, v)
		}
	})
}

// hasRepeatedKeys says whether an object in doc (valid JSON) has a key
// twice (Lookup takes the first, encoding/json the last).
func hasRepeatedKeys(doc string) bool {
	rep, _ := repeatedKeys(json.NewDecoder(strings.NewReader(doc)))
	return rep
}

func repeatedKeys(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return false, err
			}
			if seen[k.(string)] {
				return true, nil
			}
			seen[k.(string)] = true
			if rep, err := repeatedKeys(dec); rep || err != nil {
				return rep, err
			}
		}
		_, err = dec.Token()
		return false, err
	case json.Delim('['):
		for dec.More() {
			if rep, err := repeatedKeys(dec); rep || err != nil {
				return rep, err
			}
		}
		_, err = dec.Token()
		return false, err
	}
	return false, nil
}
