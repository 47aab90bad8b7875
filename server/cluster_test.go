package server

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/cluster"
)

// clusterConfig is a table and a cluster section listing members.
func clusterConfig(members []string, nodeTimeout string) string {
	quoted := make([]string, len(members))
	for i, m := range members {
		quoted[i] = fmt.Sprintf("%q", m)
	}
	return fmt.Sprintf(`
listen: {http: "127.0.0.1:0"}
cluster: {members: [%s], node_timeout: %s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
`, strings.Join(quoted, ", "), nodeTimeout)
}

// startCluster starts n servers that list each other (and extra, nodes
// that are not sluice servers) as members.
func startCluster(t testing.TB, n int, extra ...string) []*testServer {
	t.Helper()
	lns := make([]net.Listener, n)
	members := append([]string(nil), extra...)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, "http://"+ln.Addr().String())
	}
	nodes := make([]*testServer, n)
	for i, ln := range lns {
		nodes[i] = serveConfigOn(t, clusterConfig(members, "500ms"), "", ln)
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	return nodes
}

// fillNode stores rows with n = first..first+count-1, one user per row.
func fillNode(t *testing.T, s *testServer, first, count int) {
	t.Helper()
	var b strings.Builder
	for i := first; i < first+count; i++ {
		fmt.Fprintf(&b, `{"user":"u%d","ts":"2026-11-26T10:00:00Z","n":%d}`+"\n", i, i)
	}
	code, m, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
	if code != 200 {
		t.Fatalf("ingest: %d %v", code, m)
	}
}

type clusterAnswer struct {
	code    int
	ns      map[int]int // n → times seen
	rows    int
	missing string // Sluice-Missing-Nodes, the trailer (every node missing)
	early   string // Sluice-Missing-Nodes, the header (nodes missing from the start)
	body    string // when not 200
}

