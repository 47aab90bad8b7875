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
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/server"
)

// TestServerKeyedKill9 runs a server child whose table has a primary key
// and a continuous cold tier, upserts and deletes keys over HTTP, and
// kills it with SIGKILL in a compaction that the fault hook stops after
// the upload or after the commit (with the store keeping and removing
// committed rows). The server's query returns the produced state, one row
// per key with its last note and no deleted key, before the kill, after
// the restart and after the next compaction.
func TestServerKeyedKill9(t *testing.T) {
	for _, remove := range []bool{true, false} {
		for _, step := range []string{"after-upload", "after-commit"} {
			t.Run(fmt.Sprintf("%s/remove=%v", step, remove), func(t *testing.T) { testServerKeyedKill9(t, step, remove) })
		}
	}
}

func testServerKeyedKill9(t *testing.T, step string, remove bool) {
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
    primary_key: [n]
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: note, type: string}
    compact:
      after: 1h
      remove: %v
      iceberg:
        continuous: true
        warehouse: s3://%s/e2e-keyed-%s-%v
        s3: {endpoint: %q, region: us-east-1, path_style: true}
        node: node-a
`, filepath.Join(dir, "data"), addr, remove, coldtest.Bucket, step, remove, s3.Endpoint)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	old := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	rows := func(ns []int64, note string) string {
		var b strings.Builder
		for _, n := range ns {
			ts := old.Add(time.Duration(n%3)*24*time.Hour + time.Duration(len(note))*time.Minute)
			fmt.Fprintf(&b, `{"user":"u%d","ts":%q,"n":%d,"note":%q}`+"\n", n%5, ts.Format(time.RFC3339Nano), n, note)
		}
		return b.String()
	}
	upsert := func(base string, ns []int64, note string) {
		t.Helper()
		post(t, base+"/v1/tables/events/rows", "application/x-ndjson", rows(ns, note))
		for _, n := range ns {
			want[n] = note
		}
	}
	remove_ := func(base string, ns []int64) {
		t.Helper()
		req, err := http.NewRequest(http.MethodDelete, base+"/v1/tables/events/rows", strings.NewReader(rows(ns, "")))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE rows: %s: %s", resp.Status, b)
		}
		for _, n := range ns {
			delete(want, n)
		}
	}
	span := func(from, to int64) []int64 {
		var ns []int64
		for n := from; n < to; n++ {
			ns = append(ns, n)
		}
		return ns
	}
	check := func(base, when string) {
		t.Helper()
		got := keyedQuery(t, base)
		var missing, extra, stale int
		for n, note := range want {
			switch g, ok := got[n]; {
			case !ok:
				missing++
			case g != note:
				stale++
			}
		}
		for n := range got {
			if _, ok := want[n]; !ok {
				extra++
			}
		}
		if missing+extra+stale > 0 {
			t.Errorf("%s: %d keys missing, %d deleted keys present, %d keys with an older note (of %d)", when, missing, extra, stale, len(want))
		}
	}
	compact := func(base string) int64 {
		t.Helper()
		var res server.CompactResult
		if err := json.Unmarshal(post(t, base+"/v1/tables/events/compact", "", ""), &res); err != nil {
			t.Fatal(err)
		}
		return res.Rows
	}

	c := &testnode.Node{Name: "server", Config: cfgPath, URL: "http://" + addr, Log: filepath.Join(dir, "server.log")}
	c.Start(t)
	defer c.Kill()
	upsert(c.URL, span(0, 300), "v1")
	if n := compact(c.URL); n != 300 {
		t.Fatalf("the first compaction: %d rows, want 300", n)
	}
	check(c.URL, "after the first compaction")
	stop := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop()

	// The fault point makes the compaction print its step and block there
	// until the test kills the node.
	c.Env = []string{coldtier.FaultEnv + "=" + step}
	c.Start(t)
	upsert(c.URL, span(0, 100), "v2")
	remove_(c.URL, span(200, 250))
	remove_(c.URL, span(90, 100))
	upsert(c.URL, span(95, 100), "v3")
	upsert(c.URL, span(1000, 1050), "v2")
	check(c.URL, "before the compaction")
	go http.Post(c.URL+"/v1/tables/events/compact", "", nil) // blocks at the fault
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitLog(ctx, "coldtier: fault "+step); err != nil {
		t.Fatal(err)
	}
	c.Kill()

	c.Env = nil
	c.Start(t)
	check(c.URL, fmt.Sprintf("after the kill at %s and a restart", step))
	wantRows := map[string]int64{"after-upload": 145, "after-commit": 0}[step]
	if n := compact(c.URL); n != wantRows {
		t.Errorf("the compaction after the restart: %d rows, want %d", n, wantRows)
	}
	check(c.URL, "after the next compaction")
	stop()
}

// keyedQuery reads n and note of every row through the server's query,
// failing on a key returned twice.
func keyedQuery(t *testing.T, base string) map[int64]string {
	t.Helper()
	resp, err := http.Get(base + "/v1/tables/events/query?columns=n,note")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query: %s: %s", resp.Status, b)
	}
	got := map[int64]string{}
	twice := 0
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r struct {
			N     *int64
			Note  string
			Error string
		}
		if err := json.Unmarshal(line, &r); err != nil || r.Error != "" || r.N == nil {
			t.Fatalf("query line %q: %v %s", line, err, r.Error)
		}
		if _, ok := got[*r.N]; ok {
			twice++
		}
		got[*r.N] = r.Note
	}
	if twice > 0 {
		t.Errorf("the query returned %d keys twice", twice)
	}
	return got
}
