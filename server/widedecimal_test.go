package server

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

const wideDecimalConfig = `
listen: {http: "127.0.0.1:0"}
tables:
  - name: events
    sortBy: ts
    schema:
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: w, type: "decimal(38,10)"}
    on_bad_line: reject
`

// TestWideDecimalHTTP: a decimal(38,10) column takes NDJSON numbers of 37
// digits exactly (not through float64), answers where clauses in numeric
// order, comes out as its exact text in NDJSON and CSV and as Arrow's
// decimal128(38,10); a value that would be rounded is refused.
func TestWideDecimalHTTP(t *testing.T) {
	s := startServer(t, wideDecimalConfig, "")
	const big = "999999999999999999999999999.9999999999" // 10^37-1 at scale 10
	nd := `{"ts":"2026-11-29T10:00:00Z","n":1,"w":` + big + `}
{"ts":"2026-11-29T10:00:01Z","n":2,"w":-` + big + `}
{"ts":"2026-11-29T10:00:02Z","n":3,"w":0}
{"ts":"2026-11-29T10:00:03Z","n":4,"w":"-12345678901234567890.0000000001"}
`
	code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd))
	if code != 200 || res["accepted"] != 4.0 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	query := func(where string) string {
		t.Helper()
		resp, err := http.Post(s.url+"/v1/tables/events/query", "application/json",
			strings.NewReader(`{"columns":["n","w"],"where":[`+where+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("where %s: %d %s", where, resp.StatusCode, b)
		}
		return string(b)
	}
	rows := []string{
		`{"n":1,"w":` + big + `}`,
		`{"n":2,"w":-` + big + `}`,
		`{"n":3,"w":0.0000000000}`,
		`{"n":4,"w":-12345678901234567890.0000000001}`,
	}
	for where, want := range map[string][]int{
		``:                                  {0, 1, 2, 3},
		`{"column":"w","op":">","value":0}`: {0},
		`{"column":"w","op":"<","value":"-12345678901234567890"}`:           {1, 3},
		`{"column":"w","op":"=","value":` + big + `}`:                       {0},
		`{"column":"w","op":"IN","values":[0, "-` + big + `"]}`:             {1, 2},
		`{"column":"w","op":">=","value":-12345678901234567890.0000000001}`: {0, 2, 3},
	} {
		var want2 []string
		for _, i := range want {
			want2 = append(want2, rows[i])
		}
		if got := query(where); !sameLines(got, strings.Join(want2, "\n")+"\n") {
			t.Errorf("where %s:\n%s\nwant\n%s", where, got, strings.Join(want2, "\n"))
		}
	}
	code, body := get(t, s.url+"/v1/tables/events/query?format=csv&columns=n,w")
	wantCSV := "n,w\n1," + big + "\n2,-" + big + "\n3,0.0000000000\n4,-12345678901234567890.0000000001\n"
	if code != 200 || !sameLines(body, wantCSV) {
		t.Errorf("csv: %d\n%s\nwant\n%s", code, body, wantCSV)
	}

	resp, err := http.Get(s.url + "/v1/tables/events/query?" + url.Values{"format": {"arrow"}, "columns": {"w"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("arrow query: %d %s", resp.StatusCode, b)
	}
	rd, err := ipc.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if got, want := rd.Schema().String(), "schema:\n  fields: 1\n    - w: type=decimal(38, 10), nullable"; got != want {
		t.Errorf("arrow schema\n%s\nwant\n%s", got, want)
	}
	var texts []string
	for rd.Next() {
		col := rd.RecordBatch().Column(0).(*array.Decimal128)
		for i := range col.Len() {
			texts = append(texts, col.ValueStr(i))
		}
	}
	if want := []string{big, "-" + big, "0", "-12345678901234567890.0000000001"}; strings.Join(texts, " ") != strings.Join(want, " ") || rd.Err() != nil {
		t.Errorf("arrow values %v (%v), want %v", texts, rd.Err(), want)
	}

	for _, bad := range []string{`10` + big, `0.00000000001`, `"1e28"`} {
		code, res, _ = post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson",
			strings.NewReader(`{"ts":"2026-11-29T10:00:09Z","n":9,"w":`+bad+`}`+"\n"))
		if code != 400 || !strings.Contains(res["error"].(string), `"w"`) {
			t.Errorf("w = %s: %d %v, want 400 naming the column", bad, code, res)
		}
	}
}
