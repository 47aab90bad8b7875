package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// TrailerError is the HTTP trailer in which a node reports an error that
// ended its answer after the header was sent: the body alone cannot say
// whether it ended or broke off.
const TrailerError = "Sluice-Error"

// DefaultNodeTimeout is Fanout's NodeTimeout when it is zero.
const DefaultNodeTimeout = 10 * time.Second

// ErrTimeout is wrapped by the error of a node that did not answer within
// the node timeout.
var ErrTimeout = errors.New("no answer within the node timeout")

// NodeError is a failure of one node; the query names it.
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return fmt.Sprintf("node %s: %v", e.Node, e.Err) }
func (e *NodeError) Unwrap() error { return e.Err }

// StatusError is a node's answer that was not 2xx.
type StatusError struct {
	Code int
	Body string // the first KiB of the answer
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("status %d: %s", e.Code, strings.TrimSpace(e.Body))
}

// Fanout sends one request to many nodes at once and hands back their
// streamed answers. The zero value is usable.
type Fanout struct {
	// Client sends the requests; nil means a client without an overall
	// timeout (answers are long streams; NodeTimeout bounds the waits).
	Client *http.Client
	// NodeTimeout bounds, for each node, the wait for its answer's header
	// and every wait for more of its body: a node that stops sending fails
	// after NodeTimeout even in the middle of a long answer, while one that
	// keeps sending is never cut off. Zero means DefaultNodeTimeout.
	NodeTimeout time.Duration
}

// Answer is one node's answer: Err, or a body to read.
type Answer struct {
	Node string
	// Err is why the node has no answer (wrapped in a *NodeError): it did
	// not connect, answered with an error status, or timed out.
	Err error
	// Header is the answer's header when Err is nil.
	Header http.Header

	resp    *http.Response
	timeout time.Duration
	cancel  context.CancelFunc
	timer   *time.Timer
	mu      sync.Mutex
	expired bool
}

// Open sends build(node)'s request to every node at once and returns once
// every node has answered with a header, failed or timed out; answers are
// in the order of nodes. The caller reads each answer's body with Read
// and must Close every answer.
func (f *Fanout) Open(ctx context.Context, nodes []string, build func(ctx context.Context, node string) (*http.Request, error)) []*Answer {
	timeout := f.NodeTimeout
	if timeout <= 0 {
		timeout = DefaultNodeTimeout
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	answers := make([]*Answer, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		a := &Answer{Node: node, timeout: timeout}
		answers[i] = a
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.open(ctx, client, build)
		}()
	}
	wg.Wait()
	return answers
}

func (a *Answer) open(ctx context.Context, client *http.Client, build func(context.Context, string) (*http.Request, error)) {
	rctx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	a.timer = time.AfterFunc(a.timeout, a.expire)
	req, err := build(rctx, a.Node)
	if err != nil {
		a.fail(err)
		return
	}
	resp, err := client.Do(req)
	if !a.timer.Stop() || a.timedOut() {
		if resp != nil {
			resp.Body.Close()
		}
		a.fail(fmt.Errorf("%w (%s)", ErrTimeout, a.timeout))
		return
	}
	if err != nil {
		a.fail(err)
		return
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		a.fail(&StatusError{Code: resp.StatusCode, Body: string(b)})
		return
	}
	a.resp = resp
	a.Header = resp.Header
}

func (a *Answer) expire() {
	a.mu.Lock()
	a.expired = true
	a.mu.Unlock()
	a.cancel()
}

func (a *Answer) timedOut() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.expired
}

func (a *Answer) fail(err error) {
	a.cancel()
	a.Err = &NodeError{Node: a.Node, Err: err}
}

// Read reads the answer's body. It fails with a *NodeError when no byte
// came within the node timeout, when the connection broke, or, at the end,
// when the node reported an error in the TrailerError trailer.
func (a *Answer) Read(p []byte) (int, error) {
	if a.Err != nil {
		return 0, a.Err
	}
	a.timer.Reset(a.timeout)
	n, err := a.resp.Body.Read(p)
	stopped := a.timer.Stop()
	switch {
	case err == io.EOF:
		if msg := a.resp.Trailer.Get(TrailerError); msg != "" {
			a.Err = &NodeError{Node: a.Node, Err: errors.New(msg)}
			return n, a.Err
		}
		return n, io.EOF
	case err != nil:
		if !stopped && a.timedOut() {
			err = fmt.Errorf("%w (%s)", ErrTimeout, a.timeout)
		}
		a.Err = &NodeError{Node: a.Node, Err: err}
		return n, a.Err
	}
	return n, nil
}

// Close ends the request (a node still sending stops) and frees it.
func (a *Answer) Close() error {
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.resp != nil {
		a.resp.Body.Close()
	}
	if a.cancel != nil {
		a.cancel()
	}
	return nil
}
