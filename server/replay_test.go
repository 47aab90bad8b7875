package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTTPDeadLettersAndReplay: the dead letters of HTTP ingest carry
// their origin (the Idempotency-Key, or the request id answered in
// Sluice-Request-Id), their line and their raw text, lines skipped under
// on_bad_line: skip included; after the script is fixed, a replay stores
// each of them once (a second replay takes nothing again), a line that is
// still not JSON stays a dead letter with its new reason, and the filters
// select.
func TestHTTPDeadLettersAndReplay(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "twice.lua")
	write := func(src string) {
		if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`function main(row) if row.n == 3 then error("n is 3") end return row.n * 2 end`)
	s := startServer(t, `
tables:
  - name: t
    sortBy: ts
    on_bad_line: skip
    computed:
      - {name: twice, type: int64, on_error: deadletter, func: `+script+`}
`, "")
	body := `{"ts":"2026-01-01T00:00:01Z","n":1}
{"ts":"2026-01-01T00:00:02Z","n":3}
{bad
{"ts":"2026-01-01T00:00:04Z","n":4}
`
	code, res, _ := post(t, s.url+"/v1/tables/t/rows", "application/x-ndjson", strings.NewReader(body), "Idempotency-Key", "k1")
	if code != 200 || res["accepted"] != 2.0 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	code, res, hdr := post(t, s.url+"/v1/tables/t/rows", "application/x-ndjson", strings.NewReader(`{"ts":"2026-01-01T00:00:05Z","n":3}`+"\n"))
	reqID := hdr.Get(requestIDHeader)
	if code != 200 || reqID == "" {
		t.Fatalf("ingest without a key: %d %v, request id %q", code, res, reqID)
	}
	deadLetters := func() map[string]map[string]any {
		t.Helper()
		_, out := get(t, s.url+"/v1/tables/t_deadletter/query?columns=id,origin,line,row,loader,error,replay_of")
		by := map[string]map[string]any{}
		for _, d := range lines(out) {
			if d["replay_of"] != nil && d["replay_of"] != "" {
				continue
			}
			origin, _ := d["origin"].(string)
			by[origin+" line "+fmt.Sprint(d["line"])] = d
		}
		return by
	}
	dl := deadLetters()
	want := map[string]string{ // origin and line -> raw text
		"http key=k1 line 2":                `"n":3`,
		"http key=k1 line 3":                `{bad`,
		"http request=" + reqID + " line 1": `"n":3`,
	}
	if len(dl) != len(want) {
		t.Fatalf("dead letters %v, want %d", dl, len(want))
	}
	ids := map[string]bool{}
	for at, text := range want {
		d, ok := dl[at]
		if !ok || !strings.Contains(d["row"].(string), text) {
			t.Fatalf("no dead letter at %s holding %s: %v", at, text, dl)
		}
		ids[d["id"].(string)] = true
	}
	if len(ids) != len(want) {
		t.Fatalf("dead letters share ids: %v", dl)
	}

	// Filters that select nothing replay nothing.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := &Client{URL: s.url}
	if r, err := client.Replay(ctx, "t", ReplayOptions{Reason: "no such reason"}); err != nil || r.Replayed+r.Failed+r.Done != 0 {
		t.Fatalf("replay of no dead letter: %+v %v", r, err)
	}
	if r, err := client.Replay(ctx, "t", ReplayOptions{Since: time.Now().Add(time.Hour)}); err != nil || r.Replayed+r.Failed+r.Done != 0 {
		t.Fatalf("replay of no dead letter: %+v %v", r, err)
	}

	write(`function main(row) return row.n * 2 end -- fixed`)
	if err := s.ReloadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := client.Replay(ctx, "t", ReplayOptions{})
	if err != nil || first.Replayed != 2 || first.Rows != 2 || first.Failed != 1 {
		t.Fatalf("replay: %+v %v; want the two n=3 rows stored, the bad line failing again", first, err)
	}
	second, err := client.Replay(ctx, "t", ReplayOptions{Reason: "n is 3"})
	if err != nil || second.Replayed != 0 || second.Done != 2 {
		t.Fatalf("second replay: %+v %v; want nothing replayed again", second, err)
	}
	_, out := get(t, s.url+"/v1/tables/t/query?columns=n,twice")
	count := map[float64]int{}
	for _, r := range lines(out) {
		if r["twice"] != 2*r["n"].(float64) {
			t.Fatalf("row %v: twice is not 2n", r)
		}
		count[r["n"].(float64)]++
	}
	if count[1] != 1 || count[3] != 2 || count[4] != 1 || len(count) != 3 {
		t.Fatalf("rows by n %v, want n=1 and n=4 once, n=3 twice (two requests)", count)
	}
	// The bad line is a dead letter again, with the decoder's reason.
	var again int
	_, out = get(t, s.url+"/v1/tables/t_deadletter/query?columns=row,error,replay_of")
	for _, d := range lines(out) {
		if d["row"] == "{bad" && (d["replay_of"] == nil || d["replay_of"] == "") {
			again++
		}
	}
	if again != 2 {
		t.Fatalf("%d dead letters of the bad line, want 2 (the first and its replay's): %s", again, out)
	}
}
