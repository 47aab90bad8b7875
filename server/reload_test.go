package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestScriptReload: a Lua file column is re-read every `reload`; a new
// version is used by later batches, a broken one is refused and the last
// good one keeps running.
func TestScriptReload(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "v.lua")
	write := func(src string) {
		if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("function main(row) return 1 end")
	cfg := `
tables:
  - name: r
    reload: 20ms
    computed:
      - {name: v, type: int64, func: ` + script + `}
`
	s := startServer(t, cfg, "")
	ingestV := func() string {
		if code, res, _ := post(t, s.url+"/v1/tables/r/rows", "application/x-ndjson", strings.NewReader(`{"a":1}`+"\n")); code != 200 {
			t.Fatalf("ingest: %d %v", code, res)
		}
		_, body := get(t, s.url+"/v1/tables/r/query?columns=v&limit=1000")
		l := strings.Split(strings.TrimSpace(body), "\n")
		return l[len(l)-1]
	}
	if got := ingestV(); !strings.Contains(got, `"v":1`) {
		t.Fatalf("first version: %s", got)
	}
	write("function main(row) return 2 end -- v2")
	waitFor(t, func() bool {
		_, m := get(t, s.url+"/v1/tables/r")
		return strings.Contains(m, `"Reloads":1`)
	})
	if got := ingestV(); !strings.Contains(got, `"v":2`) {
		t.Fatalf("after reload: %s", got)
	}
	write("function main(row) return ( end")
	waitFor(t, func() bool {
		_, m := get(t, s.url+"/v1/tables/r")
		return strings.Contains(m, `"ReloadErrors":1`)
	})
	time.Sleep(50 * time.Millisecond)
	if got := ingestV(); !strings.Contains(got, `"v":2`) {
		t.Fatalf("after a broken version: %s", got)
	}
}

