package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// bigAnswerRows is more rows than the sockets between a member and its
// coordinator buffer (~60 bytes a row: ~9 MB against at most ~4 MB of send
// buffer and the small receive buffer of a socket nobody reads), so that a
// member whose coordinator does not read is blocked writing its answer.
const bigAnswerRows = 150_000

// fillRecent stores rows stamped now with n = first..first+count-1, over
// 50 users.
func fillRecent(t *testing.T, s *testServer, first, count int) {
	t.Helper()
	ts := time.Now().UTC().Format(time.RFC3339)
	var b strings.Builder
	for i := first; i < first+count; i++ {
		fmt.Fprintf(&b, `{"user":"u%d","ts":%q,"n":%d}`+"\n", i%50, ts, i)
	}
	code, m, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
	if code != 200 {
		t.Fatalf("ingest: %d %v", code, m)
	}
}

// TestClusterQueryMemberWaitsItsTurn: a coordinator reads its members'
// answers in turn, so a member with a large answer waits, blocked writing,
// while the coordinator reads others' (a hook holds the coordinator for
// three reader timeouts after its own part, as a long answer before this
// member's would). The coordinator's heartbeats keep the member: the query
// ends complete, every row once.
func TestClusterQueryMemberWaitsItsTurn(t *testing.T) {
	const readerTimeout = 500 * time.Millisecond
	lns := make([]net.Listener, 2)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, "http://"+ln.Addr().String())
	}
	cfg := strings.Replace(clusterConfig(members, "5s"), "node_timeout: 5s", "node_timeout: 5s, reader_timeout: 500ms", 1)
	var nodes []*testServer
	for _, ln := range lns {
		nodes = append(nodes, serveConfigOn(t, cfg, "", ln))
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	fillRecent(t, nodes[1], 0, bigAnswerRows)
	t.Cleanup(func() {
		if t.Failed() {
			for i, s := range nodes {
				s.stop()
				t.Logf("node %d's log:\n%s", i, s.logs.String())
			}
		}
	})
	busy := func() { time.Sleep(3 * readerTimeout) }
	afterOwnPart.Store(&busy)
	defer afterOwnPart.Store(nil)
	// Read the answer whole before decoding it: a client slower than
	// the reader timeout allows would fail the query itself.
	resp, err := http.Get(nodes[0].url + "/v1/tables/events/query?cluster=true")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a member waiting %v for its turn: %d %v %.300s", 3*readerTimeout, resp.StatusCode, err, body)
	}
	a := clusterAnswer{code: resp.StatusCode, ns: map[int]int{}}
	for line := range strings.Lines(string(body)) {
		var row struct {
			N     *int   `json:"n"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil || row.N == nil {
			t.Fatalf("line %q: %v", line, err)
		}
		a.ns[*row.N]++
		a.rows++
	}
	wantEach(t, a, bigAnswerRows, nil)
}
