// Package testnode runs sluice servers as child processes of a test
// binary, so that a test can kill one with SIGKILL (no shutdown, no last
// offset commit) and start it again on its store. The binary's TestMain
// calls Child first: run as a node, the binary serves and exits there.
package testnode

import (
	"bytes"
	"context"
	"fmt"
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

// Child serves the config its environment names and exits, when the test
// binary was started as a node by Node.Start; otherwise it returns. The
// node serves the config's listen address with the binary's registered
// tiers and formats, until SIGTERM.
func Child() {
	if path := os.Getenv(childEnv); path != "" {
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
	s, err := server.New(ctx, cfg, server.Options{ProcessLog: true}) // as `sluice serve`
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	if err := s.ListenAndServe(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// Node is one server process: Config is its config file, URL its listen
// address as the config has it, Log the file its output goes to.
type Node struct {
	Name, Config, URL, Log string
	cmd                    *exec.Cmd
	done                   chan struct{}
}

// Start runs the node and waits until it answers /healthz. It dies with the
// test binary.
func (n *Node) Start(t testing.TB) {
	t.Helper()
	log, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+n.Config)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatal(err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); log.Close(); close(done) }(n.done)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(n.URL + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-n.done:
			t.Fatalf("%s exited at start: %s", n.Name, n.Tail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen within 60s: %s", n.Name, n.Tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill ends the node with SIGKILL and waits for it; a node not running is
// left as it is.
func (n *Node) Kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done
		n.cmd = nil
	}
}

// Tail is the end of the node's log.
func (n *Node) Tail() string {
	b, _ := os.ReadFile(n.Log)
	return string(b[max(0, len(b)-3000):])
}

// Signal sends sig to the running node (SIGSTOP and SIGCONT freeze and
// thaw it); a node not running is an error.
func (n *Node) Signal(sig os.Signal) error {
	if n.cmd == nil || n.cmd.Process == nil {
		return fmt.Errorf("%s is not running", n.Name)
	}
	return n.cmd.Process.Signal(sig)
}

// CPUSeconds is the user+system CPU time of the running node so far, from
// /proc/<pid>/stat; 0 when it is not running or the file cannot be read.
func (n *Node) CPUSeconds() float64 {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
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
