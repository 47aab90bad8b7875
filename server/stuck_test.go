package server

import (
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stuckConfig is a server whose one computed column runs code on the
// engine given (gopher-lua or luajit), with a 1 s timeout.
func stuckConfig(engine, code, allow, shutdown string) string {
	return `
listen: {http: "127.0.0.1:0"}
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

// sigterm sends SIGTERM and waits for the process, at most limit; it
// returns how long it took and the exit code.
func sigterm(t *testing.T, cmd *exec.Cmd, limit time.Duration) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return time.Since(start), code
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the server still ran %v after SIGTERM", limit)
		return 0, 0
	}
}

// testPathologicalPattern: a hostile row (string.find of 25 a* before a
// missing b on 30 bytes), with a 1 s timeout and a 10 s shutdown_timeout,
// is stored with the column null within a few seconds, /readyz stays 200,
// and SIGTERM ends the process at once.
func testPathologicalPattern(t *testing.T, engine string) {
	code := `function main(row) return string.find(("a"):rep(30), ("a*"):rep(25) .. "b") ~= nil end`
	cmd, addr, stderr := startChildConfig(t, t.TempDir(), stuckConfig(engine, code, "", "10s"))
	url := "http://" + addr
	waitReady(t, url)
	start := time.Now()
	status, res, _ := post(t, url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(`{"user":"ann","ts":"2024-05-01T10:00:00Z"}`+"\n"))
	if status != 200 || res["accepted"] != 1.0 {
		t.Fatalf("ingest: %d %v\n%s", status, res, stderr.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the row took %v against a 1s timeout", took)
	}
	_, body := get(t, url+"/v1/tables/events/query?columns=user,m")
	if rows := lines(body); len(rows) != 1 || rows[0]["m"] != nil {
		t.Errorf("stored: %q, want the row with m null", body)
	}
	if status, body := get(t, url+"/readyz"); status != http.StatusOK {
		t.Errorf("/readyz: %d %s", status, body)
	}
	if took, code := sigterm(t, cmd, 10*time.Second); code != 0 || took > 5*time.Second {
		t.Errorf("SIGTERM: exit %d after %v\n%s", code, took, stderr.String())
	}
}

func TestPathologicalPatternGopherLua(t *testing.T) { testPathologicalPattern(t, "gopher-lua") }

// testStuckScript: a column blocked in os.execute (which no timeout can
// stop) holds its ingest batch: /readyz answers 503 naming the table and
// column, /metrics counts the stuck call, and SIGTERM ends the process
// within shutdown_timeout (exit 1, naming what still ran) instead of
// waiting for ever.
func testStuckScript(t *testing.T, engine string) {
	code := `function main(row) os.execute("exec sleep 20 </dev/null >/dev/null 2>&1") return true end`
	cmd, addr, stderr := startChildConfig(t, t.TempDir(), stuckConfig(engine, code, "os", "3s"))
	url := "http://" + addr
	waitReady(t, url)
	client := &http.Client{Timeout: time.Minute}
	go func() {
		resp, err := client.Post(url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(`{"user":"ann","ts":"2024-05-01T10:00:00Z"}`+"\n"))
		if err == nil {
			resp.Body.Close()
		}
	}()
	var ready string
	waitFor(t, func() bool {
		status, body := get(t, url+"/readyz")
		ready = body
		return status == http.StatusServiceUnavailable
	})
	if !strings.Contains(ready, `table "events" column "m"`) || !strings.Contains(ready, "still runs") {
		t.Errorf("/readyz does not name the stuck column: %q", ready)
	}
	_, metrics := get(t, url+"/metrics")
	if !strings.Contains(metrics, `sluice_compute_stuck_calls{table="events"} 1`) || !strings.Contains(metrics, `sluice_compute_stuck_seconds{script="m",table="events"}`) {
		t.Errorf("/metrics lacks the stuck call:\n%s", metrics)
	}
	took, exit := sigterm(t, cmd, 15*time.Second)
	if exit != 1 || took > 8*time.Second {
		t.Errorf("SIGTERM: exit %d after %v, want 1 within the 3s shutdown_timeout", exit, took)
	}
	if log := stderr.String(); !strings.Contains(log, "shutdown timed out") || !strings.Contains(log, `table \"events\" column \"m\"`) {
		t.Errorf("the log does not say what did not stop:\n%s", log)
	}
}

func TestStuckScriptGopherLua(t *testing.T) { testStuckScript(t, "gopher-lua") }
