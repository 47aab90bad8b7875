package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// exactClusterConfig is clusterConfig's table with a continuous cold tier
// that removes what it commits (the rows are from 2024, so every commit's
// local step deletes them from the hot store), in a warehouse and SQLite
// catalog all nodes share.
func exactClusterConfig(members []string, node, warehouse, catalog string) string {
	quoted := make([]string, len(members))
	for i, m := range members {
		quoted[i] = fmt.Sprintf("%q", m)
	}
	return fmt.Sprintf(`
listen: {http: "127.0.0.1:0"}
cluster: {members: [%s], node_timeout: 10s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
    compact:
      interval: 50ms
      after: 1h
      remove: true
      iceberg:
        warehouse: %s
        catalog: {uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, strings.Join(quoted, ", "), warehouse, catalog, node)
}

// TestClusterQueryExactDuringCommits: three nodes share one Iceberg table
// and commit into it all the time (every 50 ms by their schedule and on
// demand in a loop), each committed row leaving its store at once, while
// rows keep coming to every node. Cluster queries from every node in turn
// must return every row stored before the query once, and no row twice:
// each member holds its cold tier from before it reads its store until the
// coordinator has read the Iceberg table.
func TestClusterQueryExactDuringCommits(t *testing.T) {
	const nodeCount = 3
	lns := make([]net.Listener, nodeCount)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, "http://"+ln.Addr().String())
	}
	warehouse, catalog := t.TempDir(), filepath.Join(t.TempDir(), "catalog.db")
	nodes := make([]*testServer, nodeCount)
	for i, ln := range lns {
		nodes[i] = serveConfigOn(t, exactClusterConfig(members, fmt.Sprintf("node%d", i), warehouse, catalog), "", ln)
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}

	// Node i stores n = i*1e6, i*1e6+1, ...; stored[i] counts the rows it
	// acknowledged.
	const batch = 20
	var stored [nodeCount]atomic.Int64
	var commits atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range nodes {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for k := 0; ; k += batch {
				select {
				case <-stop:
					return
				default:
				}
				var b strings.Builder
				for j := k; j < k+batch; j++ {
					fmt.Fprintf(&b, `{"user":"u%d","ts":"2024-05-01T10:00:00Z","n":%d}`+"\n", j%50, i*1e6+j)
				}
				resp, err := http.Post(s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
				if err != nil {
					t.Errorf("ingest: %v", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("ingest: status %d", resp.StatusCode)
					return
				}
				stored[i].Store(int64(k + batch))
				time.Sleep(5 * time.Millisecond)
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Post(s.url+"/v1/tables/events/compact", "application/json", nil)
				if err != nil {
					t.Errorf("compact: %v", err)
					return
				}
				var res struct {
					Rows int64 `json:"rows"`
				}
				json.NewDecoder(resp.Body).Decode(&res)
				resp.Body.Close()
				if resp.StatusCode == 200 && res.Rows > 0 {
					commits.Add(1)
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	deadline := time.Now().Add(8 * time.Second)
	queries := 0
	for ; time.Now().Before(deadline) || queries < 30; queries++ {
		var before [nodeCount]int64
		for i := range stored {
			before[i] = stored[i].Load()
		}
		a := clusterQuery(t, nodes[queries%nodeCount], url.Values{"cluster": {"true"}})
		if a.code != 200 || a.body != "" {
			t.Fatalf("query %d from node %d: %d %s", queries, queries%nodeCount, a.code, a.body)
		}
		var twice, lost []int
		for n, times := range a.ns {
			if times > 1 {
				twice = append(twice, n)
			}
		}
		for i := range nodeCount {
			for j := range int(before[i]) {
				if a.ns[i*1e6+j] == 0 {
					lost = append(lost, i*1e6+j)
				}
			}
		}
		if len(twice) > 0 || len(lost) > 0 {
			t.Fatalf("query %d from node %d (%d commits so far): %d rows seen twice (%v), %d stored before it missing (%v)",
				queries, queries%nodeCount, commits.Load(), len(twice), head(twice), len(lost), head(lost))
		}
	}
	if commits.Load() < 10 {
		t.Errorf("%d commits with rows during %d queries: the test did not race them", commits.Load(), queries)
	}
	t.Logf("%d cluster queries, %d on-demand commits with rows", queries, commits.Load())
}

func head(ns []int) []int {
	if len(ns) > 5 {
		return ns[:5]
	}
	return ns
}
