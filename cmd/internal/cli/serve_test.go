package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/freeport"
)

// runServeCLI runs a fresh instance of the command args[0] (flags do not carry
// over between runs as they would on the shared rootCmd) and returns its
// stdout.
func runServeCLI(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := map[string]func() *cobra.Command{"ingest": ingestCmd, "query": queryCmd}[args[0]]()
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args[1:])
	if err := cmd.Execute(); err != nil {
		t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

// TestIngestThenQueryExample is the README's "ingest a file and query it
// back" on the bundled example config, straight into a store directory.
func TestIngestThenQueryExample(t *testing.T) {
	data := t.TempDir()
	cfg := "../../../examples/server/sluice.yaml"
	out := runServeCLI(t, "ingest", "--config", cfg, "--data", data, "--table", "events", "../../../examples/server/events.jsonl", "../../../examples/server/events.csv")
	if !strings.Contains(out, `events.jsonl: {"accepted":5,"filtered":1,"failed":0}`) || !strings.Contains(out, `events.csv: {"accepted":2,`) {
		t.Fatalf("ingest output:\n%s", out)
	}
	out = runServeCLI(t, "query", "--config", cfg, "--data", data, "--table", "events", "--hash", "ann", "--from", "2024-05-01T00:00:00Z", "--to", "2024-05-02T00:00:00Z", "--columns", "time,action,amount_cents")
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != 2 || got[0]["amount_cents"] != 1250.0 || got[1]["amount_cents"] != nil || got[0]["action"] != "buy" {
		t.Fatalf("query output:\n%s", out)
	}
	out = runServeCLI(t, "query", "--config", cfg, "--data", data, "--table", "events", "--format", "csv", "--columns", "user,amount_cents", "--where", "amount_cents>=2000")
	if !sameSet(out, "user,amount_cents\ncid,9999\nbob,2000\n") {
		t.Fatalf("csv query:\n%s", out)
	}
}

func sameSet(a, b string) bool {
	la, lb := strings.Split(strings.TrimSpace(a), "\n"), strings.Split(strings.TrimSpace(b), "\n")
	if len(la) != len(lb) || la[0] != lb[0] {
		return false
	}
	m := map[string]bool{}
	for _, l := range la {
		m[l] = true
	}
	for _, l := range lb {
		if !m[l] {
			return false
		}
	}
	return true
}

// TestValidateServerConfig: `sluice validate` takes a server config too, and
// reports every broken column of every table at once.
func TestValidateServerConfig(t *testing.T) {
	var out bytes.Buffer
	cmd := validateCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--config", "../../../examples/server/sluice.yaml"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("validate of the bundled server config: %v", err)
	}
	if !strings.Contains(out.String(), "ok: 2 tables") {
		t.Fatalf("validate output: %q", out.String())
	}

	bad := t.TempDir() + "/bad.yaml"
	const cfg = `tables:
  - name: x
    computed:
      - name: first
        type: int64
        func: "function main(r) return 1"
      - name: second
        type: int64
        func: "function main(r) return end end"
`
	if err := os.WriteFile(bad, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = validateCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--config", bad})
	err := cmd.Execute()
	if err == nil {
		t.Fatal("validate accepted a config with two broken scripts")
	}
	for _, want := range []string{`column "first"`, `column "second"`, "syntax error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validate error does not mention %s: %v", want, err)
		}
	}
}

