// Package testnode runs sluice servers as child processes, so that a test
// can kill one with SIGKILL (no shutdown, no last offset commit), freeze it,
// stop it with SIGTERM, wait for a line of its log (a fault point reached)
// and start it again on its store. It is the one process harness of the
// multi-process tests (e2e/...) and of the packages whose tests or
// benchmarks run nodes as processes (stream, connectors/trino,
// bench/kafka).
//
// A node is either the test binary itself re-executed (its TestMain calls
// Child first: run as a node, the binary serves and exits there), which
// serves with whatever tiers and formats the test binary registers, or a
// built program (Node.Command), such as a `sluice` binary built without
// the race detector.
package testnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/server"
)

// childEnv names, in a child's environment, the config file it serves.
const childEnv = "SLUICE_TESTNODE_CONFIG"

// DefaultStartTimeout bounds Start's wait for a node's /healthz when the
// node sets no StartTimeout: a race-instrumented node on a loaded 2-core
// machine takes seconds to open its store.
const DefaultStartTimeout = 60 * time.Second

// ErrNotRunning is returned by the calls that need a running node.
var ErrNotRunning = errors.New("testnode: node is not running")

// ErrExited is returned when a node exits while a call waits for it to
// answer or to log a line.
var ErrExited = errors.New("testnode: node exited")

// Child serves the config its environment names and exits, when the test
// binary was started as a node by Node.Start; otherwise it returns. The
// node serves the config's listen address with the binary's registered
// tiers and formats, until SIGTERM.
func Child() {
	if path := os.Getenv(childEnv); path != "" {
		// Not left for the config to read: it takes SLUICE_* variables
		// as overrides and warns of one that matches no key.
		os.Unsetenv(childEnv)
		os.Exit(serve(path))
	}
}

func serve(path string) int {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	// As `sluice serve`: SIGHUP reloads the scripts and TLS files, and the
	// Go runtime's soft memory limit comes from the config's memory bound
	// (what a test of the process's peak memory measures).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	s, err := server.New(ctx, cfg, server.Options{ProcessLog: true, SetMemoryLimit: true, ReloadSignals: hup})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Serve closes the store when it stops cleanly; not closed here
	// otherwise, as `sluice serve` does not: after a shutdown past its
	// timeout a stuck script may still write, and the process exits with
	// status 1 under it (2 is a node that never served).
	if err := s.ListenAndServe(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Node is one server process: Config is its config file, URL its listen
// address as the config has it (or as Command's flags set it), Log the file
// its output goes to (appended to across restarts).
type Node struct {
	Name, Config, URL, Log string
	// Command is the program and its arguments when the node is not the
	// test binary: a built `sluice` and `serve --config ... --listen ...`.
	// Empty, the test binary runs as the node and serves Config (Child).
	Command []string
	// Env is added to the node's environment (KEY=value): a fault point,
	// or a secret its config names, given to this node alone so that the
	// test need not set it in its own process (and may run in parallel).
	Env []string
	// StartTimeout bounds the wait for /healthz; 0 is DefaultStartTimeout.
	StartTimeout time.Duration
	// Client asks for /healthz at start; nil is http.DefaultClient. A node
	// that listens with TLS needs one that trusts its certificate.
	Client *http.Client

	cmd     *exec.Cmd
	done    chan struct{}
	logFrom int64 // the log's size when the running process started
}

// Start runs the node and waits until it answers /healthz, failing the
// test if it does not. It dies with the test binary.
func (n *Node) Start(t testing.TB) {
	t.Helper()
	timeout := n.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := n.Launch(ctx); err != nil {
		t.Fatal(err)
	}
}

// Launch is Start for callers without a testing.TB (benchmark harnesses):
// it runs the node and waits until it answers /healthz or ctx ends; on an
// error the node is killed.
func (n *Node) Launch(ctx context.Context) error {
	if err := n.Spawn(); err != nil {
		return err
	}
	if err := n.waitHealthy(ctx); err != nil {
		n.Kill()
		return err
	}
	return nil
}

// Spawn runs the node without waiting for it to answer: for a node that
// is to stop itself at a fault point, perhaps before it listens. It dies
// with the test binary.
func (n *Node) Spawn() error {
	log, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testnode: %s: open log: %w", n.Name, err)
	}
	info, err := log.Stat()
	if err != nil {
		log.Close()
		return fmt.Errorf("testnode: %s: stat log: %w", n.Name, err)
	}
	var cmd *exec.Cmd
	if len(n.Command) > 0 {
		cmd = exec.Command(n.Command[0], n.Command[1:]...)
		cmd.Env = append(os.Environ(), n.Env...)
	} else {
		cmd = exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), n.Env...), childEnv+"="+n.Config)
	}
	cmd.Stdout, cmd.Stderr = log, log
	// A test binary that dies (a panic, a timeout) takes its nodes with it
	// rather than leaving them holding ports and consumer groups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("testnode: start %s: %w", n.Name, err)
	}
	n.cmd, n.done, n.logFrom = cmd, make(chan struct{}), info.Size()
	go func(done chan struct{}) { cmd.Wait(); log.Close(); close(done) }(n.done)
	return nil
}

