package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestKeyedLeaseMergedSplit: a keyed table's read lease has one split,
// tier cluster on its coordinator, which reads both nodes' parts under the
// lease and merges them by key: of one partition the later offset wins, a
// positioned delete hides another node's older row, and a delete without a
// position of its own (as HTTP's) hides another node's copy of the change
// it followed. Through either node as the coordinator, the split answers
// the state, as the cluster query does; the split read, the lease ends.
func TestKeyedLeaseMergedSplit(t *testing.T) {
	nodes := startKeyedCluster(t, 2)
	const p = "kafka/accounts/1/tid"
	appendChanges(t, nodes[0],
		keyedChange{id: "a", v: "a-old", partition: p, offset: 10, minute: 1},
		keyedChange{id: "b", v: "b-old", partition: p, offset: 11, minute: 1},
		keyedChange{id: "c", v: "c-same", partition: p, offset: 12, minute: 1},
		keyedChange{id: "c", delete: true, minute: 3}, // keeps offset 12: it follows that change
		keyedChange{id: "e", v: "e-kept", partition: p, offset: 13, minute: 1},
	)
	appendChanges(t, nodes[1],
		keyedChange{id: "a", v: "a-new", partition: p, offset: 20, minute: 0},
		keyedChange{id: "b", delete: true, partition: p, offset: 21, minute: 2},
		keyedChange{id: "c", v: "c-same", partition: p, offset: 12, minute: 1},
		keyedChange{id: "d", v: "d-http", minute: 4},
		keyedChange{id: "e", v: "e-kept", partition: p, offset: 13, minute: 1},
	)
	want := map[string]string{"a": "a-new", "d": "d-http", "e": "e-kept"}
	for i, node := range nodes {
		code, lease, _ := post(t, node.url+"/v1/tables/accounts/leases", "application/json", strings.NewReader(`{"ttl":"1m"}`))
		if code != http.StatusOK {
			t.Fatalf("node %d: open lease: %d %v", i, code, lease)
		}
		id, _ := lease["id"].(string)
		if splits, _ := json.Marshal(lease["splits"]); string(splits) != `[{"node":"","tier":"cluster"}]` {
			t.Fatalf("node %d: splits %s, want one of tier cluster on the coordinator", i, splits)
		}
		q := url.Values{"lease": {id}, "tier": {"cluster"}, "columns": {"id,v"}}
		if code, body := get(t, nodes[1-i].url+"/v1/tables/accounts/query?"+q.Encode()); code != http.StatusGone {
			t.Errorf("node %d: the split read on the other node: %d %s, want 410", i, code, body)
		}
		code, body := get(t, node.url+"/v1/tables/accounts/query?"+q.Encode())
		if code != http.StatusOK {
			t.Fatalf("node %d: read the split: %d %s", i, code, body)
		}
		got := map[string]string{}
		for _, r := range lines(body) {
			if e, ok := r["error"]; ok {
				t.Fatalf("node %d: error row %v", i, e)
			}
			k, _ := r["id"].(string)
			if _, twice := got[k]; twice {
				t.Errorf("node %d: key %q twice: %s", i, k, body)
			}
			got[k], _ = r["v"].(string)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("node %d: the merged split read %v, want %v", i, got, want)
		}
		if got := keyedClusterState(t, node, url.Values{"columns": {"id,v"}}); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("node %d: the cluster query read %v, want %v", i, got, want)
		}
		if code, body := get(t, node.url+"/v1/tables/accounts/query?"+q.Encode()+"&format=csv"); code != http.StatusBadRequest {
			t.Errorf("node %d: the split as CSV: %d %s, want 400", i, code, body)
		}
		resp, err := http.Post(node.url+"/v1/tables/accounts/leases/"+url.PathEscape(id)+"/done", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if code, body := get(t, node.url+"/v1/tables/accounts/query?"+q.Encode()); code != http.StatusGone {
			t.Errorf("node %d: a read after the one split was done: %d %s, want 410 (the lease ended)", i, code, body)
		}
	}
	if code, body := get(t, nodes[0].url+"/v1/tables/accounts/query?tier=cluster"); code != http.StatusBadRequest {
		t.Errorf("tier cluster without a lease: %d %s, want 400", code, body)
	}
}
