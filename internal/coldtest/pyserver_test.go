package coldtest

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// plainPython is any python3 (the pool's protocol needs no venv).
func plainPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return py
}

// TestPythonPoolRunsScriptsAsPythonC: a script sees its arguments in
// sys.argv and __name__ "__main__", its stdout comes back (also what it
// writes after a C library wrote on file descriptor 1), sys.exit(0) is a
// success, and an exception, sys.exit(3) or sys.exit("why") is an
// ErrScript with the traceback or message; the interpreter serves the next
// script after each, with the modules the earlier ones imported.
func TestPythonPoolRunsScriptsAsPythonC(t *testing.T) {
	p := NewPythonPool(plainPython(t))
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(script string, args ...string) (string, error) {
		out, err := p.Run(ctx, script, args...)
		return string(out), err
	}
	out, err := run("import sys, os\nos.write(1, b'noise\\n')\nprint(__name__, sys.argv[1:])", "a", "b c")
	if err != nil || out != "__main__ ['a', 'b c']\n" {
		t.Fatalf("got %q, %v; want the script's own stdout", out, err)
	}
	if out, err = run("import sys\nprint('early')\nsys.exit(0)\nprint('late')"); err != nil || out != "early\n" {
		t.Errorf("sys.exit(0): %q, %v", out, err)
	}
	for script, want := range map[string]string{
		"raise ValueError('boom')":    "ValueError: boom",
		"import sys; sys.exit(3)":     "exit 3",
		"import sys; sys.exit('why')": "why",
	} {
		if _, err := run(script); !errors.Is(err, ErrScript) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an ErrScript naming %q", script, err, want)
		}
	}
	if out, err := run("import sys\nprint('json' in sys.modules)"); err != nil || out != "True\n" {
		t.Errorf("the interpreter did not serve the next script with its modules: %q, %v", out, err)
	}
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	if idle != 1 {
		t.Errorf("%d idle interpreters after scripts one at a time, want 1", idle)
	}
}

// TestPythonPoolParallelAndDeadline: scripts run at the same time each get
// an interpreter of their own (the two wait for each other: one
// interpreter would deadlock until the deadline), and a script past its
// context's deadline is killed with the interpreter, returning in time.
func TestPythonPoolParallelAndDeadline(t *testing.T) {
	p := NewPythonPool(plainPython(t))
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	// Each creates its file, then waits for the other's.
	meet := "import os, sys, time\nopen(sys.argv[1], 'w').close()\nwhile not os.path.exists(sys.argv[2]): time.sleep(0.01)\nprint('met')"
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, args := range [][]string{{dir + "/a", dir + "/b"}, {dir + "/b", dir + "/a"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			defer pcancel()
			_, errs[i] = p.Run(pctx, meet, args...)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("two scripts at once: %v", err)
		}
	}
	short, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer scancel()
	start := time.Now()
	if _, err := p.Run(short, "import time\ntime.sleep(60)"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a script past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the script past its deadline returned after %v", d)
	}
	if out, err := p.Run(ctx, "print(1)"); err != nil || string(out) != "1\n" {
		t.Errorf("after a killed interpreter: %q, %v", out, err)
	}
}
