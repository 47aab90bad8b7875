package cli

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docBlock returns the lines of the first ```sh block after the heading in
// a doc, with continued lines (ending in \) joined and comments dropped.
func docBlock(t *testing.T, doc, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s: no heading %q", doc, heading)
	}
	text = text[i:]
	start := strings.Index(text, "\n```sh\n")
	if start < 0 {
		t.Fatalf("%s: no sh block after %q", doc, heading)
	}
	text = text[start+len("\n```sh\n"):]
	text = text[:strings.Index(text, "\n```")]
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		if c := strings.Index(l, " # "); c >= 0 {
			l = l[:c]
		}
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// shellWords splits a command line as a shell would, for the quoting the
// docs use: words separated by spaces, '...' taken literally.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
			}
			inWord = false
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// TestRDBDocCommands runs the commands of docs/rdb.md's "RDB as an
// ingestion source" as written, from the repository root, on the bundled
// example config (which had no `keys` table the commands use) and a
// fixture snapshot: the server ones against a real server on its config,
// the store ones with --data in a temporary directory instead of ./data.
func TestRDBDocCommands(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile(filepath.Join(root, "examples/server/sluice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	url := startTestServer(t, string(yaml))
	data := t.TempDir()
	lines := docBlock(t, filepath.Join(root, "docs/rdb.md"), "## RDB as an ingestion source")
	ran := 0
	for _, line := range lines {
		words := shellWords(strings.ReplaceAll(line, "http://127.0.0.1:8080", url))
		switch words[0] {
		case "sluice":
			args := words[1:]
			if !strings.Contains(line, "--server") {
				args = append([]string{args[0], "--data", data}, args[1:]...)
			}
			self, err := os.Executable() // absolute: the child runs in another directory
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self, "-test.run=^TestRDBCLIProcess$")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "SLUICE_RDB_CLI_ARGS="+strings.Join(args, "\x1f"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatal(err)
				}
				t.Errorf("%s: %v\n%s", line, err, stderr.String())
				continue
			}
			if regexp.MustCompile(`"accepted":0\b`).MatchString(stdout.String()) || strings.TrimSpace(stdout.String()) == "" {
				t.Errorf("%s: nothing ingested or found:\n%s", line, stdout.String())
			}
		case "curl":
			var file, contentType, target string
			for i, w := range words {
				switch {
				case w == "-T":
					file = words[i+1]
				case w == "-H":
					contentType = strings.TrimPrefix(words[i+1], "Content-Type: ")
				case strings.HasPrefix(w, "http"):
					target = w
				}
			}
			body, err := os.Open(filepath.Join(root, file))
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			resp, err := http.Post(target, contentType, body)
			body.Close()
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			var answer bytes.Buffer
			answer.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || regexp.MustCompile(`"accepted":0\b`).MatchString(answer.String()) {
				t.Errorf("%s: %s %s", line, resp.Status, answer.String())
			}
		default:
			t.Fatalf("a command this test does not know how to run: %s", line)
		}
		ran++
	}
	if ran < 5 {
		t.Errorf("ran %d commands of docs/rdb.md, want the 5 of its example", ran)
	}
}