// TestScriptReloadLoopingTopLevel: a new version whose top level never ends
// is refused after its load timeout (logged, counted), the old version keeps
// serving, a later fix is loaded, and shutdown completes. Without the load
// timeout it wedged the reload loop and then SIGTERM.
func TestScriptReloadLoopingTopLevel(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "v.lua")
	write := func(src string) {
		if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("function main(row) return 1 end")
	// Table s: a time limit so long that only the shutdown can stop the
	// load of a looping version.
	slow := filepath.Join(dir, "s.lua")
	if err := os.WriteFile(slow, []byte("function main(row) return 1 end"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `
tables:
  - name: r
    reload: 20ms
    computed:
      - {name: v, type: int64, func: ` + script + `, timeout: 200ms}
  - name: s
    reload: 20ms
    computed:
      - {name: v, type: int64, func: ` + slow + `, timeout: 1h}
`
	s := startServer(t, cfg, "")
	ingestV := func() string {
		if code, res, _ := post(t, s.url+"/v1/tables/r/rows", "application/x-ndjson", strings.NewReader(`{"a":1}`+"\n")); code != 200 {
			t.Fatalf("ingest: %d %v", code, res)
		}
		_, body := get(t, s.url+"/v1/tables/r/query?columns=v&limit=1000")
		l := strings.Split(strings.TrimSpace(body), "\n")
		return l[len(l)-1]
	}
	write("while true do end\nfunction main(row) return 2 end")
	waitFor(t, func() bool {
		_, m := get(t, s.url+"/v1/tables/r")
		return strings.Contains(m, `"ReloadErrors":1`)
	})
	if got := ingestV(); !strings.Contains(got, `"v":1`) {
		t.Fatalf("after a looping version: %s", got)
	}
	write("function main(row) return 3 end")
	waitFor(t, func() bool {
		_, m := get(t, s.url+"/v1/tables/r")
		return strings.Contains(m, `"Reloads":1`)
	})
	if got := ingestV(); !strings.Contains(got, `"v":3`) {
		t.Fatalf("after the fix: %s", got)
	}
	// A looping version again, and one in table s whose load only the
	// shutdown can stop; then shutdown while they load.
	write("while true do end")
	if err := os.WriteFile(slow, []byte("while true do end"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the reload loop start loading it
	stopped := make(chan struct{})
	go func() { s.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown did not complete in 20s")
	}
	// Read once the server is down: nothing writes the log any more.
	if logs := s.logs.String(); !strings.Contains(logs, "load timeout") || !strings.Contains(logs, script) {
		t.Fatalf("the refused version is not logged with the script and the timeout:\n%s", logs)
	}
}

// TestRestartWithBrokenScript: a script broken while the server ran (the
// reload refused it) must not keep the node down at the next start. The
// child process restarts with the table degraded: /readyz names it with the
// script's error and line, its writes get 503, it stays readable, and the
// other table serves. SIGHUP then reloads the scripts of the other table
// (it used to end the process at once, without a log line). Before, the
// restart exited 2 with the script error.
func TestRestartWithBrokenScript(t *testing.T) {
	dir := t.TempDir()
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
	cmd, addr, stderr := startChildConfig(t, dir, cfg)
	url := "http://" + addr
	waitReady(t, url)
	for _, table := range []string{"a", "b"} {
		if code, res := ingestV(url, table); code != 200 {
			t.Fatalf("first start: ingest into %s: %d %s", table, code, res)
		}
	}
	// Broken on its second line: the running server refuses it.
	writeScript(bad, "function main(row)\n  return ( end")
	waitFor(t, func() bool {
		_, m := get(t, url+"/v1/tables/b")
		return strings.Contains(m, `"ReloadErrors":1`)
	})
	stopChild(t, cmd, stderr)

	cmd, addr, stderr = startChildConfig(t, dir, cfg)
	url = "http://" + addr
	waitReady(t, url)
	code, ready := get(t, url+"/readyz")
	if code != 200 || !strings.Contains(ready, `degraded: table "b"`) || !strings.Contains(ready, bad+":2") {
		t.Fatalf("/readyz after a restart with a broken script: %d %q (want 200 naming table b and %s:2)", code, ready, bad)
	}
	if code, res := ingestV(url, "b"); code != 503 || !strings.Contains(res, "refuses writes") || !strings.Contains(res, bad+":2") {
		t.Fatalf("write to the degraded table: %d %s", code, res)
	}
	if _, body := get(t, url+"/v1/tables/b/query?columns=v"); len(lines(body)) != 1 {
		t.Fatalf("the degraded table is not readable: %q", body)
	}
	if code, res := ingestV(url, "a"); code != 200 {
		t.Fatalf("the other table does not serve: %d %s", code, res)
	}
	if _, m := get(t, url+"/metrics"); !strings.Contains(m, `sluice_table_degraded{table="b"} 1`) || !strings.Contains(m, `sluice_table_degraded{table="a"} 0`) {
		t.Fatalf("sluice_table_degraded not in /metrics")
	}

	// SIGHUP: table a (no reload: loop) picks up its new version.
	writeScript(good, "function main(row) return 2 end")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, m := get(t, url+"/v1/tables/a")
		return strings.Contains(m, `"Reloads":1`)
	})
	if code, res := ingestV(url, "a"); code != 200 {
		t.Fatalf("after SIGHUP: ingest: %d %s", code, res)
	}
	if _, body := get(t, url+"/v1/tables/a/query?columns=v&where=v=2"); len(lines(body)) != 1 {
		t.Fatalf("SIGHUP did not reload table a's script: %q", body)
	}
	stopChild(t, cmd, stderr)
	// Read once the child is gone: nothing writes it any more.
	if logs := stderr.String(); !strings.Contains(logs, "signal: reloading scripts") || !strings.Contains(logs, "table degraded") {
		t.Fatalf("the SIGHUP or the degraded table is not logged:\n%s", logs)
	}
}

// stopChild sends SIGTERM to a child server and waits for a clean exit.
func stopChild(t *testing.T, cmd *exec.Cmd, stderr *strings.Builder) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child exit: %v\n%s", err, stderr.String())
	}
}
