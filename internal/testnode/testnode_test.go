package testnode

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shNode is a node whose process is a shell script: the harness's waits,
// signals and log reads checked on a real process without a server's start.
func shNode(t *testing.T, script string) *Node {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	n := &Node{Name: "sh", Log: filepath.Join(t.TempDir(), "node.log"), Command: []string{"sh", "-c", script}}
	t.Cleanup(n.Kill)
	return n
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A line is looked for in what the node logged since it last started: a
// restarted node's old fault line does not count as reached again.
func TestWaitLogSinceLastStart(t *testing.T) {
	n := shNode(t, `echo "fault $STEP"; exec sleep 60`)
	n.Env = []string{"STEP=one"}
	if err := n.Spawn(); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitLog(ctxFor(t, 20*time.Second), "fault one"); err != nil {
		t.Fatal(err)
	}
	n.Kill()

	n.Env = []string{"STEP=two"}
	if err := n.Spawn(); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitLog(ctxFor(t, 20*time.Second), "fault two"); err != nil {
		t.Fatal(err)
	}
	err := n.WaitLog(ctxFor(t, 300*time.Millisecond), "fault one")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the first run's line found in the second run's log: %v", err)
	}
}

// A node that exits without the line ends the wait at once, not at the
// deadline.
func TestWaitLogNodeExited(t *testing.T) {
	n := shNode(t, `echo starting; exit 1`)
	if err := n.Spawn(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := n.WaitLog(ctxFor(t, time.Minute), "never")
	if !errors.Is(err, ErrExited) {
		t.Fatalf("WaitLog: %v, want ErrExited", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("WaitLog returned after %v", d)
	}
	if st := n.ProcessState(); st == nil || st.ExitCode() != 1 {
		t.Errorf("process state %v, want exit status 1", st)
	}
}

// spawnTrapped starts a script that sets its SIGTERM trap and says so,
// and waits for that line: a signal before the trap is set would end the
// shell with no trap run.
func spawnTrapped(t *testing.T, trap string) *Node {
	t.Helper()
	n := shNode(t, trap+`; echo trapped; while :; do sleep 0.05; done`)
	if err := n.Spawn(); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitLog(ctxFor(t, 20*time.Second), "trapped"); err != nil {
		t.Fatal(err)
	}
	return n
}

// Stop is SIGTERM and a clean exit; an exit status other than 0 after it is
// an error, and so is a node that ignores it past the deadline (then
// killed).
func TestStop(t *testing.T) {
	clean := spawnTrapped(t, `trap 'exit 0' TERM`)
	if err := clean.Stop(ctxFor(t, 20*time.Second)); err != nil {
		t.Errorf("clean stop: %v", err)
	}
	if err := clean.Signal(nil); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Signal after Stop: %v, want ErrNotRunning", err)
	}

	failed := spawnTrapped(t, `trap 'exit 3' TERM`)
	if err := failed.Stop(ctxFor(t, 20*time.Second)); err == nil || !strings.Contains(err.Error(), "exited 3") {
		t.Errorf("stop of a node exiting 3: %v", err)
	}

	stuck := spawnTrapped(t, `trap '' TERM`)
	if err := stuck.Stop(ctxFor(t, 500*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stop of a node ignoring SIGTERM: %v", err)
	}
	if stuck.Pid() != 0 {
		t.Error("a node past its stop deadline is still running")
	}
}

// Launch waits for /healthz; a node that exits first is reported as
// exited with its log, not waited for until the deadline.
func TestLaunch(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	up := shNode(t, `exec sleep 60`)
	up.URL = "http://" + l.Addr().String()
	if err := up.Launch(ctxFor(t, 20*time.Second)); err != nil {
		t.Errorf("a node that answers: %v", err)
	}

	down := shNode(t, `echo "bad config"; exit 2`)
	down.URL = "http://127.0.0.1:1"
	err = down.Launch(ctxFor(t, time.Minute))
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "bad config") {
		t.Errorf("a node that exits at start: %v", err)
	}
}
