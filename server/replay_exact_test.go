package server

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
)

// TestReplayTwoNodesAtOnce: two nodes of one cold tier replay the same
// dead letter at the same moment, both having read it from the shared
// Iceberg table before either stored anything (forced through
// replayHook); after both commit, the Iceberg tables hold the replayed row
// once and the dead letter's replay record once.
func TestReplayTwoNodesAtOnce(t *testing.T) {
	s3, err := coldtest.StartS3(t.TempDir())
	coldtest.Require(t, err)
	t.Cleanup(s3.Stop)
	script := filepath.Join(t.TempDir(), "twice.lua")
	writeScript := func(src string) {
		if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeScript(`function main(row) if row.n == 3 then error("n is 3") end return row.n * 2 end`)
	var lns []net.Listener
	var members []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		members = append(members, fmt.Sprintf("%q", "http://"+ln.Addr().String()))
	}
	catalog := filepath.Join(t.TempDir(), "catalog.db")
	var nodes []*testServer
	for i, ln := range lns {
		cfg := strings.Replace(keepNodeConfig(members, fmt.Sprintf("node%d", i), s3.Endpoint, t.Name(), catalog),
			"    compact:\n", fmt.Sprintf("    computed:\n      - {name: twice, type: int64, on_error: deadletter, func: %q}\n    compact:\n", script), 1)
		nodes = append(nodes, serveConfigOn(t, cfg, t.TempDir(), ln))
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	a := nodes[0]
	ingestLines(t, a, []string{`{"user":"u1","ts":"2024-05-01T10:00:00Z","n":1}`, `{"user":"u3","ts":"2024-05-01T10:00:00Z","n":3}`})
	commitNow(t, a)
	if _, err := a.CompactNow(context.Background(), "events"+DeadLetterSuffix); err != nil {
		t.Fatal(err)
	}

	writeScript(`function main(row) return row.n * 2 end -- fixed`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, s := range nodes {
		if err := s.ReloadScripts(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each replay waits after its read until the other has read too.
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	replayHook = func(string) {
		arrived.Done()
		select {
		case <-both:
		case <-time.After(30 * time.Second):
			t.Error("the other replay never read its dead letters")
		}
	}
	t.Cleanup(func() { replayHook = nil })
	results := make([]ReplayResult, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, s := range nodes {
		wg.Go(func() { results[i], errs[i] = s.Replay(ctx, "events", ReplayOptions{}) })
	}
	wg.Wait()
	replayHook = nil
	for i := range nodes {
		if errs[i] != nil || results[i].Replayed != 1 {
			t.Fatalf("node %d's replay: %+v %v; want the dead letter replayed (both read it first)", i, results[i], errs[i])
		}
	}
	for _, s := range nodes {
		commitNow(t, s)
		if _, err := s.CompactNow(ctx, "events"+DeadLetterSuffix); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range nodes {
		rows, failed := queryRows(t, s, url.Values{"columns": {"n", "twice"}})
		if failed != "" {
			t.Fatal(failed)
		}
		eachOnce(t, fmt.Sprintf("node %d after both replays and commits", i), rows, []int{1, 3})
		if rows[3][0]["twice"] != 6.0 {
			t.Errorf("node %d: the replayed row %v, want twice 6", i, rows[3][0])
		}
		_, out := get(t, s.url+"/v1/tables/events_deadletter/query?columns=replay_of&format=ndjson")
		records := 0
		for _, d := range lines(out) {
			if of, _ := d["replay_of"].(string); of != "" {
				records++
			}
		}
		if records != 1 {
			t.Errorf("node %d: %d replay records, want 1: %s", i, records, out)
		}
	}
}
