package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stuckConfig is a server whose one computed column runs code on the
// engine given (gopher-lua or luajit), with a 1 s timeout.
func stuckConfig(engine, code, allow, shutdown string) string {
	return `
limits: {shutdown_timeout: ` + shutdown + `}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
    computed:
      - name: m
        type: bool
        nullable: true
        timeout: 1s
        engine: ` + engine + `
        allow: [` + allow + `]
        func: '` + code + `'
`
}

// testPathologicalPattern: a hostile row (string.find of 25 a* before a
// missing b on 30 bytes), with a 1 s timeout and a 10 s shutdown_timeout,
// is stored with the column null within a few seconds, /readyz stays 200,
// and SIGTERM ends the process at once.
func testPathologicalPattern(t *testing.T, engine string) {
	t.Parallel()
	code := `function main(row) return string.find(("a"):rep(30), ("a*"):rep(25) .. "b") ~= nil end`
	n := startNode(t, t.TempDir(), stuckConfig(engine, code, "", "10s"))
	start := time.Now()
	status, res, _ := post(t, n.URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(`{"user":"ann","ts":"2024-05-01T10:00:00Z"}`+"\n"))
	if status != 200 || res["accepted"] != 1.0 {
		t.Fatalf("ingest: %d %v\n%s", status, res, n.Tail())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the row took %v against a 1s timeout", took)
	}
	_, body := get(t, n.URL+"/v1/tables/events/query?columns=user,m")
	if rows := lines(body); len(rows) != 1 || rows[0]["m"] != nil {
		t.Errorf("stored: %q, want the row with m null", body)
	}
	if status, body := get(t, n.URL+"/readyz"); status != http.StatusOK {
		t.Errorf("/readyz: %d %s", status, body)
	}
	if took, code := sigterm(t, n, 10*time.Second); code != 0 || took > 5*time.Second {
		t.Errorf("SIGTERM: exit %d after %v\n%s", code, took, n.Tail())
	}
}

func TestPathologicalPatternGopherLua(t *testing.T) { testPathologicalPattern(t, "gopher-lua") }

// testStuckScript: a column blocked in os.execute (which no timeout can
// stop) holds its ingest batch: /readyz answers 503 naming the table and
// column, /metrics counts the stuck call, and SIGTERM ends the process
// within shutdown_timeout (exit 1, naming what still ran) instead of
// waiting for ever.
func testStuckScript(t *testing.T, engine string) {
	t.Parallel()
	code := `function main(row) os.execute("exec sleep 20 </dev/null >/dev/null 2>&1") return true end`
	n := startNode(t, t.TempDir(), stuckConfig(engine, code, "os", "3s"))
	client := &http.Client{Timeout: time.Minute}
	go func() {
		resp, err := client.Post(n.URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(`{"user":"ann","ts":"2024-05-01T10:00:00Z"}`+"\n"))
		if err == nil {
			resp.Body.Close()
		}
	}()
	var ready string
	waitFor(t, func() bool {
		status, body := get(t, n.URL+"/readyz")
		ready = body
		return status == http.StatusServiceUnavailable
	})
	if !strings.Contains(ready, `table "events" column "m"`) || !strings.Contains(ready, "still runs") {
		t.Errorf("/readyz does not name the stuck column: %q", ready)
	}
	_, metrics := get(t, n.URL+"/metrics")
	if !strings.Contains(metrics, `sluice_compute_stuck_calls{table="events"} 1`) || !strings.Contains(metrics, `sluice_compute_stuck_seconds{script="m",table="events"}`) {
		t.Errorf("/metrics lacks the stuck call:\n%s", metrics)
	}
	took, exit := sigterm(t, n, 15*time.Second)
	if exit != 1 || took > 8*time.Second {
		t.Errorf("SIGTERM: exit %d after %v, want 1 within the 3s shutdown_timeout", exit, took)
	}
	if log := n.Logs(); !strings.Contains(log, "shutdown timed out") || !strings.Contains(log, `table \"events\" column \"m\"`) {
		t.Errorf("the log does not say what did not stop:\n%s", log)
	}
}