func clusterQuery(t *testing.T, node *testServer, params url.Values) clusterAnswer {
	t.Helper()
	resp, err := http.Get(node.url + "/v1/tables/events/query?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := clusterAnswer{code: resp.StatusCode, ns: map[int]int{}}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		a.body = string(b)
		return a
	}
	if params.Get("format") == "csv" {
		r := csv.NewReader(resp.Body)
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 || recs[0][0] != "user" {
			t.Fatalf("csv without its header: %q", recs)
		}
		for _, rec := range recs[1:] {
			var n int
			fmt.Sscan(rec[2], &n)
			a.ns[n]++
			a.rows++
		}
	} else {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var row struct {
				N     *int   `json:"n"`
				Error string `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			if row.Error != "" {
				a.body = row.Error
				continue
			}
			a.ns[*row.N]++
			a.rows++
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	a.missing = resp.Trailer.Get(cluster.HeaderMissing)
	a.early = resp.Header.Get(cluster.HeaderMissing)
	return a
}

// wantEach checks that every n in [0, count) was seen once and nothing else.
func wantEach(t *testing.T, a clusterAnswer, count int, skip func(n int) bool) {
	t.Helper()
	want := 0
	for n := 0; n < count; n++ {
		if skip != nil && skip(n) {
			if a.ns[n] != 0 {
				t.Errorf("n=%d: seen %d times, want none", n, a.ns[n])
			}
			continue
		}
		want++
		if a.ns[n] != 1 {
			t.Errorf("n=%d: seen %d times, want once", n, a.ns[n])
		}
	}
	if a.rows != want {
		t.Errorf("%d rows, want %d", a.rows, want)
	}
}

func TestClusterQueryEveryNodeOnce(t *testing.T) {
	nodes := startCluster(t, 3)
	for i, s := range nodes {
		fillNode(t, s, i*1000, 1000)
	}
	for i, s := range nodes {
		a := clusterQuery(t, s, url.Values{"cluster": {"true"}})
		if a.code != 200 {
			t.Fatalf("node %d: %d %s", i, a.code, a.body)
		}
		wantEach(t, a, 3000, nil)
		if a.missing != "" {
			t.Errorf("node %d: missing %q in a whole answer", i, a.missing)
		}
	}
	t.Run("csv", func(t *testing.T) {
		a := clusterQuery(t, nodes[1], url.Values{"cluster": {"true"}, "format": {"csv"}})
		wantEach(t, a, 3000, nil)
	})
	t.Run("where and columns", func(t *testing.T) {
		a := clusterQuery(t, nodes[2], url.Values{"cluster": {"true"}, "where": {"n>=500", "n<2500"}, "columns": {"user,ts,n"}})
		wantEach(t, a, 3000, func(n int) bool { return n < 500 || n >= 2500 })
	})
	t.Run("limit", func(t *testing.T) {
		for _, limit := range []int{1, 999, 1000, 1500, 2999, 5000} {
			a := clusterQuery(t, nodes[0], url.Values{"cluster": {"true"}, "limit": {fmt.Sprint(limit)}})
			if want := min(limit, 3000); a.rows != want {
				t.Errorf("limit %d: %d rows, want %d", limit, a.rows, want)
			}
		}
	})
	t.Run("without cluster", func(t *testing.T) {
		a := clusterQuery(t, nodes[0], url.Values{})
		wantEach(t, a, 3000, func(n int) bool { return n >= 1000 })
	})
}

func TestClusterQueryNodeDown(t *testing.T) {
	nodes := startCluster(t, 3)
	for i, s := range nodes {
		fillNode(t, s, i*1000, 1000)
	}
	nodes[2].stop()
	a := clusterQuery(t, nodes[0], url.Values{"cluster": {"true"}})
	if a.code != http.StatusBadGateway || !strings.Contains(a.body, strings.TrimPrefix(nodes[2].url, "http://")) {
		t.Fatalf("a node down: %d %q, want 502 naming %s", a.code, a.body, nodes[2].url)
	}
	a = clusterQuery(t, nodes[1], url.Values{"cluster": {"true"}, "partial": {"true"}})
	if a.code != 200 {
		t.Fatalf("partial: %d %s", a.code, a.body)
	}
	wantEach(t, a, 3000, func(n int) bool { return n >= 2000 })
	if a.missing != nodes[2].url || a.early != nodes[2].url {
		t.Errorf("partial answer lists missing %q (header %q), want %q", a.missing, a.early, nodes[2].url)
	}

	// What `sluice query --cluster --partial` sees.
	var out strings.Builder
	_, err := (&Client{URL: nodes[0].url}).Query(context.Background(), "events", QueryRequest{Cluster: true, Partial: true}, &out)
	var pe *PartialError
	if !errors.As(err, &pe) || len(pe.Missing) != 1 || pe.Missing[0] != nodes[2].url {
		t.Errorf("client: %v, want a PartialError naming %s", err, nodes[2].url)
	}
	if got := strings.Count(out.String(), "\n"); got != 2000 {
		t.Errorf("client: %d rows, want 2000", got)
	}
	_, err = (&Client{URL: nodes[0].url}).Query(context.Background(), "events", QueryRequest{Cluster: true}, io.Discard)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadGateway {
		t.Errorf("client without partial: %v, want a 502", err)
	}
}

// TestClusterQueryNodeTimeout: a member that accepts connections and never
// answers (a hung process) fails the query after the node timeout, naming
// it, instead of holding it for the query timeout.
func TestClusterQueryNodeTimeout(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	hungURL := "http://" + hung.Addr().String()
	nodes := startCluster(t, 2, hungURL)
	fillNode(t, nodes[0], 0, 10)
	start := time.Now()
	a := clusterQuery(t, nodes[0], url.Values{"cluster": {"true"}})
	elapsed := time.Since(start)
	if a.code != http.StatusBadGateway || !strings.Contains(a.body, hung.Addr().String()) || !strings.Contains(a.body, "timeout") {
		t.Fatalf("hung node: %d %q, want 502 naming %s and the timeout", a.code, a.body, hungURL)
	}
	if elapsed > 5*time.Second { // node_timeout 500ms; the query timeout is 5m
		t.Errorf("took %v with a 500ms node timeout", elapsed)
	}
	a = clusterQuery(t, nodes[1], url.Values{"cluster": {"true"}, "partial": {"true"}})
	wantEach(t, a, 10, nil)
	if a.missing != hungURL {
		t.Errorf("missing %q, want %q", a.missing, hungURL)
	}
}

func TestClusterQueryWithoutConfig(t *testing.T) {
	s := startServer(t, testConfig, "")
	resp, err := http.Get(s.url + "/v1/tables/events/query?cluster=true")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "cluster.members") {
		t.Errorf("%d %s: want 400 saying how to configure a cluster", resp.StatusCode, b)
	}
	for _, q := range []string{"cluster=maybe", "tier=cold"} {
		resp, err := http.Get(s.url + "/v1/tables/events/query?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

// TestClusterQueryBusyCoordinatorKeepsMembers: a coordinator busy with
// its own part for three reader timeouts (a hook holds it there) reads no
// member's answer meanwhile; its heartbeats are the members' progress, so
// the query ends complete, every row once.
func TestClusterQueryBusyCoordinatorKeepsMembers(t *testing.T) {
	lns := make([]net.Listener, 3)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, "http://"+ln.Addr().String())
	}
	const readerTimeout = 500 * time.Millisecond
	cfg := strings.Replace(clusterConfig(members, "5s"), "node_timeout: 5s", "node_timeout: 5s, reader_timeout: 500ms", 1)
	var nodes []*testServer
	for _, ln := range lns {
		nodes = append(nodes, serveConfigOn(t, cfg, "", ln))
	}
	for i, s := range nodes {
		waitReady(t, s.url)
		fillNode(t, s, i*100, 100)
	}
	busy := func() { time.Sleep(3 * readerTimeout) }
	beforeOwnPart.Store(&busy)
	defer beforeOwnPart.Store(nil)
	a := clusterQuery(t, nodes[0], url.Values{"cluster": {"true"}})
	if a.code != 200 || a.body != "" {
		t.Fatalf("a coordinator busy for %v: %d %s", 3*readerTimeout, a.code, a.body)
	}
	wantEach(t, a, 300, nil)
}

// TestClusterQueryClientHangsUp: a client that hangs up in the middle of a
// cluster query's answer is the client's doing, logged as such; it is not
// taken for a member that failed (with partial=true the member would be
// named missing).
func TestClusterQueryClientHangsUp(t *testing.T) {
	nodes := startCluster(t, 2)
	// The member's part is larger than the sockets' buffers, so the
	// coordinator is still copying it when the client goes.
	fillNode(t, nodes[1], 0, 200_000)
	conn, err := net.Dial("tcp", strings.TrimPrefix(nodes[0].url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/tables/events/query?cluster=true&partial=true HTTP/1.1\r\nHost: sluice\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(conn, make([]byte, 64<<10)); err != nil {
		t.Fatalf("the answer's start: %v", err)
	}
	conn.Close()
	// A graceful stop waits for the query's handler to end; the log is
	// read once nothing writes it.
	nodes[0].stop()
	if logs := nodes[0].logs.String(); !strings.Contains(logs, "the client left before the end of the answer") {
		t.Errorf("no line saying the client left; the coordinator's log:\n%s", logs)
	}
	if logs := nodes[0].logs.String(); strings.Contains(logs, "partial answer without the rest of a node") || strings.Contains(logs, "failed mid-stream") {
		t.Errorf("the client's hang-up was logged as a node's failure:\n%s", logs)
	}
}

// TestClusterQueryShareBeforeEnd: a member that finds both its share and
// the end of its request body in (the coordinator's own part was quicker
// than the member's wait) takes the share. A hook holds every member until
// its body has ended, so both are in whenever it looks.
func TestClusterQueryShareBeforeEnd(t *testing.T) {
	nodes := startCluster(t, 2)
	fillNode(t, nodes[1], 0, 10)
	hook := func(ended <-chan struct{}) {
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
		}
	}
	beforeShareWait.Store(&hook)
	defer beforeShareWait.Store(nil)
	for i := range 20 {
		a := clusterQuery(t, nodes[0], url.Values{"cluster": {"true"}})
		if a.code != 200 || a.rows != 10 || a.body != "" {
			t.Fatalf("query %d: %d, %d rows, error %q; want 200 and the member's 10 rows", i, a.code, a.rows, a.body)
		}
	}
}
