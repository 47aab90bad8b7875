package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runCLIToFiles runs `sluice args...` in a child process whose stdout and
// stderr are the files at the given paths, opened (and truncated) as a shell
// does for `>stdout 2>stderr`, and returns the exit code.
func runCLIToFiles(t *testing.T, stdoutPath, stderrPath string, args ...string) int {
	t.Helper()
	open := func(path string) *os.File {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	self, err := os.Executable() // absolute: the child runs in another directory
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestRDBCLIProcess$")
	cmd.Dir = t.TempDir() // where a path such as "-" would land if taken as a file name
	cmd.Env = append(os.Environ(), "SLUICE_RDB_CLI_ARGS="+strings.Join(args, "\x1f"))
	cmd.Stdout, cmd.Stderr = open(stdoutPath), open(stderrPath)
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// jsonLines splits a file into the lines that are JSON objects with the
// given field and the others.
func jsonLines(t *testing.T, path, field string) (objects []map[string]any, others []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m[field] != nil {
			objects = append(objects, m)
		} else if l != "" {
			others = append(others, l)
		}
	}
	return objects, others
}

// TestComputeDeadLetterToStdStreams: `--dead-letter /dev/stderr 2>file`
// lost the dead letters (the file was opened a second time by path, and
// the summary written on stderr overwrote them). The standard streams are
// now written as the process's own; each dead letter and row arrives whole
// beside the summary and the other output; a regular file is appended to.
func TestComputeDeadLetterToStdStreams(t *testing.T) {
	t.Parallel() // its own processes, directories and ports
	dir := t.TempDir()
	config := filepath.Join(dir, "computed.yaml")
	if err := os.WriteFile(config, []byte(`computed:
  - name: doubled
    type: int64
    func: "function main(row) return row.n * 2 end"
    on_error: deadletter
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Enough dead letters that the dead-letter writer's buffer fills and is
	// written mid-line several times, between good rows, and a bad line.
	const good, failing = 300, 2000
	var in bytes.Buffer
	for i := range good + failing {
		if i%23 < 3 { // 3 of every 23 rows are good
			fmt.Fprintf(&in, "{\"n\":%d}\n", i)
		} else {
			fmt.Fprintf(&in, "{\"name\":\"row %d without n\"}\n", i)
		}
	}
	in.WriteString("not json\n")
	input := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	summary := fmt.Sprintf("compute: %d lines in, %d rows out, 0 dropped, %d dead-lettered, 1 bad lines", good+failing+1, good, failing+1)
	check := func(t *testing.T, deadPath, rowsPath, summaryPath string) {
		t.Helper()
		dead, _ := jsonLines(t, deadPath, "error")
		rows, _ := jsonLines(t, rowsPath, "doubled")
		_, summaryLines := jsonLines(t, summaryPath, "error")
		if len(dead) != failing+1 || len(rows) != good {
			t.Errorf("%d whole dead letters in %s, want %d; %d whole rows in %s, want %d", len(dead), filepath.Base(deadPath), failing+1, len(rows), filepath.Base(rowsPath), good)
		}
		if !strings.Contains(strings.Join(summaryLines, "\n"), summary) {
			t.Errorf("no summary %q in %s:\n%s", summary, filepath.Base(summaryPath), strings.Join(summaryLines, "\n"))
		}
	}

	for _, tc := range []struct {
		name, deadLetter, output string
		dead, rows               string // where they should end up
	}{
		{"dead letters on stderr", "/dev/stderr", "-", stderr, stdout},
		{"dead letters on stdout with the rows", "-", "/dev/stdout", stdout, stdout},
		{"rows on stderr with the dead letters", "/dev/fd/2", "/dev/stderr", stderr, stderr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := runCLIToFiles(t, stdout, stderr, "compute", "--config", config, "--input", input, "--output", tc.output, "--dead-letter", tc.deadLetter)
			if code != 0 {
				t.Errorf("exit %d", code)
			}
			check(t, tc.dead, tc.rows, stderr)
		})
	}

	t.Run("a file is appended to", func(t *testing.T) {
		deadFile := filepath.Join(dir, "dead.jsonl")
		for range 2 {
			if code := runCLIToFiles(t, stdout, stderr, "compute", "--config", config, "--input", input, "--output", "-", "--dead-letter", deadFile); code != 0 {
				t.Errorf("exit %d", code)
			}
		}
		if dead, _ := jsonLines(t, deadFile, "error"); len(dead) != 2*(failing+1) {
			t.Errorf("after two runs %d dead letters in the file, want %d", len(dead), 2*(failing+1))
		}
	})
}
