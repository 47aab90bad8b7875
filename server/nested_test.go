package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestParseWherePath: a where clause's column text may be a path; an
// operator character inside a quoted name of the path does not end it.
func TestParseWherePath(t *testing.T) {
	f := func(in string, want WhereClause) {
		t.Helper()
		got, err := parseWhere(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got.Column != want.Column || got.Op != want.Op || got.Value != want.Value || len(got.Values) != len(want.Values) {
			t.Fatalf("%q = %+v, want %+v", in, got, want)
		}
	}
	f(`address.city = "Oslo"`, WhereClause{Column: "address.city", Op: "=", Value: `"Oslo"`})
	f(`items[0].sku=x`, WhereClause{Column: "items[0].sku", Op: "=", Value: "x"})
	f(`attrs."a=b" != 1`, WhereClause{Column: `attrs."a=b"`, Op: "!=", Value: "1"})
	f(`attrs["x<y"].n >= 2`, WhereClause{Column: `attrs["x<y"].n`, Op: ">=", Value: "2"})
	f(`"a.b".c IS NULL`, WhereClause{Column: `"a.b".c`, Op: "IS NULL"})
	f(`attrs." in ".k IN (a, b)`, WhereClause{Column: `attrs." in ".k`, Op: "IN", Values: []any{"a", "b"}})
	f(`a"b = 5`, WhereClause{Column: `a"b`, Op: "=", Value: "5"}) // a quote inside a name is text
}

const nestedTable = `
tables:
  - name: orders
    hashBy: user
    sortBy: ts
`

// fillOrders stores orders first..first+count-1 (n) with a nested address
// and items; with dotted, a top-level column named "address.city" too.
func fillOrders(t *testing.T, s *testServer, first, count int, dotted bool) {
	t.Helper()
	var b strings.Builder
	for i := first; i < first+count; i++ {
		city := []string{"Oslo", "Bergen", "Tromsø"}[i%3]
		fmt.Fprintf(&b, `{"user":"u%d","ts":"2026-11-26T10:00:00Z","n":%d,"address":{"city":%q,"zip":%d},"items":[{"sku":"s%d","qty":%d}]`,
			i%5, i, city, 1000+i, i%4, i%7)
		if dotted {
			fmt.Fprintf(&b, `,"address.city":%q`, []string{"Bergen", "Oslo"}[i%2]) // not the nested city
		}
		b.WriteString("}\n")
	}
	code, m, _ := post(t, s.url+"/v1/tables/orders/rows", "application/x-ndjson", strings.NewReader(b.String()))
	if code != 200 {
		t.Fatalf("ingest: %d %v", code, m)
	}
}

// queryNs runs a query of orders and returns the n of its rows, sorted.
func queryNs(t *testing.T, s *testServer, params url.Values) (int, []int, string) {
	t.Helper()
	code, body := get(t, s.url+"/v1/tables/orders/query?"+params.Encode())
	if code != 200 {
		return code, nil, body
	}
	var ns []int
	for _, r := range lines(body) {
		if e, ok := r["error"]; ok {
			t.Fatalf("query %v: %v", params, e)
		}
		ns = append(ns, int(r["n"].(float64)))
	}
	slices.Sort(ns)
	return code, ns, body
}

// wantNs are the n in [first, first+count) for which keep holds.
func wantNs(first, count int, keep func(n int) bool) []int {
	var out []int
	for n := first; n < first+count; n++ {
		if keep(n) {
			out = append(out, n)
		}
	}
	return out
}

// TestQueryWherePathHTTP: where clauses on nested fields through the
// query route, GET and POST, and the rule that a column's own name wins
// over a path.
func TestQueryWherePathHTTP(t *testing.T) {
	s := startServer(t, nestedTable, "")
	fillOrders(t, s, 0, 60, false)
	city := func(n int) string { return []string{"Oslo", "Bergen", "Tromsø"}[n%3] }
	for _, c := range []struct {
		where []string
		keep  func(int) bool
	}{
		{[]string{`address.city = "Oslo"`}, func(n int) bool { return city(n) == "Oslo" }},
		{[]string{`address.city=Oslo`}, func(n int) bool { return city(n) == "Oslo" }},
		{[]string{`"address".city != Oslo`}, func(n int) bool { return city(n) != "Oslo" }},
		{[]string{`address["city"] IN (Bergen, Tromsø)`}, func(n int) bool { return city(n) != "Oslo" }},
		{[]string{`address.zip >= 1050`, `items[0].sku = "s1"`}, func(n int) bool { return n >= 50 && n%4 == 1 }},
		{[]string{`items[0].qty < 2`}, func(n int) bool { return n%7 < 2 }},
		{[]string{`items[1].sku IS NULL`}, func(int) bool { return true }},
		{[]string{`items[1].sku != x`}, func(int) bool { return false }}, // a missing path satisfies no comparison
		{[]string{`address.country IS NOT NULL`}, func(int) bool { return false }},
	} {
		code, got, body := queryNs(t, s, url.Values{"where": c.where})
		if want := wantNs(0, 60, c.keep); code != 200 || !slices.Equal(got, want) {
			t.Errorf("where %q: %d %v, want %v (%.200s)", c.where, code, got, want, body)
		}
	}
	t.Run("post", func(t *testing.T) {
		resp, err := http.Post(s.url+"/v1/tables/orders/query", "application/json",
			strings.NewReader(`{"where":[{"column":"address","path":".city","op":"=","value":"Bergen"},{"column":"address","path":"zip","op":"<","value":1010}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got []int
		for _, r := range lines(string(b)) {
			got = append(got, int(r["n"].(float64)))
		}
		slices.Sort(got)
		if resp.StatusCode != 200 || !slices.Equal(got, []int{1, 4, 7}) {
			t.Errorf("POST with path: %d %v, want n 1, 4, 7 (%.200s)", resp.StatusCode, got, b)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, bad := range []string{`address.city[ = 1`, `n.x = 1`, `nosuch.city = 1`, `"address".city"x = 1`} {
			if code, _, body := queryNs(t, s, url.Values{"where": {bad}}); code != 400 {
				t.Errorf("where %q: %d %s, want 400", bad, code, body)
			}
		}
	})
	t.Run("a column named with a dot wins", func(t *testing.T) {
		fillOrders(t, s, 100, 10, true)
		code, got, body := queryNs(t, s, url.Values{"where": {`address.city = Oslo`}})
		if want := wantNs(100, 10, func(n int) bool { return n%2 == 1 }); code != 200 || !slices.Equal(got, want) {
			t.Errorf("the dotted column: %d %v, want %v (%.200s)", code, got, want, body)
		}
		code, got, body = queryNs(t, s, url.Values{"where": {`"address".city = Oslo`, "n >= 100"}})
		if want := wantNs(100, 10, func(n int) bool { return city(n) == "Oslo" }); code != 200 || !slices.Equal(got, want) {
			t.Errorf("the quoted path: %d %v, want %v (%.200s)", code, got, want, body)
		}
	})
}

// TestClusterQueryWherePath: a cluster query's members read a where
// clause as its coordinator did. The coordinator's store has a column
// named "address.city": the clause is on that column on every node, also
// on the member whose store lacks it (which would read a path into its
// address column if it resolved the text itself); asked through the
// member, whose nodes have no such column but the coordinator's, the same.
// A path clause (quoted column) reaches every node as a path.
func TestClusterQueryWherePath(t *testing.T) {
	nodes := nestedCluster(t)
	fillOrders(t, nodes[0], 0, 30, true)
	fillOrders(t, nodes[1], 100, 30, false)
	city := func(n int) string { return []string{"Oslo", "Bergen", "Tromsø"}[n%3] }
	for i, s := range nodes {
		code, got, body := queryNs(t, s, url.Values{"cluster": {"true"}, "where": {`address.city = Oslo`}})
		if want := wantNs(0, 30, func(n int) bool { return n%2 == 1 }); code != 200 || !slices.Equal(got, want) {
			t.Errorf("node %d, the dotted column: %d %v, want %v (%.300s)", i, code, got, want, body)
		}
		code, got, body = queryNs(t, s, url.Values{"cluster": {"true"}, "where": {`"address".city = Oslo`}})
		want := append(wantNs(0, 30, func(n int) bool { return city(n) == "Oslo" }), wantNs(100, 30, func(n int) bool { return city(n) == "Oslo" })...)
		if code != 200 || !slices.Equal(got, want) {
			t.Errorf("node %d, the path: %d %v, want %v (%.300s)", i, code, got, want, body)
		}
	}
}

// nestedCluster starts two nodes of one cluster with nestedTable.
func nestedCluster(t *testing.T) []*testServer {
	t.Helper()
	lns := make([]net.Listener, 2)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, fmt.Sprintf("%q", "http://"+ln.Addr().String()))
	}
	cfg := fmt.Sprintf("cluster: {members: [%s], node_timeout: 2s}\n%s", strings.Join(members, ", "), nestedTable)
	nodes := []*testServer{serveConfigOn(t, cfg, "", lns[0]), serveConfigOn(t, cfg, "", lns[1])}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	return nodes
}
