package server

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/table"
)

// startKeyedCluster starts n servers listing each other, with the keyed
// table accounts (key id).
func startKeyedCluster(t *testing.T, n int) []*testServer {
	t.Helper()
	lns := make([]net.Listener, n)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, fmt.Sprintf("%q", "http://"+ln.Addr().String()))
	}
	cfg := fmt.Sprintf(`
listen: {http: "127.0.0.1:0"}
cluster: {members: [%s], node_timeout: 5s}
tables:
  - name: accounts
    hashBy: region
    sortBy: ts
    primary_key: [id]
`, strings.Join(members, ", "))
	nodes := make([]*testServer, n)
	for i, ln := range lns {
		nodes[i] = serveConfigOn(t, cfg, "", ln)
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	return nodes
}

// keyedChange is one change appended to a node's store: an upsert of id
// with v, or a delete; partition "" is a change without a source position.
type keyedChange struct {
	id        string
	v         string
	region    string
	delete    bool
	partition string
	offset    int64
	minute    int
}

func appendChanges(t *testing.T, s *testServer, changes ...keyedChange) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range changes {
		row := table.Row{"id": c.id, "region": c.region, "v": c.v, "ts": time.Date(2026, 11, 1, 10, c.minute, 0, 0, time.UTC)}
		if c.region == "" {
			row["region"] = "eu"
		}
		if c.delete {
			row = table.Row{"id": c.id, "region": "eu", "ts": time.Date(2026, 11, 1, 10, c.minute, 0, 0, time.UTC),
				table.OperationColumn: table.OperationDelete}
		}
		if c.partition != "" {
			row[table.SourceBatchColumn] = fmt.Sprintf("%s@%d-%d", c.partition, c.offset, c.offset+1)
			row[table.SourceOffsetColumn] = c.offset
		}
		// One append per change: the store applies them in this order.
		if err := s.tables["accounts"].table.Append(ctx, []table.Row{row}); err != nil {
			t.Fatal(err)
		}
	}
}

// keyedClusterState queries the cluster through node and returns id → v,
// failing on a key seen twice.
func keyedClusterState(t *testing.T, node *testServer, params url.Values) map[string]string {
	t.Helper()
	params.Set("cluster", "true")
	code, body := get(t, node.url+"/v1/tables/accounts/query?"+params.Encode())
	if code != 200 {
		t.Fatalf("cluster query %s: %d %s", params.Encode(), code, body)
	}
	got := map[string]string{}
	for _, r := range lines(body) {
		if e, ok := r["error"]; ok {
			t.Fatalf("cluster query %s: error row %v", params.Encode(), e)
		}
		id, _ := r["id"].(string)
		if _, twice := got[id]; twice {
			t.Errorf("cluster query %s: key %q twice: %s", params.Encode(), id, body)
		}
		got[id], _ = r["v"].(string)
		if _, ok := r[table.SourceBatchColumn]; ok && !strings.Contains(params.Get("columns"), table.SourceBatchColumn) {
			t.Errorf("cluster query %s: the merge's column %s in the answer", params.Encode(), table.SourceBatchColumn)
		}
	}
	return got
}

// TestKeyedClusterQueryOneRowPerKey: three nodes whose stores hold changes
// of the same keys (as after rebalances) answer a cluster query with one row
// per key: of one source partition the later offset wins, a delete hides an
// older row of another node, changes of different partitions or without a
// position go by the time column, and a filter that the newer row does not
// match leaves the key out rather than show the older row. Asked through
// each node, the answer is the same.
func TestKeyedClusterQueryOneRowPerKey(t *testing.T) {
	nodes := startKeyedCluster(t, 3)
	const p3, p4, p5 = "kafka/accounts/3/tid", "kafka/accounts/4/tid", "kafka/accounts/5/tid"
	appendChanges(t, nodes[0],
		keyedChange{id: "a", v: "a-old", partition: p3, offset: 10, minute: 1},
		keyedChange{id: "b", v: "b-old", partition: p3, offset: 11, minute: 1},
		keyedChange{id: "c", delete: true, partition: p3, offset: 5, minute: 1},
		keyedChange{id: "d", v: "d-p4-earlier", partition: p4, offset: 1, minute: 1},
		keyedChange{id: "e", v: "e-http-later", minute: 9},
		keyedChange{id: "f", v: "f-old-us", region: "us", partition: p3, offset: 12, minute: 1},
		keyedChange{id: "g", v: "g-same", partition: p3, offset: 40, minute: 1},
		keyedChange{id: "h", v: "h-only-here", partition: p3, offset: 41, minute: 1},
	)
	appendChanges(t, nodes[1],
		keyedChange{id: "a", v: "a-new", partition: p3, offset: 20, minute: 0}, // older time, later offset
		keyedChange{id: "b", delete: true, partition: p3, offset: 21, minute: 2},
		keyedChange{id: "c", v: "c-new", partition: p3, offset: 22, minute: 2},
		keyedChange{id: "e", v: "e-p3-earlier", partition: p3, offset: 30, minute: 2},
		keyedChange{id: "f", v: "f-new-eu", region: "eu", partition: p3, offset: 23, minute: 2},
		keyedChange{id: "g", v: "g-same", partition: p3, offset: 40, minute: 1},
	)
	appendChanges(t, nodes[2],
		keyedChange{id: "d", v: "d-p5-later", partition: p5, offset: 1, minute: 5},
	)
	want := map[string]string{"a": "a-new", "c": "c-new", "d": "d-p5-later", "e": "e-http-later", "f": "f-new-eu", "g": "g-same", "h": "h-only-here"}
	for i, node := range nodes {
		got := keyedClusterState(t, node, url.Values{"columns": {"id,v"}})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("through node %d: %v, want %v", i, got, want)
		}
	}
	// Every column when none is named: the merge's columns are not added.
	if got := keyedClusterState(t, nodes[1], url.Values{}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("all columns: %v, want %v", got, want)
	}
	// f's newer row is in region eu: a query of us leaves f out.
	if got := keyedClusterState(t, nodes[0], url.Values{"columns": {"id,v"}, "where": {"region=us"}}); len(got) != 0 {
		t.Errorf("region us: %v, want none (f's newer row is eu's)", got)
	}
	if got := keyedClusterState(t, nodes[0], url.Values{"columns": {"id,v"}, "limit": {"3"}}); len(got) != 3 {
		t.Errorf("limit 3: %d rows", len(got))
	}
	// Arrow and CSV are refused (the merge reads NDJSON).
	if code, body := get(t, nodes[0].url+"/v1/tables/accounts/query?cluster=true&format=csv"); code != 400 {
		t.Errorf("csv: %d %s, want 400", code, body)
	}
}
