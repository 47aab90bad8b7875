// Package cold tests the cold tier through the server: a real server child
// process (this test binary re-executed) with a compact.iceberg section,
// on the versitygw S3 server, killed with SIGKILL in the middle of a
// compaction; and the compacted Iceberg table read by Apache Spark and
// Trino with the configuration docs/cold-tier.md documents.
package cold

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/server"
)

var (
	s3    *coldtest.S3
	s3Err error
)

func TestMain(m *testing.M) {
	testnode.Child() // the server children of every test here
	dir, err := os.MkdirTemp("", "coldtier-e2e-")
	if err != nil {
		panic(err)
	}
	s3, s3Err = coldtest.StartS3(dir)
	code := m.Run()
	sharedTrino.Close() // started by the first test that needs it (keyed_engines_test.go)
	sharedSpark.Close()
	s3.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func post(t *testing.T, url, contentType, body string) []byte {
	t.Helper()
	resp, err := http.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", url, resp.Status, b)
	}
	return b
}

// query returns the rows of GET /v1/tables/events/query?... sorted by n,
// and fails on a row that appears twice.
func query(t *testing.T, base, params string) []string {
	t.Helper()
	resp, err := http.Get(base + "/v1/tables/events/query?" + params)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query: %s: %s", resp.Status, b)
	}
	var rows []string
	seen := map[float64]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("query line %q: %v", line, err)
		}
		if e, ok := m["error"]; ok {
			t.Fatalf("query error: %v", e)
		}
		n, _ := m["n"].(float64)
		if seen[n] {
			t.Errorf("row n=%v returned twice", n)
		}
		seen[n] = true
		rows = append(rows, string(line))
	}
	sort.Strings(rows)
	return rows
}

func metric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			return l[strings.LastIndexByte(l, ' ')+1:]
		}
	}
	return ""
}

// TestServerKill9DuringCompaction runs a server child with a cold tier on
// S3, ingests old and recent rows, and asks for a compaction that the
// fault hook stops after the upload or after the commit; the child is
// killed there with SIGKILL and restarted. Every query over both tiers,
// before and after, returns each row exactly once, with the same values
// (the event times are whole microseconds, the cold tier's unit), and the
// next compaction finishes the work.
//
// The two steps run in parallel: each has its own directory, port, prefix
// in the bucket and node (whose fault point is in its own environment).
func TestServerKill9DuringCompaction(t *testing.T) {
	for _, step := range []string{"after-upload", "after-commit"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			testServerKill9(t, step)
		})
	}
}

func testServerKill9(t *testing.T, step string) {
	coldtest.Require(t, s3Err)
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfgPath := filepath.Join(dir, "sluice.yaml")
	cfg := fmt.Sprintf(`
storage: {dir: %q}
listen: {http: %q}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: f, type: float64}
      - {name: ok, type: bool}
      - {name: doc, type: json}
    compact:
      after: 1h
      remove: true
      iceberg:
        warehouse: s3://%s/e2e-%s
        s3: {endpoint: %q, region: us-east-1, path_style: true}
        node: node-a
        row_group_rows: 1000
`, filepath.Join(dir, "data"), addr, coldtest.Bucket, step, s3.Endpoint)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// The fault point makes the compaction print its step and block there
	// until the test kills the node.
	c := &testnode.Node{Name: "server", Config: cfgPath, URL: "http://" + addr, Log: filepath.Join(dir, "server.log"),
		Env: []string{coldtier.FaultEnv + "=" + step}}
	c.Start(t)
	defer c.Kill()

	// 3000 rows over three old days and 200 in the last half hour.
	now := time.Now().UTC().Truncate(time.Microsecond)
	var body strings.Builder
	old := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3200 {
		ts := old.Add(time.Duration(i%3)*24*time.Hour + time.Duration(i)*time.Second)
		if i >= 3000 {
			ts = now.Add(-time.Duration(i-2999) * time.Second)
		}
		fmt.Fprintf(&body, `{"user":"u%d","ts":%q,"n":%d,"f":%g,"ok":%t,"doc":{"i":%d}}`+"\n",
			i%5, ts.Format(time.RFC3339Nano), i, float64(i)/8, i%2 == 0, i)
	}
	post(t, c.URL+"/v1/tables/events/rows", "application/x-ndjson", body.String())
	want := query(t, c.URL, "")
	if len(want) != 3200 {
		t.Fatalf("%d rows before compaction", len(want))
	}
	wantRange := query(t, c.URL, "from=2024-05-02T12:00:00Z&where=n%3E%3D100&columns=n,user,ts")

	go http.Post(c.URL+"/v1/tables/events/compact", "", nil) // blocks at the fault
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitLog(ctx, "coldtier: fault "+step); err != nil {
		t.Fatal(err)
	}
	c.Kill()

	c.Env = nil
	c.Start(t)
	if got := query(t, c.URL, ""); !equal(got, want) {
		t.Fatalf("after the kill at %s and a restart: %d rows, want %d", step, len(got), len(want))
	}
	if step == "after-commit" {
		if v := metric(t, c.URL, "sluice_coldtier_recovered_runs_total"); v != "1" {
			t.Errorf("recovered runs %q, want 1", v)
		}
	}
	var res server.CompactResult
	if err := json.Unmarshal(post(t, c.URL+"/v1/tables/events/compact", "", ""), &res); err != nil {
		t.Fatal(err)
	}
	wantRows := int64(3000)
	if step == "after-commit" {
		wantRows = 0 // the crashed run was committed; the restart finished it
	}
	if res.Rows != wantRows {
		t.Errorf("compaction after the restart: %d rows, want %d", res.Rows, wantRows)
	}
	if got := query(t, c.URL, ""); !equal(got, want) {
		t.Errorf("after the next compaction: %d rows, want %d", len(got), len(want))
	}
	if got := query(t, c.URL, "from=2024-05-02T12:00:00Z&where=n%3E%3D100&columns=n,user,ts"); !equal(got, wantRange) {
		t.Errorf("range query over both tiers: %d rows, want %d", len(got), len(wantRange))
	}
	if step == "after-upload" {
		if v := metric(t, c.URL, "sluice_coldtier_bytes_uploaded_total"); v == "" || v == "0" {
			t.Errorf("bytes uploaded %q after a run", v)
		}
	}
	if v := metric(t, c.URL, "sluice_compaction_lag_seconds"); v == "" {
		t.Error("no compaction lag metric after a run")
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
	defer stopCancel()
	if err := c.Stop(stopCtx); err != nil {
		t.Error(err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
