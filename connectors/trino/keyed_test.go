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

// keyedWrites sends upserts and deletes of a keyed table's rows (user,
// ts, n, note) to nodes over HTTP and keeps the state they make.
type keyedWrites struct {
	want map[int64]string
}

func (k *keyedWrites) send(t *testing.T, method, node string, ns []int64, note string) {
	t.Helper()
	var b strings.Builder
	for _, n := range ns {
		ts := base.Add(time.Duration(n)*time.Minute + time.Duration(len(note))*time.Second)
		fmt.Fprintf(&b, `{"user":"u%d","ts":%q,"n":%d,"note":%q}`+"\n", n%7, ts.Format(time.RFC3339Nano), n, note)
	}
	req, err := http.NewRequest(method, node+"/v1/tables/events/rows", strings.NewReader(b.String()))
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
			delete(k.want, n)
		} else {
			k.want[n] = note
		}
	}
}

// round is one round of changes of the keys from..to-1 through node: all
// written (v<round>), a third again, a ninth a third time, a tenth
// deleted, a twentieth deleted and written again, a fiftieth deleted.
func (k *keyedWrites) round(t *testing.T, node string, from, to int64, r int) {
	t.Helper()
	note := fmt.Sprintf("v%d", r)
	k.send(t, http.MethodPost, node, keysIn(from, to, func(int64) bool { return true }), note)
	k.send(t, http.MethodPost, node, keysIn(from, to, func(n int64) bool { return n%3 == 0 }), note+"b")
	k.send(t, http.MethodPost, node, keysIn(from, to, func(n int64) bool { return n%9 == 0 }), note+"c")
	k.send(t, http.MethodDelete, node, keysIn(from, to, func(n int64) bool { return n%10 == int64(r%10) }), "")
	k.send(t, http.MethodPost, node, keysIn(from, to, func(n int64) bool { return n%20 == 0 }), note+"d")
	k.send(t, http.MethodDelete, node, keysIn(from, to, func(n int64) bool { return n%50 == 7 }), "")
}

func keysIn(from, to int64, pick func(int64) bool) []int64 {
	var ns []int64
	for n := from; n < to; n++ {
		if pick(n) {
			ns = append(ns, n)
		}
	}
	return ns
}

// check reads n and note of table through tr and compares them with the
// state, key by key.
func (k *keyedWrites) check(t *testing.T, tr *coldtest.Trino, table, who string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, got, err := tr.Query(ctx, "SELECT n, note FROM "+table)
	if err != nil {
		log, _ := os.ReadFile(tr.Log)
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
	for n, note := range k.want {
		switch g, ok := state[n]; {
		case !ok:
			missing = append(missing, n)
		case g != note:
			stale = append(stale, n)
		}
	}
	for n := range state {
		if _, ok := k.want[n]; !ok {
			extra = append(extra, n)
		}
	}
	first := func(s []int64) []int64 { slices.Sort(s); s = slices.Compact(s); return s[:min(len(s), 6)] }
	if len(twice)+len(missing)+len(extra)+len(stale) > 0 {
		t.Errorf("%s read %d rows for %d live keys: %d rows of a key read before (first %v), %d missing (first %v), %d deleted or never written (first %v), %d with an older note (first %v)",
			who, len(got), len(k.want), len(twice), first(twice), len(missing), first(missing), len(extra), first(extra), len(stale), first(stale))
	}
}

// TestTrinoKeyedHotRows reads a keyed table (primary key n) of two nodes'
// stores through the connector: each node takes upserts and deletes of
// its own keys over HTTP (keys updated, updated twice, deleted, deleted
// and written again), so each store holds dead rows beside the live ones.
// Trino must read the state the test produced, one row per key: its last
// note, no deleted key.
func TestTrinoKeyedHotRows(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	nodes := startNodesWith(t, 2, keyedTableYAML)
	k := &keyedWrites{want: map[int64]string{}}
	for i, node := range nodes {
		k.round(t, node, int64(i)*1000, int64(i)*1000+500, 1)
		k.round(t, node, int64(i)*1000, int64(i)*1000+250, 2)
	}
	trino := sharedTrino(t)
	cat := newCatalog(t, trino, "sluice", catalogFile(t, nodes[0]))
	k.check(t, trino, cat+".cluster.events", "the sluice connector")
}

// keyedColdNodeYAML is a node whose keyed table commits continuously
// every 50 ms into the REST catalog's table, removing the committed rows
// from its store (they are past the hot retention).
func keyedColdNodeYAML(members []string, node, restURI, s3Endpoint string) string {
	return fmt.Sprintf(`
cluster: {members: [%s], node_timeout: 20s}
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
    compact:
      interval: 50ms
      after: 1h
      remove: true
      iceberg:
        warehouse: s3://%s/keyed
        s3: {endpoint: %q, region: %s, path_style: true}
        catalog: {type: rest, uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, strings.Join(members, ", "), coldtest.Bucket, s3Endpoint, coldtest.Region, restURI, node)
}

// TestTrinoKeyedColdTier: a node's keyed table commits every 50 ms into
// an Iceberg table; five rounds of changes, each committed before the
// next (so runs delete older rows by position delete files), then a
// round left to the commits running while Trino reads. The sluice
// connector (both tiers through the node) and Trino's Iceberg connector
// (the committed rounds) read the state the test produced, key by key.
func TestTrinoKeyedColdTier(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	nodes, restURI := startColdNodesWith(t, 1, keyedColdNodeYAML)
	trino := sharedTrino(t)
	k := &keyedWrites{want: map[int64]string{}}
	committed := func() {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for hotRowsOf(t, nodes[0], "events") > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the node's rows were not committed within a minute")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for r := 1; r <= 5; r++ {
		k.round(t, nodes[0], int64(r-1)*100, 600, r)
		committed()
	}
	// A delete leaves no row in the store, so the wait above does not see
	// it: the upserts after it in each round commit it (a run takes every
	// change below its sequence limit).
	icebergCat := newCatalog(t, trino, "iceberg", icebergCatalogFile(t, restURI, sharedS3(t).Endpoint))
	k.check(t, trino, icebergCat+".sluice.events", "Trino's Iceberg connector")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, rows, err := trino.Query(ctx, `SELECT count(*) FROM `+icebergCat+`.sluice."events$files" WHERE content = 1`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rows[0][0].(json.Number).Int64(); n == 0 {
		t.Errorf("no position delete file in the Iceberg table after five rounds of changes")
	}
	sluiceCat := newCatalog(t, trino, "sluice", catalogFile(t, nodes[0]))
	k.check(t, trino, sluiceCat+".cluster.events", "the sluice connector")
	k.round(t, nodes[0], 0, 600, 6) // committed while Trino reads, or not yet
	k.check(t, trino, sluiceCat+".cluster.events", "the sluice connector, during commits")
}
