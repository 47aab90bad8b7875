package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A where value that does not fit its column (n>=abc) or a doubled
// operator (n>>5, read as n > ">5") is the client's error: 400 naming the
// clause, not a 500.
func TestBadWhereValueIs400NamingTheClause(t *testing.T) {
	s := startServer(t, testConfig, "")
	code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson",
		strings.NewReader(`{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}`+"\n"))
	if code != 200 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	for _, c := range []struct{ where, clause string }{
		{"n>=abc", `n >= "abc"`},
		{"n>>5", `n > ">5"`},
		{"n IN 1,x", `n IN ("1", "x")`},
	} {
		code, body := get(t, s.url+"/v1/tables/events/query?where="+url.QueryEscape(c.where))
		if code != http.StatusBadRequest || !strings.Contains(body, jsonText(c.clause)) {
			t.Errorf("where %s: %d %s, want 400 naming %s", c.where, code, body, c.clause)
		}
		req := `{"where":[` + whereJSON(t, c.where) + `]}`
		resp, err := http.Post(s.url+"/v1/tables/events/query", "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST where %s: %d %s, want 400", c.where, resp.StatusCode, b)
		}
	}
}

// jsonText is s as it appears inside a JSON string (not HTML-escaped:
// the operators read as they are written).
func jsonText(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

func whereJSON(t *testing.T, w string) string {
	c, err := parseWhere(w)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// POST .../query takes from and to as unix seconds given as JSON numbers
// (as the docs say), as well as strings.
func TestPostQueryTakesUnixSecondsAsNumbers(t *testing.T) {
	s := startServer(t, testConfig, "")
	nd := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}
{"user":"ann","ts":"2024-05-02T10:00:00Z","n":2}
`
	if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd)); code != 200 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	// 2024-05-01T00:00:00Z and 2024-05-02T00:00:00Z.
	for _, req := range []string{
		`{"from":1714521600,"to":1714608000,"columns":["n"]}`,
		`{"from":"1714521600","to":1714608000.0,"columns":["n"]}`,
		`{"from":"2024-05-01T00:00:00Z","to":"2024-05-02T00:00:00Z","columns":["n"]}`,
	} {
		resp, err := http.Post(s.url+"/v1/tables/events/query", "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := lines(string(b)); resp.StatusCode != 200 || len(got) != 1 || got[0]["n"] != 1.0 {
			t.Errorf("%s: %d %s, want the one row of May 1st", req, resp.StatusCode, b)
		}
	}
	resp, err := http.Post(s.url+"/v1/tables/events/query", "application/json", strings.NewReader(`{"from":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf(`{"from":true}: %d, want 400`, resp.StatusCode)
	}
}
