package coldtest

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
)

// pyserverScript is the interpreter side of a PythonPool: it runs one
// script a request line and answers with one line.
//
//go:embed pyserver.py
var pyserverScript string

// ErrScript wraps a script's failure (an exception or a non-zero exit), as
// against a failure of the interpreter that runs it.
var ErrScript = errors.New("python script failed")

// A PythonPool runs scripts in long-lived interpreters of the readers' venv
// instead of one process a script: importing pyiceberg, pyarrow and DuckDB
// costs about 1.4 CPU-seconds, more than most checks themselves, and a
// package's tests run dozens of checks. Each interpreter runs one script at
// a time; a caller that finds none idle starts another, so tests that run
// in parallel do not queue behind each other. A script runs as with
// `python -c script args...`: sys.argv, __name__ "__main__", its standard
// output returned; its module imports stay loaded for the next script.
type PythonPool struct {
	python string
	mu     sync.Mutex
	idle   []*pyProc
	closed bool
}

// NewPythonPool returns a pool of interpreters python (the readers' venv,
// see Python); it starts them as scripts need them.
func NewPythonPool(python string) *PythonPool {
	return &PythonPool{python: python}
}

type pyProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Reader
	stderr *tailBuffer
}

type pyRequest struct {
	Script string   `json:"script"`
	Args   []string `json:"args"`
}

type pyReply struct {
	Out   string `json:"out"`
	Error string `json:"error"`
	Code  int    `json:"code"`
}

// Run runs script with args in an idle interpreter (started when none is)
// and returns its standard output. When ctx ends first, the interpreter is
// killed, so that a hung script cannot hold the test past its deadline.
func (p *PythonPool) Run(ctx context.Context, script string, args ...string) ([]byte, error) {
	proc, err := p.get()
	if err != nil {
		return nil, err
	}
	reply, err := proc.run(ctx, pyRequest{Script: script, Args: append([]string{}, args...)})
	if err != nil {
		proc.kill()
		return nil, fmt.Errorf("python interpreter: %w: %s", err, proc.stderr.String())
	}
	p.put(proc)
	if reply.Code != 0 {
		return []byte(reply.Out), fmt.Errorf("%w (exit %d): %s", ErrScript, reply.Code, strings.TrimSpace(reply.Error))
	}
	return []byte(reply.Out), nil
}

func (p *PythonPool) get() (*pyProc, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("python pool closed")
	}
	if n := len(p.idle); n > 0 {
		proc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return proc, nil
	}
	p.mu.Unlock()
	return startPyProc(p.python)
}

func (p *PythonPool) put(proc *pyProc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		proc.kill()
		return
	}
	p.idle = append(p.idle, proc)
}

// Close stops the idle interpreters; one still running a script stops
// when that script returns.
func (p *PythonPool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, proc := range idle {
		proc.kill()
	}
}

func startPyProc(python string) (*pyProc, error) {
	cmd := exec.Command(python, "-c", pyserverScript)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("python interpreter stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("python interpreter stdout: %w", err)
	}
	tail := &tailBuffer{max: 8 << 10}
	cmd.Stderr = tail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start python interpreter %s: %w", python, err)
	}
	return &pyProc{cmd: cmd, stdin: stdin, lines: bufio.NewReaderSize(stdout, 1<<20), stderr: tail}, nil
}

// run sends one request and reads its reply line, or gives up when ctx
// ends (the caller then kills the interpreter, which ends the read).
func (p *pyProc) run(ctx context.Context, req pyRequest) (pyReply, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return pyReply{}, fmt.Errorf("encode request: %w", err)
	}
	type result struct {
		reply pyReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		if _, err := p.stdin.Write(append(line, '\n')); err != nil {
			done <- result{err: fmt.Errorf("send request: %w", err)}
			return
		}
		b, err := p.lines.ReadBytes('\n')
		if err != nil {
			done <- result{err: fmt.Errorf("read reply: %w", err)}
			return
		}
		var r pyReply
		if err := json.Unmarshal(b, &r); err != nil {
			done <- result{err: fmt.Errorf("decode reply %.200q: %w", b, err)}
			return
		}
		done <- result{reply: r}
	}()
	select {
	case r := <-done:
		return r.reply, r.err
	case <-ctx.Done():
		p.kill()
		<-done
		return pyReply{}, ctx.Err()
	}
}

func (p *pyProc) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	p.stdin.Close()
	p.cmd.Wait()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}
