package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKeyedMaintainOnDeleteFiles: a keyed table whose maintenance
// interval is off (negative) and delete_files is 2 gets a pass from the
// runs' delete files alone: updates of keys already in the Iceberg table
// make each run commit position delete files, and the server rewrites
// the small files once two are committed. Every query, before the pass,
// after it and after one more pass asked over HTTP, answers each key once
// with its latest value; the pass may overlap the next run, whose deletes
// then make its rewrite give way (coldtier's
// TestKeyedRewriteAfterOtherNodesDeletes forces that moment).
func TestKeyedMaintainOnDeleteFiles(t *testing.T) {
	wh := t.TempDir()
	s := startServer(t, `
tables:
  - name: accounts
    hashBy: region
    sortBy: ts
    primary_key: [id]
    schema:
      - {name: id, type: string}
      - {name: region, type: string}
      - {name: ts, type: timestamp}
      - {name: balance, type: int64}
    compact:
      after: 1h
      remove: true
      iceberg:
        continuous: true
        warehouse: `+wh+`
        maintain:
          interval: -1s
          delete_files: 2
`, "")
	want := map[string]int64{}
	check := func(when string) {
		t.Helper()
		code, body := get(t, s.url+"/v1/tables/accounts/query?columns=id,balance")
		if code != 200 {
			t.Fatalf("%s: query: %d %s", when, code, body)
		}
		got := map[string]int64{}
		for _, r := range lines(body) {
			id := r["id"].(string)
			if _, ok := got[id]; ok {
				t.Fatalf("%s: key %s twice: %s", when, id, body)
			}
			got[id] = int64(r["balance"].(float64))
		}
		for id, b := range want {
			if got[id] != b {
				t.Fatalf("%s: key %s has %d, want %d (%d keys, want %d)", when, id, got[id], b, len(got), len(want))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d keys, want %d", when, len(got), len(want))
		}
	}
	run := func(r int, ids []int) {
		t.Helper()
		var nd strings.Builder
		for _, i := range ids {
			id := fmt.Sprintf("k%02d", i)
			// A new version often lands in the other day partition.
			fmt.Fprintf(&nd, `{"id":%q,"region":"r%d","ts":"2024-05-0%dT10:%02d:00Z","balance":%d}`+"\n", id, i%3, 1+(i+r)%2, r, 100*r+i)
			want[id] = int64(100*r + i)
		}
		if code, res, _ := post(t, s.url+"/v1/tables/accounts/rows", "application/x-ndjson", strings.NewReader(nd.String())); code != 200 {
			t.Fatalf("ingest: %d %v", code, res)
		}
		if code, res, _ := post(t, s.url+"/v1/tables/accounts/compact", "application/json", nil); code != 200 {
			t.Fatalf("compact: %d %v", code, res)
		}
		check(fmt.Sprintf("after run %d", r))
	}
	var all []int
	for i := range 20 {
		all = append(all, i)
	}
	run(0, all)
	maintained := func() bool {
		_, metrics := get(t, s.url+"/metrics")
		return !strings.Contains(metrics, `sluice_coldtier_maintain_runs_total{table="accounts"} 0`) &&
			strings.Contains(metrics, `sluice_coldtier_maintain_runs_total{table="accounts"} `)
	}
	if maintained() {
		t.Fatal("a pass ran before any delete file was committed")
	}
	run(1, []int{1, 2, 3, 4, 5})
	run(2, []int{3, 4, 5, 6, 7})
	deadline := time.Now().Add(30 * time.Second)
	for !maintained() {
		if time.Now().After(deadline) {
			_, metrics := get(t, s.url+"/metrics")
			t.Fatalf("no maintenance pass after two runs of updates:\n%s", grep(metrics, "coldtier"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	check("after the pass")
	if code, res, _ := post(t, s.url+"/v1/tables/accounts/maintain", "application/json", nil); code != 200 {
		t.Fatalf("maintain: %d %v", code, res)
	}
	check("after a pass asked for")
	_, metrics := get(t, s.url+"/metrics")
	if strings.Contains(metrics, `sluice_coldtier_files_rewritten_total{table="accounts"} 0`) {
		t.Errorf("the passes rewrote no file:\n%s", grep(metrics, "coldtier"))
	}
	run(3, []int{0, 1, 2, 3, 4})
}
