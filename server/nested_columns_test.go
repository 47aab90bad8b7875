package server

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// ordersRows queries orders with params and returns its rows by n.
func ordersRows(t *testing.T, s *testServer, params url.Values) (int, map[int]map[string]any, string) {
	t.Helper()
	code, body := get(t, s.url+"/v1/tables/orders/query?"+params.Encode())
	if code != 200 {
		return code, nil, body
	}
	rows := map[int]map[string]any{}
	for _, r := range lines(body) {
		if e, ok := r["error"]; ok {
			t.Fatalf("query %v: %v", params, e)
		}
		rows[int(r["n"].(float64))] = r
	}
	return code, rows, body
}

// TestQueryColumnPathHTTP: paths in a query's columns through the query
// route, GET, POST and CSV: each answers the value it addresses typed as
// JSON typed it, under the path as written, null when missing; a column's
// own name wins over a path.
func TestQueryColumnPathHTTP(t *testing.T) {
	s := startServer(t, nestedTable, "")
	fillOrders(t, s, 0, 6, false)
	city := func(n int) string { return []string{"Oslo", "Bergen", "Tromsø"}[n%3] }
	cols := `n,address.city,address.zip,items[0],items[1].sku,"address"["city"]`
	code, rows, body := ordersRows(t, s, url.Values{"columns": {cols}})
	if code != 200 || len(rows) != 6 {
		t.Fatalf("columns %s: %d, %d rows (%.300s)", cols, code, len(rows), body)
	}
	if first := strings.SplitN(body, "\n", 2)[0]; !strings.HasPrefix(first, `{"n":0,"address.city":"Oslo","address.zip":1000,"items[0]":{"qty":0,"sku":"s0"},"items[1].sku":null,"\"address\"[\"city\"]":"Oslo"}`) {
		t.Errorf("first row %s: want the columns in order, named as written, each value as the JSON has it", first)
	}
	for n, r := range rows {
		item, _ := r["items[0]"].(map[string]any)
		if r["address.city"] != city(n) || r["address.zip"] != float64(1000+n) || item["sku"] != fmt.Sprintf("s%d", n%4) ||
			r["items[1].sku"] != nil || r[`"address"["city"]`] != city(n) || len(r) != 6 {
			t.Errorf("row n=%d: %v", n, r)
		}
	}
	t.Run("post", func(t *testing.T) {
		code, m, body := post(t, s.url+"/v1/tables/orders/query", "application/json",
			strings.NewReader(`{"columns":["n","address.zip","zip"],"paths":{"zip":{"column":"address","path":".zip"}},"where":[{"column":"n","op":"=","value":2}]}`))
		if code != 200 || m["address.zip"] != float64(1002) || m["zip"] != float64(1002) {
			t.Errorf("POST: %d %v (%.200s)", code, m, body)
		}
	})
	t.Run("csv", func(t *testing.T) {
		code, body := get(t, s.url+"/v1/tables/orders/query?"+url.Values{"columns": {"n,address.city,address.zip,items[0]"}, "where": {"n=1"}, "format": {"csv"}}.Encode())
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		want := [][]string{{"n", "address.city", "address.zip", "items[0]"}, {"1", "Bergen", "1001", `{"qty":1,"sku":"s1"}`}}
		if code != 200 || err != nil || !slices.EqualFunc(recs, want, slices.Equal) {
			t.Errorf("CSV: %d %v %q, want %q", code, err, recs, want)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, bad := range []string{`address.city[`, `n.x`, `nosuch.city`, `"address".city"x`} {
			if code, _, body := ordersRows(t, s, url.Values{"columns": {"n," + bad}}); code != 400 {
				t.Errorf("columns n,%s: %d %s, want 400", bad, code, body)
			}
		}
		code, m, _ := post(t, s.url+"/v1/tables/orders/query", "application/json", strings.NewReader(`{"columns":["n"],"paths":{"zip":{"column":"address","path":".zip"}}}`))
		if code != 400 {
			t.Errorf("a path not among the columns: %d %v, want 400", code, m)
		}
	})
	t.Run("a column named with a dot wins", func(t *testing.T) {
		fillOrders(t, s, 100, 4, true)
		code, rows, body := ordersRows(t, s, url.Values{"columns": {`n,address.city,"address".city`}, "where": {"n >= 100"}})
		for n := 100; n < 104; n++ {
			if r := rows[n]; code != 200 || r["address.city"] != []string{"Bergen", "Oslo"}[n%2] || r[`"address".city`] != city(n) {
				t.Errorf("n=%d: %d %v (%.200s)", n, code, r, body)
			}
		}
	})
}

// TestClusterQueryColumnPath: a cluster query's members read a column as
// its coordinator did. Node 0's store has a column named "address.city";
// node 1's has the json column address but neither that column nor items:
// `address.city` is the dotted column on every node (null on node 1, which
// would read a path into its address if it resolved the name itself),
// `"address".city` the path, and `items[0].sku` a path into a json column
// node 1 lacks (null there), asked through either node.
func TestClusterQueryColumnPath(t *testing.T) {
	nodes := nestedCluster(t)
	fillOrders(t, nodes[0], 0, 6, true)
	var b strings.Builder
	for n := 100; n < 104; n++ {
		fmt.Fprintf(&b, `{"user":"u%d","ts":"2026-11-26T10:00:00Z","n":%d,"address":{"city":%q}}`+"\n", n%5, n, []string{"Oslo", "Bergen", "Tromsø"}[n%3])
	}
	if code, m, _ := post(t, nodes[1].url+"/v1/tables/orders/rows", "application/x-ndjson", strings.NewReader(b.String())); code != 200 {
		t.Fatalf("ingest: %d %v", code, m)
	}
	city := func(n int) string { return []string{"Oslo", "Bergen", "Tromsø"}[n%3] }
	for i, s := range nodes {
		code, rows, body := ordersRows(t, s, url.Values{"cluster": {"true"}, "columns": {`n,address.city,"address".city,items[0].sku`}})
		if code != 200 || len(rows) != 10 {
			t.Fatalf("node %d: %d, %d rows (%.300s)", i, code, len(rows), body)
		}
		for n, r := range rows {
			dotted, sku := any(nil), any(nil)
			if n < 100 {
				dotted, sku = []string{"Bergen", "Oslo"}[n%2], fmt.Sprintf("s%d", n%4)
			}
			if r["address.city"] != dotted || r[`"address".city`] != city(n) || r["items[0].sku"] != sku {
				t.Errorf("node %d, n=%d: %v, want address.city %v, \"address\".city %v, items[0].sku %v", i, n, r, dotted, city(n), sku)
			}
		}
		// A path named apart (POST paths) into the json column node 1
		// lacks: null there too.
		resp, err := http.Post(s.url+"/v1/tables/orders/query", "application/json",
			strings.NewReader(`{"cluster":true,"columns":["n","sku"],"paths":{"sku":{"column":"items","path":"[0].sku"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, string(b)
		skus := 0
		for _, r := range lines(body) {
			n, _ := r["n"].(float64)
			if sku, ok := r["sku"].(string); ok && n < 100 && sku == fmt.Sprintf("s%d", int(n)%4) {
				skus++
			} else if r["sku"] != nil || n < 100 {
				t.Errorf("node %d, POST paths: row %v", i, r)
			}
		}
		if code != 200 || skus != 6 || len(lines(body)) != 10 {
			t.Errorf("node %d, POST paths: %d, %d skus (%.300s)", i, code, skus, body)
		}
	}
}

// TestParseColumnsPaths: columns split at commas, except a comma inside a
// quoted name of a path.
func TestParseColumnsPaths(t *testing.T) {
	q, err := ParseQueryURL(url.Values{"columns": {`n, attrs."a,b" ,items[0].sku`, `"x,y".z`}})
	want := []string{"n", `attrs."a,b"`, "items[0].sku", `"x,y".z`}
	if err != nil || !slices.Equal(q.Columns, want) {
		t.Errorf("columns %q (%v), want %q", q.Columns, err, want)
	}
}
