package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/server"
)

// bigAnswerRows is more rows than the sockets between a member and its
// coordinator buffer (~60 bytes a row: ~9 MB against at most ~4 MB of send
// buffer and the small receive buffer of a socket nobody reads), so that a
// member whose coordinator does not read is blocked writing its answer.
const bigAnswerRows = 150_000

// fill stores rows n = first..first+count-1 stamped ts, over users users
// (one user per row when users is 0).
func fill(t *testing.T, n *testnode.Node, ts string, first, count, users int) {
	t.Helper()
	var b strings.Builder
	for i := first; i < first+count; i++ {
		u := i
		if users > 0 {
			u = i % users
		}
		fmt.Fprintf(&b, `{"user":"u%d","ts":%q,"n":%d}`+"\n", u, ts, i)
	}
	code, m, _ := post(t, n.URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
	if code != 200 {
		t.Fatalf("ingest: %d %v", code, m)
	}
}

// TestClusterQueryStoppedCoordinatorReleasesMember: a coordinator that
// stops itself with SIGSTOP right after its own part (server.FaultEnv),
// when it has ended nothing but has read no member's answer yet, leaves
// its member blocked writing a large answer under its cold-tier hold. The
// member's hold must end within the reader timeout (500 ms here; the query
// timeout is a minute), and its commit then goes through.
func TestClusterQueryStoppedCoordinatorReleasesMember(t *testing.T) {
	t.Parallel()
	const readerTimeout = 500 * time.Millisecond
	memberAddr := freeAddr(t)
	memberURL := "http://" + memberAddr
	member := nodeAt(t, memberAddr, t.TempDir(), fmt.Sprintf(`
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
`, memberURL, t.TempDir(), filepath.Join(t.TempDir(), "catalog.db")))
	member.Name = "member"
	member.Start(t)
	waitReady(t, member)
	// The answer's rows are recent (no commit takes them); the commit
	// below takes a few old rows, so that it is quick once it may run.
	fill(t, member, time.Now().UTC().Format(time.RFC3339), 0, bigAnswerRows, 50)
	fill(t, member, "2026-11-26T10:00:00Z", bigAnswerRows, 10, 0)

	coordinator := startNode(t, t.TempDir(), fmt.Sprintf(`
cluster: {members: [%q], node_timeout: 10s, reader_timeout: 500ms}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
`, memberURL), server.FaultEnv+"=stop-after-own-part")
	coordinator.Name = "coordinator"

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queried := make(chan struct{})
	go func() {
		defer close(queried)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, coordinator.URL+"/v1/tables/events/query?cluster=true", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	defer func() { cancel(); <-queried }()
	stoppedDeadline := time.Now().Add(30 * time.Second)
	for !processStopped(t, coordinator.Pid()) {
		if time.Now().After(stoppedDeadline) {
			t.Fatalf("the coordinator did not reach the end of its own part in 30s:\n%s", coordinator.Tail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := time.Now()

	// The member's commit waits for its hold, which ends when the member
	// gives up on its stopped coordinator.
	const bound = 10 * time.Second // the reader timeout, the member's read of its store, slack
	select {
	case c := <-commitOn(member.URL):
		if c.err != nil || c.code != http.StatusOK || c.rows == 0 {
			t.Fatalf("the member's commit: status %d, %d rows, %v: want the member's rows committed", c.code, c.rows, c.err)
		}
		t.Logf("the member committed %d rows %v after its coordinator stopped", c.rows, time.Since(stopped).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("the member still held its cold tier %v after its coordinator stopped (reader timeout %v); its log:\n%s", bound, readerTimeout, member.Tail())
	}
	if logs := member.Logs(); !strings.Contains(logs, "made no progress") {
		t.Errorf("the member did not log its stalled coordinator:\n%s", member.Tail())
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
