package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compute/plugbuild"
)

// exampleDir copies examples/ to a temporary directory and builds its plugin
// there with the test binary's flags.
func exampleDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"computed.yaml", "computed_test.yaml", "events.jsonl", "scripts/age_days.lua", "scripts/not_test.lua"} {
		data, err := os.ReadFile(filepath.Join("../../../examples", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile("../../../examples/plugin/upper.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	plugbuild.Build(t, filepath.Join(dir, "plugin"), "upper-v1.so", string(src))
	return dir
}

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errOut)
	rootCmd.SetIn(strings.NewReader(""))
	rootCmd.SetArgs(args)
	err := rootCmd.Execute()
	return out.String(), errOut.String(), err
}

func TestComputeExample(t *testing.T) {
	dir := exampleDir(t)
	outFile, dlFile := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "dl.jsonl")
	_, stderr, err := run(t, "compute", "--config", filepath.Join(dir, "computed.yaml"), "--input", filepath.Join(dir, "events.jsonl"), "--output", outFile, "--dead-letter", dlFile, "--batch", "2")
	if err != nil {
		t.Fatal(err, stderr)
	}
	out, _ := os.ReadFile(outFile)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d rows out, want 3 (the test event filtered, the bad line and the row without created dead-lettered):\n%s", len(lines), out)
	}
	var first map[string]any
	dec := json.NewDecoder(strings.NewReader(lines[0]))
	dec.UseNumber()
	if err := dec.Decode(&first); err != nil {
		t.Fatal(err)
	}
	if first["upper_user"] != "ADA" || first["age_days"] != json.Number("1157") || first["account"] != json.Number("9007199254740993") || first["is_vip"] != true || len(first["id"].(string)) != 32 {
		t.Errorf("first row %v", first)
	}
	if !strings.Contains(lines[2], `"upper_user":null`) {
		t.Errorf("the plugin's error should give a null column (policy null): %s", lines[2])
	}
	dl, _ := os.ReadFile(dlFile)
	if !strings.Contains(string(dl), `"loader":"input","source":"","error":"line 5:`) || !strings.Contains(string(dl), `"column":"age_days","loader":"lua"`) {
		t.Errorf("dead letters:\n%s", dl)
	}
	for _, want := range []string{"6 lines in, 3 rows out, 1 dropped, 2 dead-lettered, 1 bad lines", "upper_user  plugin", "user is int64, want a string"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, stderr)
		}
	}
}

func TestValidateAndTestExample(t *testing.T) {
	dir := exampleDir(t)
	out, _, err := run(t, "validate", "--config", filepath.Join(dir, "computed.yaml"))
	if err != nil || !strings.Contains(out, "ok: 5 computed columns, 1 filters") {
		t.Errorf("validate: %v\n%s", err, out)
	}
	out, _, err = run(t, "test", filepath.Join(dir, "computed_test.yaml"))
	if err != nil || !strings.Contains(out, "5 tests, 0 failed") {
		t.Errorf("test: %v\n%s", err, out)
	}
	// A failing case fails the command and says why.
	bad := filepath.Join(dir, "bad_test.yaml")
	os.WriteFile(bad, []byte("config: computed.yaml\ntests:\n  - name: wrong\n    input: {event: login, user: ada, created: 0, time: 86400}\n    expect_columns: {age_days: 2}\n"), 0o644)
	out, _, err = run(t, "test", bad)
	if err == nil || !strings.Contains(out, `FAIL`) || !strings.Contains(out, `column "age_days"`) {
		t.Errorf("failing test: %v\n%s", err, out)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	os.WriteFile(cfg, []byte(`computed:
  - {name: a, type: jsonb, func: make://identifier}
  - {name: b, type: int64, func: "function other(row) return 1 end"}
  - {name: c, type: int64, func: missing.lua}
  - {name: d, type: int64, func: missing.so, funcname: F}
filters:
  - {name: f, func: "function main(row) return true"}
`), 0o644)
	_, _, err := run(t, "validate", "--config", cfg)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`unknown type "jsonb"`, `column "b" (lua inline)`, `no function "main"`, `column "c" (lua missing.lua)`, `column "d" (plugin missing.so)`, `filter "f" (lua inline)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestComputeLossExitStatus: rows lost for lack of --dead-letter (a dead
// letter and a bad line in the example) make the exit status non-zero,
// unless --allow-loss; the help says so. Flags are given explicitly: the
// root command and its flag values are shared by the tests.
func TestComputeLossExitStatus(t *testing.T) {
	dir := exampleDir(t)
	args := []string{"compute", "--config", filepath.Join(dir, "computed.yaml"), "--input", filepath.Join(dir, "events.jsonl"), "--output", filepath.Join(dir, "out.jsonl"), "--dead-letter="}
	_, stderr, err := run(t, append(args, "--allow-loss=false")...)
	if err == nil || !strings.Contains(err.Error(), "2 rows lost") || !strings.Contains(err.Error(), "--dead-letter") || !strings.Contains(err.Error(), "--allow-loss") {
		t.Fatalf("without --dead-letter: err = %v\n%s", err, stderr)
	}
	if _, stderr, err := run(t, append(args, "--allow-loss")...); err != nil {
		t.Fatalf("with --allow-loss: %v\n%s", err, stderr)
	}
	out, _, _ := run(t, "compute", "--help")
	if !strings.Contains(out, "--allow-loss") || !strings.Contains(out, "Exit status") {
		t.Errorf("compute --help does not explain the exit status:\n%s", out)
	}
}

// TestTestHelpFlag: `sluice test --help` showed `--config config:`, pflag
// taking the backquoted word of the usage as the value's name.
func TestTestHelpFlag(t *testing.T) {
	out, _, err := run(t, "test", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "config:   ") || strings.Contains(out, "--config config") || !strings.Contains(out, "--config string") {
		t.Errorf("test --help:\n%s", out)
	}
}

// TestValidateDoesNotHangOrCrash: a top level that never ends and a plugin
// whose init panics are reported by validate; unguarded, the first hung
// and the second crashed the process.
func TestValidateDoesNotHangOrCrash(t *testing.T) {
	dir := t.TempDir()
	so := plugbuild.Build(t, dir, "initpanic.so", `package main

func init() { panic("init says no") }

func F(map[string]interface{}) (interface{}, error) { return nil, nil }
`)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`computed:
  - {name: loops, type: int64, timeout: 100ms, func: "while true do end function main(row) return 1 end"}
  - {name: p, type: string, func: `+so+`, funcname: F}
`), 0o644)
	done := make(chan error, 1)
	go func() { _, _, err := run(t, "validate", "--config", cfg); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("validate still running after 60s")
	}
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`column "loops"`, "load timeout", `column "p"`, "init panicked: init says no"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
