package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/stream"
)

// shutdownConfig is one plain table and the shutdown_timeout given.
func shutdownConfig(timeout string) string {
	return `
listen: {http: "127.0.0.1:0"}
limits: {shutdown_timeout: ` + timeout + `}
tables:
  - name: events
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
`
}

// hookSource is a stream source the test steers: Run returns when ctx is
// done, unless ignoreStop, in which case it returns only when the test
// closes release (a source that will not stop). returning is closed as
// Run is about to return.
type hookSource struct {
	ignoreStop bool
	release    chan struct{}
	returning  chan struct{}
	counters   stream.Counters
}

func newHookSource(ignoreStop bool) *hookSource {
	return &hookSource{ignoreStop: ignoreStop, release: make(chan struct{}), returning: make(chan struct{})}
}

func (h *hookSource) Run(ctx context.Context) error {
	defer close(h.returning)
	if h.ignoreStop {
		<-h.release
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hookSource) Name() string               { return "hook source" }
func (h *hookSource) Counters() *stream.Counters { return &h.counters }

// serveWithSource starts a server whose only stream source is src and
// returns it, a cancel that begins its shutdown, and Serve's result.
func serveWithSource(t *testing.T, timeout string, src stream.Source) (*Server, context.CancelFunc, <-chan error) {
	t.Helper()
	cfg, err := config.Parse([]byte(shutdownConfig(timeout)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.sources = stream.NewRunner(nil, src)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	waitReady(t, "http://"+ln.Addr().String())
	return s, cancel, done
}

// awaitServe waits for Serve's result at most limit: a shutdown that does
// not keep its bound fails the test instead of hanging it.
func awaitServe(t *testing.T, done <-chan error, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Serve had not returned %v after its shutdown began", limit)
		return nil
	}
}

// A source that ignores its stop: Serve gives up after shutdown_timeout,
// not before and not much after, naming the source, and leaves the store
// open under it.
func TestShutdownTimeoutSourceThatWillNotStop(t *testing.T) {
	src := newHookSource(true)
	s, cancel, done := serveWithSource(t, "1s", src)
	defer func() {
		close(src.release)
		<-src.returning
		s.Close()
	}()
	start := time.Now()
	cancel()
	err := awaitServe(t, done, 10*time.Second)
	took := time.Since(start)
	if !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Serve: %v, want ErrShutdownTimeout", err)
	}
	if took < 900*time.Millisecond || took > 5*time.Second {
		t.Errorf("Serve gave up after %v, want about the 1s shutdown_timeout", took)
	}
	if !strings.Contains(err.Error(), "hook source") {
		t.Errorf("the error does not name the source: %v", err)
	}
}

// Batches still queued when the sources and schedulers have stopped are
// waited for within shutdown_timeout: Serve returns nil once they end.
func TestShutdownWaitsForQueuedBatches(t *testing.T) {
	src := newHookSource(false)
	s, cancel, done := serveWithSource(t, "20s", src)
	// A batch in flight: its slot is held until the test lets it go.
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := s.queue.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	left := make(chan struct{})
	cancel()
	go func() {
		// Let the batch end only after every source has returned, so
		// that the shutdown sees them stopped with the batch queued.
		<-src.returning
		for len(s.sources.Running()) > 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		close(left)
		s.queue.Leave()
	}()
	err := awaitServe(t, done, 15*time.Second)
	select {
	case <-left:
	default:
		t.Errorf("Serve returned (%v) while a batch was still queued", err)
		<-left
	}
	if err != nil {
		t.Fatalf("Serve: %v, want nil (the batch ended in time)", err)
	}
}
