// Package cluster holds the test of the cluster walkthrough
// (docs/cluster-walkthrough.md): it runs the page's commands as they are
// written, against the example configs of this directory, so that the page
// cannot drift from what works.
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/internal/testkafka"
)

const (
	page     = "docs/cluster-walkthrough.md"
	stateDir = "/tmp/sluice-walkthrough"
)

// ports are the fixed ports the walkthrough's servers listen on.
var ports = []string{"9092", "8081", "8082", "8083", "7070", "8181", "8090"}

// Timeouts: a step's first `go run` compiles (minutes on a cold build
// cache and a busy machine); Trino takes a minute or more to start.
const (
	stepTimeout = 8 * time.Minute
	stopTimeout = 30 * time.Second
)

// step is one of the page's marked code blocks, or a marker without one:
//
//	<!-- walkthrough: run; expect: TEXT; expect: TEXT -->   run it; its output must hold each TEXT
//	<!-- walkthrough: start NAME; until: TEXT -->            start it; it is up when its output holds TEXT
//	<!-- walkthrough: stop NAME NAME -->                      interrupt those started (Ctrl-C)
//	<!-- walkthrough: file PATH -->                           the block's lines are lines of the file PATH
//	<!-- walkthrough: install -->                             not run: the test requires what it installs
//
// In TEXT, \t is a tab.
type step struct {
	line   int
	kind   string
	names  []string
	expect []string
	until  string
	code   string
}

var marker = regexp.MustCompile(`^<!-- walkthrough: (.*) -->$`)

// parse reads the page's steps in order. Every code block of the page has
// a marker, so that no command a reader pastes is left out of the test:
// the installs' block is marked install (the test requires what it
// installs rather than run it).
func parse(text string) ([]step, error) {
	var steps []step
	var pending *step
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "```") {
			if pending == nil {
				return nil, fmt.Errorf("line %d: a code block without a walkthrough marker", i+1)
			}
			var code []string
			for i++; i < len(lines) && lines[i] != "```"; i++ {
				code = append(code, lines[i])
			}
			if i == len(lines) {
				return nil, fmt.Errorf("line %d: the code block does not end", pending.line+1)
			}
			pending.code = strings.Join(code, "\n") + "\n"
			steps = append(steps, *pending)
			pending = nil
			continue
		}
		if pending != nil && strings.TrimSpace(line) != "" {
			return nil, fmt.Errorf("line %d: the marker is not followed by a code block", pending.line)
		}
		m := marker.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		s, err := parseMarker(i+1, m[1])
		if err != nil {
			return nil, err
		}
		if s.kind == "stop" {
			steps = append(steps, s)
			continue
		}
		pending = &s
	}
	if pending != nil {
		return nil, fmt.Errorf("line %d: the marker is not followed by a code block", pending.line)
	}
	return steps, nil
}

// parseMarker reads one marker's text: the kind and its names, then
// "; key: value" fields.
func parseMarker(line int, text string) (step, error) {
	s := step{line: line}
	for n, field := range strings.Split(text, "; ") {
		if n == 0 {
			words := strings.Fields(field)
			if len(words) == 0 {
				return s, fmt.Errorf("line %d: an empty marker", line)
			}
			s.kind, s.names = words[0], words[1:]
			continue
		}
		key, value, ok := strings.Cut(field, ": ")
		value = strings.ReplaceAll(value, `\t`, "\t")
		switch {
		case ok && key == "expect":
			s.expect = append(s.expect, value)
		case ok && key == "until":
			s.until = value
		default:
			return s, fmt.Errorf("line %d: %q is not expect: or until:", line, field)
		}
	}
	switch {
	case s.kind == "run" && len(s.names) == 0,
		s.kind == "install" && len(s.names) == 0,
		s.kind == "start" && len(s.names) == 1 && s.until != "",
		s.kind == "stop" && len(s.names) > 0,
		s.kind == "file" && len(s.names) == 1:
		return s, nil
	}
	return s, fmt.Errorf("line %d: marker %q: want run, install, start NAME; until: TEXT, stop NAME..., or file PATH", line, text)
}