func TestStuckScriptGopherLua(t *testing.T) { testStuckScript(t, "gopher-lua") }

// TestRestartWithBrokenScript: a script broken while the server ran (the
// reload refused it) must not keep the node down at the next start. The
// process restarts with the table degraded: /readyz names it with the
// script's error and line, its writes get 503, it stays readable, and the
// other table serves. SIGHUP then reloads the scripts of the other table
// (it used to end the process at once, without a log line). Before, the
// restart exited 2 with the script error.
func TestRestartWithBrokenScript(t *testing.T) {
	t.Parallel()
	scripts := t.TempDir()
	good := filepath.Join(scripts, "good.lua")
	bad := filepath.Join(scripts, "bad.lua")
	writeScript := func(path, src string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeScript(good, "function main(row) return 1 end")
	writeScript(bad, "function main(row) return 1 end")
	cfg := `
tables:
  - name: a
    computed:
      - {name: v, type: int64, func: ` + good + `}
  - name: b
    reload: 20ms
    computed:
      - {name: v, type: int64, func: ` + bad + `}
`
	ingestV := func(url, table string) (int, string) {
		t.Helper()
		code, res, _ := post(t, url+"/v1/tables/"+table+"/rows", "application/x-ndjson", strings.NewReader(`{"a":1}`+"\n"))
		return code, fmt.Sprint(res)
	}
	n := startNode(t, t.TempDir(), cfg)
	for _, table := range []string{"a", "b"} {
		if code, res := ingestV(n.URL, table); code != 200 {
			t.Fatalf("first start: ingest into %s: %d %s", table, code, res)
		}
	}
	// Broken on its second line: the running server refuses it.
	writeScript(bad, "function main(row)\n  return ( end")
	waitFor(t, func() bool {
		_, m := get(t, n.URL+"/v1/tables/b")
		return strings.Contains(m, `"ReloadErrors":1`)
	})
	stop(t, n)

	n.Start(t)
	waitReady(t, n)
	code, ready := get(t, n.URL+"/readyz")
	if code != 200 || !strings.Contains(ready, `degraded: table "b"`) || !strings.Contains(ready, bad+":2") {
		t.Fatalf("/readyz after a restart with a broken script: %d %q (want 200 naming table b and %s:2)", code, ready, bad)
	}
	if code, res := ingestV(n.URL, "b"); code != 503 || !strings.Contains(res, "refuses writes") || !strings.Contains(res, bad+":2") {
		t.Fatalf("write to the degraded table: %d %s", code, res)
	}
	if _, body := get(t, n.URL+"/v1/tables/b/query?columns=v"); len(lines(body)) != 1 {
		t.Fatalf("the degraded table is not readable: %q", body)
	}
	if code, res := ingestV(n.URL, "a"); code != 200 {
		t.Fatalf("the other table does not serve: %d %s", code, res)
	}
	if _, m := get(t, n.URL+"/metrics"); !strings.Contains(m, `sluice_table_degraded{table="b"} 1`) || !strings.Contains(m, `sluice_table_degraded{table="a"} 0`) {
		t.Fatalf("sluice_table_degraded not in /metrics")
	}

	// SIGHUP: table a (no reload: loop) picks up its new version.
	writeScript(good, "function main(row) return 2 end")
	if err := n.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, m := get(t, n.URL+"/v1/tables/a")
		return strings.Contains(m, `"Reloads":1`)
	})
	if code, res := ingestV(n.URL, "a"); code != 200 {
		t.Fatalf("after SIGHUP: ingest: %d %s", code, res)
	}
	if _, body := get(t, n.URL+"/v1/tables/a/query?columns=v&where=v=2"); len(lines(body)) != 1 {
		t.Fatalf("SIGHUP did not reload table a's script: %q", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Read once the process is gone: nothing writes the log any more.
	if logs := n.Logs(); !strings.Contains(logs, "signal: reloading scripts") || !strings.Contains(logs, "table degraded") {
		t.Fatalf("the SIGHUP or the degraded table is not logged:\n%s", logs)
	}
}
