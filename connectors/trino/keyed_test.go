package trino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
)

const keyedTableYAML = `
tables:
  - name: events
    hashBy: user
    sortBy: ts
    primary_key: [n]
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: note, type: string}
`

// TestTrinoKeyedHotRows reads a keyed table (primary key n) of two nodes'
// stores through the connector: each node takes upserts and deletes of
// its own keys over HTTP (keys updated, updated twice, deleted, deleted
// and written again), so each store holds dead rows beside the live ones.
// Trino must read the state the test produced, one row per key: its last
// note, no deleted key, as the nodes' query answers it.
func TestTrinoKeyedHotRows(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	nodes := startNodesWith(t, 2, keyedTableYAML)
	want := map[int64]string{}
	rows := func(ns []int64, note string) string {
		var b strings.Builder
		for _, n := range ns {
			ts := base.Add(time.Duration(n)*time.Minute + time.Duration(len(note))*time.Second)
			fmt.Fprintf(&b, `{"user":"u%d","ts":%q,"n":%d,"note":%q}`+"\n", n%7, ts.Format(time.RFC3339Nano), n, note)
		}
		return b.String()
	}
	send := func(method, node string, ns []int64, note string) {
		t.Helper()
		req, err := http.NewRequest(method, node+"/v1/tables/events/rows", strings.NewReader(rows(ns, note)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s rows: %s: %s", method, resp.Status, body)
		}
		for _, n := range ns {
			if method == http.MethodDelete {
				delete(want, n)
			} else {
				want[n] = note
			}
		}
	}
	keys := func(from, to int64, pick func(int64) bool) []int64 {
		var ns []int64
		for n := from; n < to; n++ {
			if pick(n) {
				ns = append(ns, n)
			}
		}
		return ns
	}
	all := func(int64) bool { return true }
	for i, node := range nodes {
		from, to := int64(i)*1000, int64(i)*1000+500
		send(http.MethodPost, node, keys(from, to, all), "v1")
		send(http.MethodPost, node, keys(from, to, func(n int64) bool { return n%3 == 0 }), "v2")
		send(http.MethodPost, node, keys(from, to, func(n int64) bool { return n%9 == 0 }), "v3") // twice
		send(http.MethodDelete, node, keys(from, to, func(n int64) bool { return n%10 == 0 }), "")
		send(http.MethodPost, node, keys(from, to, func(n int64) bool { return n%20 == 0 }), "v4") // deleted, then written again
		send(http.MethodDelete, node, keys(from, to, func(n int64) bool { return n%50 == 7 }), "")
	}

	trino := sharedTrino(t)
	cat := newCatalog(t, trino, "sluice", catalogFile(t, nodes[0]))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, got, err := trino.Query(ctx, "SELECT n, note FROM "+cat+".cluster.events")
	if err != nil {
		log, _ := os.ReadFile(trino.Log)
		t.Fatalf("%v\nTrino log (end): %s", err, log[max(0, len(log)-3000):])
	}
	state := map[int64]string{}
	var twice, missing, extra, stale []int64
	for _, r := range got {
		n, err := r[0].(json.Number).Int64()
		if err != nil {
			t.Fatalf("n %v: %v", r[0], err)
		}
		if _, ok := state[n]; ok {
			twice = append(twice, n)
		}
		state[n], _ = r[1].(string)
	}
	for n, note := range want {
		switch g, ok := state[n]; {
		case !ok:
			missing = append(missing, n)
		case g != note:
			stale = append(stale, n)
		}
	}
	for n := range state {
		if _, ok := want[n]; !ok {
			extra = append(extra, n)
		}
	}
	first := func(s []int64) []int64 { slices.Sort(s); return s[:min(len(s), 6)] }
	if len(twice)+len(missing)+len(extra)+len(stale) > 0 {
		t.Errorf("Trino read %d rows for %d live keys: %d keys twice (first %v), %d missing (first %v), %d deleted or never written (first %v), %d with an older note (first %v)",
			len(got), len(want), len(twice), first(twice), len(missing), first(missing), len(extra), first(extra), len(stale), first(stale))
	}
}
