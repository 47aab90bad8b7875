package server

import (
	"fmt"
	"strings"
	"testing"
)

// An event time whose nanoseconds do not fit an int64 rejects the batch
// with a 400 naming its input line and column (it used to be stored as a
// wrapped date: 9300000000 s as 1680-02-24).
func TestOutOfRangeUnixTimeIsRejectedWithItsLine(t *testing.T) {
	s := startServer(t, testConfig, "")
	for _, ts := range []string{"9300000000", "99999999999", "-99999999999999", "9300000000000000"} {
		nd := `{"user":"ann","ts":1714557600,"n":1}` + "\n\n" + `{"user":"ann","ts":` + ts + `,"n":2}` + "\n"
		code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd))
		msg, _ := res["error"].(string)
		if code != 400 || res["line"] != 3.0 || res["column"] != "ts" || !strings.Contains(msg, "line 3:") || !strings.Contains(msg, "out of range") {
			t.Errorf("ts %s: %d %v, want 400 naming line 3, column ts, out of range", ts, code, res)
		}
	}
	if code, body := get(t, s.url+"/v1/tables/events/query"); code != 200 || body != "" {
		t.Errorf("rejected batches stored rows: %d %q", code, body)
	}
}

// Errors a user reads name the input line, never a 0-based row index
// among decoded rows (blank lines and filtered rows shift that), and a
// column the static schema lacks is not said to be of type Type(0).
func TestErrorsNameTheInputLine(t *testing.T) {
	s := startServer(t, testConfig, "")
	// Line 4 is bad; one blank line and one filtered row come before it.
	nd := `{"user":"ann","ts":1714557600,"n":1}` + "\n\n" + `{"user":"test","ts":1714557600,"n":1}` + "\n" + `{"user":"bob","ts":1714557600,"n":"x"}` + "\n"
	code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd))
	msg, _ := res["error"].(string)
	if code != 400 || res["line"] != 4.0 || !strings.HasPrefix(msg, "line 4: ") || strings.Contains(msg, "row ") {
		t.Errorf("bad value on line 4: %d %v, want a message naming line 4 and no row index", code, res)
	}
	code, res, _ = post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson",
		strings.NewReader(`{"user":"ann","ts":1714557600,"n":1}`+"\n"+`{"user":"ann","ts":1714557600,"zz":1}`+"\n"))
	msg, _ = res["error"].(string)
	if code != 400 || !strings.HasPrefix(msg, "line 2: ") || strings.Contains(msg, "Type(") || !strings.Contains(msg, `"zz"`) {
		t.Errorf("unknown column on line 2: %d %v, want line 2, the column and no Type(0)", code, res)
	}
	// A computed column with on_error: reject.
	const cfg = `
listen: {http: "127.0.0.1:0"}
tables:
  - name: r
    computed:
      - name: half
        type: float64
        on_error: reject
        func: "function main(row) if row.n == 0 then error('zero') end return 1 / row.n end"
`
	s2 := startServer(t, cfg, "")
	code, res, _ = post(t, s2.url+"/v1/tables/r/rows", "application/x-ndjson", strings.NewReader("{\"n\":1}\n\n{\"n\":0}\n"))
	msg, _ = res["error"].(string)
	if code != 422 || res["line"] != 3.0 || !strings.Contains(msg, "line 3: ") || strings.Contains(msg, "row ") {
		t.Errorf("rejecting column on line 3: %d %v, want line 3 and no row index in the message", code, res)
	}
}

// Dead letters carry their input line, in the answer and in the
// dead-letter table.
func TestDeadLettersCarryTheirLine(t *testing.T) {
	const cfg = `
listen: {http: "127.0.0.1:0"}
tables:
  - name: orders
    sortBy: ts
    computed:
      - name: unit
        type: float64
        on_error: deadletter
        func: "function main(row) if row.qty == 0 then error('qty is zero') end return row.total / row.qty end"
`
	s := startServer(t, cfg, "")
	body := `{"id":"a","ts":"2024-05-01T10:00:00Z","total":10,"qty":2}

{"id":"b","ts":"2024-05-01T10:01:00Z","total":5,"qty":0}
{"id":"c","ts":"2024-05-01T10:02:00Z","total":9,"qty":0}
`
	code, res, _ := post(t, s.url+"/v1/tables/orders/rows", "application/x-ndjson", strings.NewReader(body))
	dls, _ := res["dead_letters"].([]any)
	if code != 200 || len(dls) != 2 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	for i, want := range []float64{3, 4} {
		if d := dls[i].(map[string]any); d["line"] != want {
			t.Errorf("dead letter %d in the answer: %v, want line %v", i, d, want)
		}
	}
	code, out := get(t, s.url+"/v1/tables/orders_deadletter/query?columns=line,row")
	got := lines(out)
	if code != 200 || len(got) != 2 {
		t.Fatalf("dead-letter table: %d %s", code, out)
	}
	seen := map[float64]bool{}
	for _, r := range got {
		l, _ := r["line"].(float64)
		seen[l] = true
	}
	if !seen[3] || !seen[4] {
		t.Errorf("dead-letter table lines: %s, want lines 3 and 4", out)
	}
}

// A body of more rows than one part (partRows) is still one atomic batch:
// a bad value or a bad line in a later part stores nothing of the earlier
// parts, and the error names the line and the row index in the whole body.
func TestBatchOfManyPartsIsAtomic(t *testing.T) {
	s := startServer(t, strings.Replace(testConfig, "max_body_bytes: 4096", "max_body_bytes: 4000000", 1), "")
	body := func(bad int, badText string) string {
		var b strings.Builder
		for i := 0; i < partRows+2000; i++ {
			if i == bad {
				b.WriteString(badText + "\n")
				continue
			}
			fmt.Fprintf(&b, `{"user":"u%d","ts":1714557600,"n":%d}`+"\n", i%7, i)
		}
		return b.String()
	}
	bad := partRows + 1000
	code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(body(bad, `{"user":"x","ts":1714557600,"n":"x"}`)))
	if code != 400 || res["line"] != float64(bad+1) || res["row"] != float64(bad) {
		t.Fatalf("bad value in the second part: %d %v, want 400 at line %d, row %d", code, res, bad+1, bad)
	}
	code, res, _ = post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(body(bad, `{"user":`)))
	if code != 400 || res["line"] != float64(bad+1) {
		t.Fatalf("bad line in the second part: %d %v, want 400 at line %d", code, res, bad+1)
	}
	if _, out := get(t, s.url+"/v1/tables/events/query?columns=n&limit=5"); out != "" {
		t.Fatalf("a rejected batch of several parts stored rows: %q", out)
	}
	code, res, _ = post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(body(-1, "")))
	if code != 200 || res["accepted"] != float64(partRows+2000) {
		t.Fatalf("good batch of several parts: %d %v", code, res)
	}
}