// TestValidateReportsEveryLayersProblems: package config checks what it can
// alone; a computed column's type and an rdb: section's type names, glob
// and regex are checked by the packages that build them (compute,
// rdbtool; server.ValidateOptions). `sluice validate` and `serve --check`
// report both kinds in one run, each at its place in the file, with the
// messages config gave when it checked them all (these are config's
// TestEveryProblemReported and TestRDBSectionProblemsReported, run whole).
func TestValidateReportsEveryLayersProblems(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{{
		name: "tables.yaml",
		yaml: `
listen: {http: "nocolon"}
limits: {max_inflight: -1}
tables:
  - name: a
    hashBy: missing
    schema: [{name: x, type: complex}]
    on_bad_line: maybe
    ttl: -1h
    computed:
      - {name: c, type: nosuchtype, func: "function main(r) return 1 end"}
    compact: {interval: 1m}
  - name: a
  - name: "bad/name"
`,
		want: []string{
			`listen.http "nocolon"`, "limits.max_inflight", `hashBy "missing"`, `schema[0] "x"`, `unknown type "complex"`,
			`on_bad_line "maybe"`, "ttl: negative", "compact.dir: required", "duplicate table name", `"bad/name"`,
			`tables.yaml: tables[0] "a": computed[0] "c": unknown type "nosuchtype"`,
		},
	}, {
		name: "rdb.yaml",
		yaml: `
tables:
  - name: keys
    ttl: -1h
    rdb:
      db: [0, -2]
      type: [hash, tree]
      prefix: [""]
      pattern: "user:[a"
      regex: "(unclosed"
      min_size: -1
      batch: 2000000
  - name: more
    rdb: {batch: -5}
`,
		want: []string{
			`tables[0] "keys": ttl: negative`,
			`tables[0] "keys": rdb.db[1]: negative database number -2`,
			`tables[0] "keys": rdb.type[1] "tree": want string, list, set, zset, hash, stream or module`,
			`tables[0] "keys": rdb.prefix[0]: empty`,
			`tables[0] "keys": rdb.pattern: rdb: key pattern "user:[a"`,
			`tables[0] "keys": rdb.regex "(unclosed": error parsing regexp`,
			`tables[0] "keys": rdb.min_size: negative`,
			`tables[0] "keys": rdb.batch: 2000000`,
			`tables[1] "more": rdb.batch: -5`,
		},
	}} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"validate", "--config", path}, {"serve", "--check", "--config", path}} {
			cmd := map[string]func() *cobra.Command{"validate": validateCmd, "serve": serveCmd}[args[0]]()
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs(args[1:])
			err := cmd.Execute()
			if err == nil {
				t.Fatalf("sluice %s: accepted", strings.Join(args, " "))
			}
			if !strings.HasPrefix(err.Error(), path+": ") {
				t.Errorf("sluice %s: the error does not start with the file: %v", strings.Join(args, " "), err)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("sluice %s: the error lacks %q:\n%v", strings.Join(args, " "), want, err)
				}
			}
		}
	}
}

// TestServeSIGHUPReloads runs `sluice serve` as a child process and sends it
// SIGHUP: it must log the reload and keep serving (SIGHUP's default action
// ended it at once, without a log line), then stop cleanly on SIGTERM.
func TestServeSIGHUPReloads(t *testing.T) {
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "sluice.yaml")
	yaml := "tables:\n  - name: t\n    computed:\n      - {name: v, type: int64, func: \"function main(row) return 1 end\"}\n"
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRDBCLIProcess$")
	cmd.Env = append(os.Environ(), "SLUICE_RDB_CLI_ARGS="+strings.Join([]string{"serve", "--config", config, "--data", filepath.Join(dir, "data"), "--listen", addr}, "\x1f"))
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ready := func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(20 * time.Millisecond) {
			select {
			case err := <-exited:
				t.Fatalf("sluice serve exited (%v) while waiting for %s:\n%s", err, what, stderr.String())
			default:
			}
			if time.Since(start) > 60*time.Second {
				t.Fatalf("no %s in 60s:\n%s", what, stderr.String())
			}
		}
	}
	waitUntil("readiness", ready)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil("log line of the reload", func() bool { return strings.Contains(stderr.String(), "signal: scripts reloaded") })
	if !ready() {
		t.Fatalf("not ready after SIGHUP:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit 60s after SIGTERM:\n%s", stderr.String())
	}
}

// syncBuffer is a bytes.Buffer a child process's output is copied into
// while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
