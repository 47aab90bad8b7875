package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRDBCLIProcess is not a test: when SLUICE_RDB_CLI_ARGS is set, the
// test binary becomes the sluice command (main() with those arguments), so
// the tests below can check the real exit status and stderr.
func TestRDBCLIProcess(t *testing.T) {
	args := os.Getenv("SLUICE_RDB_CLI_ARGS")
	if args == "" {
		t.Skip("helper process")
	}
	os.Args = append([]string{"sluice"}, strings.Split(args, "\x1f")...)
	os.Exit(Main("sluice", os.Args[1:]))
	os.Exit(0)
}

// runCLI runs `sluice args...` in a child process.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRDBCLIProcess$")
	cmd.Env = append(os.Environ(), "SLUICE_RDB_CLI_ARGS="+strings.Join(args, "\x1f"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

var fixture = filepath.Join("..", "..", "..", "rdb", "testdata", "redis", "redis-7.0.15.rdb")

func TestRDBTruncatedFileFails(t *testing.T) {
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.rdb")
	if err := os.WriteFile(cut, data[:len(data)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verb := range [][]string{{"jsonl"}, {"json"}, {"keys"}, {"count"}, {"memory"}, {"memory", "top"}} {
		args := append(append([]string{"rdb"}, verb...), "--no-progress", cut)
		_, stderr, code := runCLI(t, args...)
		if code == 0 {
			t.Errorf("sluice %s on a truncated file exited 0", strings.Join(verb, " "))
		}
		if !regexp.MustCompile(`offset \d+`).MatchString(stderr) || !strings.Contains(stderr, "cut.rdb") {
			t.Errorf("sluice %s: error does not name the file and offset: %q", strings.Join(verb, " "), stderr)
		}
		if !strings.Contains(stderr, "truncated") {
			t.Errorf("sluice %s: error does not say the file is truncated: %q", strings.Join(verb, " "), stderr)
		}
	}
	// The key being read is named when the cut falls inside a value.
	_, stderr, _ := runCLI(t, "rdb", "keys", "--no-progress", cut)
	if !strings.Contains(stderr, `key "`) {
		t.Errorf("error does not name the key: %q", stderr)
	}
}

func TestRDBVerbsOnFixture(t *testing.T) {
	stdout, stderr, code := runCLI(t, "rdb", "count", "--db", "1", fixture)
	if code != 0 {
		t.Fatalf("count: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "all  all") || strings.Contains(stdout, "\n0 ") {
		t.Errorf("count --db 1 output:\n%s", stdout)
	}

	out := filepath.Join(t.TempDir(), "out.json")
	if _, stderr, code := runCLI(t, "rdb", "json", "--type", "hash", "-o", out, fixture); code != 0 {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatalf("json -o output is not a JSON array: %v", err)
	}
	if len(recs) == 0 {
		t.Fatal("no hash exported")
	}
	for _, r := range recs {
		if r["type"] != "hash" {
			t.Errorf("--type hash exported a %v", r["type"])
		}
	}

	if _, stderr, code := runCLI(t, "rdb", "keys", "--type", "nosuchtype", fixture); code == 0 || !strings.Contains(stderr, "nosuchtype") {
		t.Errorf("bad --type: exit %d, %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "rdb", "keys", "--key", "(", fixture); code == 0 || !strings.Contains(stderr, "regex") {
		t.Errorf("bad --key regex: exit %d, %q", code, stderr)
	}
	stdout, _, code = runCLI(t, "rdb", "memory", "top", "-n", "3", fixture)
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); code != 0 || len(lines) != 4 {
		t.Errorf("memory top -n 3: exit %d, %d lines:\n%s", code, len(lines), stdout)
	}
}

// TestRDBJSONTruncatedIsNotValidJSON: `sluice rdb json` on a cut file exits
// non-zero, names the file and offset, and leaves stdout an unterminated
// array in both modes (the parallel mode once closed the array,
// so a 29-byte file gave a valid `[]`). rdbtool's
// TestExportTruncatedAtEveryOffset covers every offset; this checks the
// command end to end at a spread of them.
func TestRDBJSONTruncatedIsNotValidJSON(t *testing.T) {
	t.Parallel() // its own processes, directories and ports
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.rdb")
	offsets := []int{0, 9, 29}
	for i := 1; i < 12; i++ {
		offsets = append(offsets, len(data)*i/12)
	}
	for _, n := range offsets {
		if err := os.WriteFile(cut, data[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		for _, mode := range [][]string{nil, {"--no-parallel"}} {
			args := append(append([]string{"rdb", "json", "--no-progress"}, mode...), cut)
			stdout, stderr, code := runCLI(t, args...)
			if code == 0 {
				t.Errorf("cut at %d %v: exit status 0", n, mode)
			}
			if json.Valid([]byte(stdout)) {
				t.Errorf("cut at %d %v: stdout is valid JSON (%d bytes): %.80q", n, mode, len(stdout), stdout)
			}
			if !regexp.MustCompile(`offset \d+`).MatchString(stderr) || !strings.Contains(stderr, "cut.rdb") {
				t.Errorf("cut at %d %v: error does not name the file and offset: %q", n, mode, stderr)
			}
		}
	}
}
