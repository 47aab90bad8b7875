// Package server_test tests what only a server process shows, on nodes
// that are this test binary re-executed (internal/testnode): SIGTERM
// loses no acknowledged row, SIGKILL mid-stream or at a fault point leaves
// whole batches, SIGHUP reloads scripts, SIGTERM ends a server whose
// script is stuck, a process's peak memory under hostile scripts and large
// bodies, and a cluster coordinator frozen with SIGSTOP. The in-process
// tests of the same code are server's own, under the race detector.
//
// The package holds tests only and is named server_test, beside sluice's
// server package.
package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/sluicedb/sluice/coldtier" // the cold tier of a cluster member's config
	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testnode"
)

func TestMain(m *testing.M) {
	testnode.Child()
	os.Exit(m.Run())
}

// testConfig is one table of four columns with a filter and a small body
// limit.
const testConfig = `
limits: {max_body_bytes: 4096, read_timeout: 2s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: note, type: string}
    on_bad_line: reject
    filters:
      - name: not_test
        func: "function main(row) return row.user ~= 'test' end"
`

// newNode is a node serving yaml on a free port of 127.0.0.1, with store
// as its storage directory and env added to its environment; the listen
// address and the directory are the config's overrides (SLUICE_...), so
// yaml names neither. The node is killed when the test ends.
func newNode(t testing.TB, store, yaml string, env ...string) *testnode.Node {
	t.Helper()
	return nodeAt(t, freeAddr(t), store, yaml, env...)
}

// freeAddr is a free port of 127.0.0.1, for a node whose config names
// its own address (a cluster member).
func freeAddr(t testing.TB) string {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// nodeAt is newNode on addr.
func nodeAt(t testing.TB, addr, store, yaml string, env ...string) *testnode.Node {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &testnode.Node{Name: "server", Config: cfg, URL: "http://" + addr, Log: filepath.Join(dir, "server.log"),
		Env: append([]string{"SLUICE_LISTEN_HTTP=" + addr, "SLUICE_STORAGE_DIR=" + store}, env...)}
	t.Cleanup(n.Kill)
	return n
}

// startNode is newNode started, and ready (/readyz 200).
func startNode(t *testing.T, store, yaml string, env ...string) *testnode.Node {
	t.Helper()
	n := newNode(t, store, yaml, env...)
	n.Start(t)
	waitReady(t, n)
	return n
}

// waitReady waits for /readyz to answer 200, at most a minute.
func waitReady(t *testing.T, n *testnode.Node) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := get(t, n.URL+"/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready in a minute: %d %s\n%s", n.Name, code, body, n.Tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var client = &http.Client{Timeout: time.Minute}

// post sends body and decodes the JSON answer, if any.
func post(t *testing.T, url, ctype string, body io.Reader, hdr ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m, resp.Header
}

// get answers url's status and body; a connection error is the status 0
// (a node starting or gone).
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// lines decodes an NDJSON answer.
func lines(s string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// sigterm sends SIGTERM and waits for the node to exit, at most limit; it
// returns how long it took and the exit code.
func sigterm(t *testing.T, n *testnode.Node, limit time.Duration) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	if err := n.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := n.Wait(ctx); err != nil {
		t.Fatalf("the server still ran %v after SIGTERM: %v", limit, err)
	}
	return time.Since(start), n.ProcessState().ExitCode()
}

// stop sends SIGTERM and wants a clean exit within a minute.
func stop(t *testing.T, n *testnode.Node) {
	t.Helper()
	if took, code := sigterm(t, n, time.Minute); code != 0 {
		t.Fatalf("%s exited %d %v after SIGTERM:\n%s", n.Name, code, took, n.Tail())
	}
}
