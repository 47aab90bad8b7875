package server

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

const nativeTypesConfig = `
listen: {http: "127.0.0.1:0"}
tables:
  - name: events
    sortBy: ts
    schema:
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: d, type: date}
      - {name: tod, type: time_of_day}
      - {name: u, type: uuid}
      - {name: b, type: bytes}
      - {name: amount, type: "decimal(10,2)"}
    on_bad_line: reject
    computed:
      - name: next_day
        type: date
        func: "function main(row) if row.d == nil then return nil end return '2030-01-0' .. tostring(row.n + 1) end"
`

// TestNativeTypesHTTP: date, time of day, uuid, bytes and decimal columns
// declared in the config take NDJSON's text forms over HTTP (a computed
// date column the text a script returns), answer where clauses on each,
// and come out as their text in NDJSON and CSV and as Arrow's date32,
// time64[us], fixed_size_binary[16], binary and decimal128(10,2); a value
// that does not fit is refused naming its line.
func TestNativeTypesHTTP(t *testing.T) {
	s := startServer(t, nativeTypesConfig, "")
	nd := `{"ts":"2026-11-29T10:00:00Z","n":1,"d":"2026-11-29","tod":"13:45:01.000123","u":"123E4567-E89B-12D3-A456-426614174000","b":"AAEC/w==","amount":12.5}
{"ts":"2026-11-29T10:00:01Z","n":2,"d":"1969-12-31","tod":"00:00","u":"00000000-0000-0000-0000-000000000001","b":"","amount":"-0.01"}
{"ts":"2026-11-29T10:00:02Z","n":3}
`
	code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd))
	if code != 200 || res["accepted"] != 3.0 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	want := map[float64]map[string]any{
		1: {"n": 1.0, "d": "2026-11-29", "tod": "13:45:01.000123", "u": "123e4567-e89b-12d3-a456-426614174000", "b": "AAEC/w==", "amount": 12.5, "next_day": "2030-01-02"},
		2: {"n": 2.0, "d": "1969-12-31", "tod": "00:00:00.000000", "u": "00000000-0000-0000-0000-000000000001", "b": "", "amount": -0.01, "next_day": "2030-01-03"},
		3: {"n": 3.0, "d": nil, "tod": nil, "u": nil, "b": nil, "amount": nil, "next_day": nil},
	}
	query := func(where string) []map[string]any {
		t.Helper()
		resp, err := http.Post(s.url+"/v1/tables/events/query", "application/json",
			strings.NewReader(`{"columns":["n","d","tod","u","b","amount","next_day"],"where":[`+where+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("where %s: %d %s", where, resp.StatusCode, b)
		}
		return lines(string(b))
	}
	for where, ns := range map[string][]float64{
		``: {1, 2, 3},
		`{"column":"d","op":"<","value":"1970-01-01"}`:                           {2},
		`{"column":"d","op":"IS NULL"}`:                                          {3},
		`{"column":"tod","op":">=","value":"12:00"}`:                             {1},
		`{"column":"u","op":"=","value":"123e4567e89b12d3a456426614174000"}`:     {1},
		`{"column":"u","op":"<","value":"10000000-0000-0000-0000-000000000000"}`: {2},
		`{"column":"b","op":"=","value":""}`:                                     {2},
		`{"column":"amount","op":">","value":0}`:                                 {1},
		`{"column":"amount","op":"IN","values":["-0.01", 99]}`:                   {2},
		`{"column":"next_day","op":">=","value":"2030-01-03"}`:                   {2},
	} {
		got := query(where)
		if len(got) != len(ns) {
			t.Errorf("where %s: %v, want n in %v", where, got, ns)
			continue
		}
		for i, r := range got {
			w := want[ns[i]]
			for k, v := range w {
				if r[k] != v {
					t.Errorf("where %s: row %v: %s = %v, want %v", where, r, k, r[k], v)
				}
			}
		}
	}
	code, body := get(t, s.url+"/v1/tables/events/query?format=csv&columns=n,d,tod,u,b,amount")
	wantCSV := "n,d,tod,u,b,amount\n1,2026-11-29,13:45:01.000123,123e4567-e89b-12d3-a456-426614174000,AAEC/w==,12.50\n" +
		"2,1969-12-31,00:00:00.000000,00000000-0000-0000-0000-000000000001,,-0.01\n3,,,,,\n"
	if code != 200 || !sameLines(body, wantCSV) {
		t.Errorf("csv: %d\n%s\nwant\n%s", code, body, wantCSV)
	}

	resp, err := http.Get(s.url + "/v1/tables/events/query?" + url.Values{"format": {"arrow"}, "columns": {"d,tod,u,b,amount"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		rd, err := ipc.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Release()
		wantSchema := "schema:\n  fields: 5\n    - d: type=date32, nullable\n    - tod: type=time64[us], nullable\n" +
			"    - u: type=fixed_size_binary[16], nullable\n    - b: type=binary, nullable\n    - amount: type=decimal(10, 2), nullable"
		if got := rd.Schema().String(); got != wantSchema {
			t.Errorf("arrow schema\n%s\nwant\n%s", got, wantSchema)
		}
		rows := 0
		for rd.Next() {
			rows += int(rd.RecordBatch().NumRows())
		}
		if rows != 3 || rd.Err() != nil {
			t.Errorf("arrow: %d rows, %v", rows, rd.Err())
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("arrow query: %d %s", resp.StatusCode, b)
	}

	code, res, _ = post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson",
		strings.NewReader(`{"ts":"2026-11-29T10:00:03Z","n":4,"amount":"1.234"}`+"\n"))
	if code != 400 || !strings.Contains(res["error"].(string), "amount") {
		t.Errorf("a decimal with a third fraction digit: %d %v, want 400 naming the column", code, res)
	}
}
