package server

import (
	"os"
	"path/filepath"
	"strings"
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
