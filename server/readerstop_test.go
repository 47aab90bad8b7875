package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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

// commitAnswer is what POST .../compact answered.
type commitAnswer struct {
	code int
	rows int64
	err  error
}

// commitOn asks node for a commit on demand and answers on the channel.
func commitOn(node string) <-chan commitAnswer {
	ch := make(chan commitAnswer, 1)
	go func() {
		client := &http.Client{Timeout: 20 * time.Second}
		resp, err := client.Post(node+"/v1/tables/events/compact", "application/json", nil)
		if err != nil {
			ch <- commitAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		var res struct {
			Rows int64 `json:"rows"`
		}
		err = json.NewDecoder(resp.Body).Decode(&res)
		ch <- commitAnswer{code: resp.StatusCode, rows: res.Rows, err: err}
	}()
	return ch
}

// TestClusterQueryStoppedCoordinatorReleasesMember: a coordinator (a child
// process) that stops itself with SIGSTOP right after its own part, when
// it has ended nothing but has read no member's answer yet, leaves its
// member blocked writing a large answer under its cold-tier hold. The
// member's hold must end within the reader timeout (500 ms here; the query
// timeout is a minute), and its commit then goes through.
func TestClusterQueryStoppedCoordinatorReleasesMember(t *testing.T) {
	const readerTimeout = 500 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	memberURL := "http://" + ln.Addr().String()
	member := serveConfigOn(t, fmt.Sprintf(`
listen: {http: "127.0.0.1:0"}
limits: {query_timeout: 1m}
cluster: {members: [%q], node_timeout: 10s, reader_timeout: 500ms}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
    compact:
      interval: 1h
      after: 1h
      remove: true
      iceberg:
        warehouse: %s
        catalog: {uri: %q}
        node: member
        orphan_interval: -1s
        maintain: {interval: -1s}
`, memberURL, t.TempDir(), filepath.Join(t.TempDir(), "catalog.db")), "", ln)
	waitReady(t, memberURL)
	// The answer's rows are recent (no commit takes them); the commit
	// below takes a few old rows, so that it is quick once it may run.
	fillRecent(t, member, 0, bigAnswerRows)
	fillNode(t, member, bigAnswerRows, 10)

	t.Setenv("SLUICE_TEST_STOP_AFTER_OWN_PART", "1")
	cmd, addr, stderr := startChildConfig(t, t.TempDir(), fmt.Sprintf(`
listen: {http: "127.0.0.1:0"}
cluster: {members: [%q], node_timeout: 10s, reader_timeout: 500ms}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
`, memberURL))
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	coordinator := "http://" + addr
	waitReady(t, coordinator)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queried := make(chan struct{})
	go func() {
		defer close(queried)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, coordinator+"/v1/tables/events/query?cluster=true", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	defer func() { cancel(); <-queried }()
	stoppedDeadline := time.Now().Add(30 * time.Second)
	for !processStopped(t, cmd.Process.Pid) {
		if time.Now().After(stoppedDeadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the coordinator did not reach the end of its own part in 30s:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := time.Now()

	// The member's commit waits for its hold, which ends when the member
	// gives up on its stopped coordinator.
	const bound = 10 * time.Second // the reader timeout, the member's read of its store under -race, slack
	select {
	case c := <-commitOn(memberURL):
		if c.err != nil || c.code != http.StatusOK || c.rows == 0 {
			t.Fatalf("the member's commit: status %d, %d rows, %v: want the member's rows committed", c.code, c.rows, c.err)
		}
		t.Logf("the member committed %d rows %v after its coordinator stopped", c.rows, time.Since(stopped).Round(time.Millisecond))
	case <-time.After(bound):
		// Its log once nothing writes it.
		cmd.Process.Kill()
		member.stop()
		t.Fatalf("the member still held its cold tier %v after its coordinator stopped (reader timeout %v); its log:\n%s", bound, readerTimeout, member.logs.String())
	}
	// Stop the member before reading its log: the handler may still be
	// writing it.
	cmd.Process.Kill()
	member.stop()
	if logs := member.logs.String(); !strings.Contains(logs, "made no progress") {
		t.Errorf("the member did not log its stalled coordinator:\n%s", logs)
	}
}

// processStopped reports whether the process pid is stopped by a signal
// (state T in /proc/pid/stat).
func processStopped(t *testing.T, pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("the coordinator's state: %v", err)
	}
	// The state follows the command name, which is in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
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