func (n *Node) waitHealthy(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		client := n.Client
		if client == nil {
			client = http.DefaultClient
		}
		if resp, err := client.Get(n.URL + "/healthz"); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-n.done:
			return fmt.Errorf("%s at start: %w: %s", n.Name, ErrExited, n.Tail())
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer /healthz: %w: %s", n.Name, ctx.Err(), n.Tail())
		case <-tick.C:
		}
	}
}

// Kill ends the node with SIGKILL and waits for it; a node not running is
// left as it is.
func (n *Node) Kill() {
	if n.Running() {
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done
	}
}

// Running says whether the node's process was started and has not exited.
func (n *Node) Running() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Stop ends the node with SIGTERM and waits for it to exit: an exit status
// other than 0 is an error (a graceful stop that failed), and so is a node
// still running when ctx ends, which is then killed.
func (n *Node) Stop(ctx context.Context) error {
	if !n.Running() {
		return fmt.Errorf("%s: %w", n.Name, ErrNotRunning)
	}
	cmd := n.cmd
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-ctx.Done():
		n.Kill()
		return fmt.Errorf("%s did not stop after SIGTERM: %w: %s", n.Name, ctx.Err(), n.Tail())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("%s exited %d after SIGTERM: %s", n.Name, code, n.Tail())
	}
	return nil
}

// Wait waits for the node to exit by itself (a fault point that kills the
// process), until ctx ends; then the node is killed and ctx's error
// returned. The process state of the exit is ProcessState's.
func (n *Node) Wait(ctx context.Context) error {
	if n.done == nil {
		return fmt.Errorf("%s: %w", n.Name, ErrNotRunning)
	}
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
		n.Kill()
		return fmt.Errorf("%s did not exit: %w: %s", n.Name, ctx.Err(), n.Tail())
	}
}

// WaitLog waits until a line of the log written since the node last
// started contains want (a fault point reached, a state logged), until ctx
// ends or the node exits without it.
func (n *Node) WaitLog(ctx context.Context, want string) error {
	if n.done == nil {
		return fmt.Errorf("%s: %w", n.Name, ErrNotRunning)
	}
	// The log is a file the node appends to, so it is read again from the
	// start of this run each poll; logs of a test's node are small.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		exited := false
		select {
		case <-n.done:
			exited = true // one last read: the line may have come before the exit
		default:
		}
		if found, err := n.logHas(want); err != nil {
			return err
		} else if found {
			return nil
		}
		if exited {
			return fmt.Errorf("%s before logging %q: %w: %s", n.Name, want, ErrExited, n.Tail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not log %q: %w: %s", n.Name, want, ctx.Err(), n.Tail())
		case <-n.done:
		case <-tick.C:
		}
	}
}

func (n *Node) logHas(want string) (bool, error) {
	f, err := os.Open(n.Log)
	if err != nil {
		return false, fmt.Errorf("testnode: %s: open log: %w", n.Name, err)
	}
	defer f.Close()
	if _, err := f.Seek(n.logFrom, io.SeekStart); err != nil {
		return false, fmt.Errorf("testnode: %s: seek log: %w", n.Name, err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return true, nil
		}
	}
	return false, nil
}

// Logs is the node's whole log, across its restarts.
func (n *Node) Logs() string {
	b, _ := os.ReadFile(n.Log)
	return string(b)
}

// Tail is the end of the node's log.
func (n *Node) Tail() string {
	b, _ := os.ReadFile(n.Log)
	return string(b[max(0, len(b)-3000):])
}

// Signal sends sig to the running node (SIGSTOP and SIGCONT freeze and
// thaw it); a node not running is an error.
func (n *Node) Signal(sig os.Signal) error {
	if !n.Running() {
		return fmt.Errorf("%s: %w", n.Name, ErrNotRunning)
	}
	return n.cmd.Process.Signal(sig)
}

// Pid is the running node's process id, 0 when it is not running.
func (n *Node) Pid() int {
	if !n.Running() {
		return 0
	}
	return n.cmd.Process.Pid
}

// ProcessState is the state of the node's last exit (its exit code, its
// CPU time), nil when it has not exited since it last started.
func (n *Node) ProcessState() *os.ProcessState {
	if n.cmd == nil || n.Running() {
		return nil
	}
	return n.cmd.ProcessState
}

// CPUSeconds is the user+system CPU time of the running node so far, from
// /proc/<pid>/stat; 0 when it is not running or the file cannot be read.
func (n *Node) CPUSeconds() float64 {
	pid := n.Pid()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 12th and 13th of them.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}
