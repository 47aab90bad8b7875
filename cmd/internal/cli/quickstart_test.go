package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// TestQuickstartCommands runs the commands of docs/quickstart.md's "2.
// Ingest and query" as written, from the repository root, against a real
// server on the bundled example config: `go run ./cmd/sluice ...` as this
// binary's command tree in a child process, curl as curl (with --fail, so
// that an error status fails the step). Each must succeed and print what
// the page says it prints.
func TestQuickstartCommands(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		testenv.Missing(t, "curl: %v", err)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile(filepath.Join(root, "examples/server/sluice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	url := startTestServer(t, string(yaml))
	self, err := os.Executable() // absolute: the child runs in the repository root
	if err != nil {
		t.Fatal(err)
	}
	// What each step's output must contain, in the page's order.
	want := []string{
		`examples/server/events.jsonl: {"accepted":5,"filtered":1,"failed":0`,
		`"accepted":2`,
		`"user":"ann"`,
		"amount_cents",
		`"amount_cents"`,
	}
	lines := docBlock(t, filepath.Join(root, "docs/quickstart.md"), "## 2. Ingest and query")
	if len(lines) != len(want) {
		t.Fatalf("docs/quickstart.md's step 2 has %d commands, the test knows %d: update the test", len(lines), len(want))
	}
	for i, line := range lines {
		words := shellWords(strings.ReplaceAll(line, "http://127.0.0.1:8080", url))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var cmd *exec.Cmd
		switch {
		case len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/sluice":
			cmd = exec.CommandContext(ctx, self, "-test.run=^TestRDBCLIProcess$")
			cmd.Env = append(os.Environ(), "SLUICE_RDB_CLI_ARGS="+strings.Join(words[3:], "\x1f"))
		case words[0] == "curl":
			cmd = exec.CommandContext(ctx, curl, append([]string{"--fail-with-body"}, words[1:]...)...)
		default:
			cancel()
			t.Fatalf("a command this test does not know how to run: %s", line)
		}
		cmd.Dir = root
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("%s: %v\n%s%s", line, err, stdout.String(), stderr.String())
			continue
		}
		if !strings.Contains(stdout.String(), want[i]) {
			t.Errorf("%s: the output has no %q:\n%s", line, want[i], stdout.String())
		}
	}
}