// server is a started step: a bash running the block in a process group
// of its own, so that Ctrl-C (SIGINT to the group) reaches `go run` and
// the program it runs, as in a terminal.
type server struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (s *server) output() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// stop interrupts the group and waits for it, killing it past stopTimeout.
func (s *server) stop(t *testing.T) {
	select {
	case <-s.done:
		return
	default:
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		t.Errorf("%s: still running %s after Ctrl-C; killed", s.name, stopTimeout)
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// TestWalkthrough runs docs/cluster-walkthrough.md: a Kafka broker, three
// sluice-full nodes committing into one Iceberg table, the rows counted
// by sluice, pyiceberg and DuckDB, then the same nodes on S3 with a REST
// catalog, counted again, and by Trino through sluice's connector and
// through its Iceberg connector. Each
// server starts once; the answers are the page's own (expect:).
func TestWalkthrough(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parse(string(text))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(steps) == 0 {
		t.Fatalf("%s: no walkthrough steps", page)
	}

	// What section 0 installs.
	testenv.Command(t, "bash", "apt-get install bash")
	testenv.Command(t, "curl", "apt-get install curl")
	if _, err := testkafka.Classpath(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	coldtest.Require(t, coldtest.FindTrino())
	python, err := coldtest.Python()
	coldtest.Require(t, err)
	cache := filepath.Dir(testkafka.CacheDir())
	if _, err := os.Stat(filepath.Join(cache, "iceberg-rest", "classpath.txt")); err != nil {
		testenv.Missing(t, "the Iceberg REST catalog: %v (run scripts/install-iceberg-rest)", err)
	}
	versitygw := filepath.Join(cache, "bin", "versitygw")
	if v := os.Getenv("SLUICE_VERSITYGW"); v != "" {
		versitygw = v
	}
	if _, err := os.Stat(versitygw); err != nil {
		testenv.Missing(t, "versitygw: %v (run scripts/install-s3)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "connectors/trino/target/plugin/sluice")); err != nil {
		testenv.Missing(t, "the sluice Trino connector is not built (%v): run scripts/build-trino-connector", err)
	}
	// The page's servers take fixed ports: one already taken is another
	// walkthrough (or anything else) running, which the steps would talk to.
	for _, port := range ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
			c.Close()
			t.Fatalf("127.0.0.1:%s is taken: the walkthrough's servers need ports %v free", port, ports)
		}
	}

	logs := t.TempDir()
	env := append(os.Environ(), "PYTHON="+python)
	started := map[string]*server{}
	var order []*server
	t.Cleanup(func() {
		for i := len(order) - 1; i >= 0; i-- {
			order[i].stop(t)
		}
		if t.Failed() {
			for _, s := range order {
				out := s.output()
				t.Logf("%s's output (last 3000 bytes):\n%s", s.name, out[max(0, len(out)-3000):])
			}
		}
		os.RemoveAll(stateDir)
	})

	for _, s := range steps {
		where := fmt.Sprintf("%s:%d", page, s.line)
		switch s.kind {
		case "file":
			data, err := os.ReadFile(filepath.Join(root, s.names[0]))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			have := map[string]bool{}
			for _, l := range strings.Split(string(data), "\n") {
				have[l] = true
			}
			for _, l := range strings.Split(strings.TrimSpace(s.code), "\n") {
				if !have[l] {
					t.Errorf("%s: the line %q is not in %s", where, l, s.names[0])
				}
			}
		case "run":
			ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", s.code)
			cmd.Dir, cmd.Env = root, env
			// Its own group, killed whole at the deadline: a `go run`
			// killed alone would leave the program it runs.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 10 * time.Second
			start := time.Now()
			out, err := cmd.CombinedOutput()
			cancel()
			t.Logf("%s: ran in %s:\n%s%s", where, time.Since(start).Round(time.Millisecond), s.code, indent(out))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			for _, e := range s.expect {
				if !bytes.Contains(out, []byte(e)) {
					t.Fatalf("%s: the output lacks %q", where, e)
				}
			}
		case "start":
			name := s.names[0]
			if started[name] != nil {
				t.Fatalf("%s: %s is started twice", where, name)
			}
			srv, err := start(root, env, filepath.Join(logs, name+".log"), name, s.code)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			started[name] = srv
			order = append(order, srv)
			if err := waitFor(srv, s.until, stepTimeout); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			t.Logf("%s: started %s:\n%s", where, name, s.code)
		case "stop":
			for _, name := range s.names {
				srv := started[name]
				if srv == nil {
					t.Fatalf("%s: %s was not started", where, name)
				}
				srv.stop(t)
			}
		}
	}
	for _, s := range order {
		select {
		case <-s.done:
		default:
			t.Errorf("%s is still running at the end of the page: no step stops it", s.name)
		}
	}
}

func start(dir string, env []string, logPath, name, code string) (*server, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", code)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	return s, nil
}

var errExited = errors.New("exited")

// waitFor waits until the server's output holds text.
func waitFor(s *server, text string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(s.output(), text) {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("%s %w before its output held %q: %s", s.name, errExited, text, tail(s.output()))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %q in its output within %s: %s", s.name, text, timeout, tail(s.output()))
		}
	}
}

func tail(s string) string { return s[max(0, len(s)-3000):] }

func indent(out []byte) string {
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		b.WriteString("    | ")
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
}
