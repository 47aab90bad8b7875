package s3http_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/s3http"
)

// stallServer is an S3 stand-in on 127.0.0.1 whose GET handler is serve;
// a handler that waits does so until the client goes or the test ends.
func stallServer(t *testing.T, serve func(w http.ResponseWriter, r *http.Request, release <-chan struct{})) *s3http.Client {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, release)
	}))
	t.Cleanup(srv.Close)
	// Before srv.Close (cleanups run last first), which waits for the
	// handlers: a handler still stalled when the test failed returns.
	t.Cleanup(func() { close(release) })
	return &s3http.Client{Endpoint: srv.URL, PathStyle: true, Region: "us-east-1",
		Credentials: func() (s3http.Credentials, error) { return s3http.Credentials{AccessKey: "a", SecretKey: "s"}, nil }}
}

// wait blocks until the client gives up on the request or the test ends.
func wait(r *http.Request, release <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-release:
	}
}

// readWithin reads the object bucket/key whole, failing the test when
// that takes more than limit (a read nothing bounds would hang).
func readWithin(t *testing.T, c *s3http.Client, limit time.Duration) (string, error) {
	t.Helper()
	type result struct {
		data string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		obj, err := c.Get(context.Background(), "bucket", "dir/key.jsonl", "")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer obj.Body.Close()
		b, err := io.ReadAll(obj.Body)
		done <- result{string(b), err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(limit):
		t.Fatalf("the read of s3://bucket/dir/key.jsonl did not end within %v", limit)
		return "", nil
	}
}

// TestGetStalledBodyIsCut: a server that sends the headers and part of
// the body, then nothing, fails the read within the idle bound, with an
// error naming the object.
func TestGetStalledBodyIsCut(t *testing.T) {
	c := stallServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, strings.Repeat("x", 100))
		w.(http.Flusher).Flush()
		wait(r, release)
	})
	c.IdleTimeout = 200 * time.Millisecond
	start := time.Now()
	_, err := readWithin(t, c, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "s3://bucket/dir/key.jsonl") || !strings.Contains(err.Error(), "no data for 200ms") {
		t.Fatalf("a stalled body: %v, want an error naming s3://bucket/dir/key.jsonl and the idle bound", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a stalled body was cut after %v, bound 200ms", took)
	}
}

// TestGetSlowSteadyBodyIsRead: a body that comes slowly but steadily,
// each part within the idle bound, is read whole though the read takes
// several bounds.
func TestGetSlowSteadyBodyIsRead(t *testing.T) {
	const parts, part = 25, "0123456789\n"
	c := stallServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		w.Header().Set("Content-Length", strconv.Itoa(parts*len(part)))
		w.WriteHeader(http.StatusOK)
		for range parts {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, part)
			w.(http.Flusher).Flush()
		}
	})
	c.IdleTimeout = time.Second
	start := time.Now()
	data, err := readWithin(t, c, 20*time.Second)
	if err != nil || data != strings.Repeat(part, parts) {
		t.Fatalf("a slow, steady body: %q, %v", data, err)
	}
	if took := time.Since(start); took < 2*c.IdleTimeout {
		t.Fatalf("the read took %v, not longer than the idle bound twice: it proves nothing", took)
	}
}

// TestGetStalledHeadersAreCut: a server that sends no headers fails the
// GET within the header bound, with an error naming the object.
func TestGetStalledHeadersAreCut(t *testing.T) {
	c := stallServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		wait(r, release)
	})
	c.HeaderTimeout = 200 * time.Millisecond
	_, err := readWithin(t, c, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "s3://bucket/dir/key.jsonl") || !strings.Contains(err.Error(), "no response headers within 200ms") {
		t.Fatalf("stalled headers: %v, want an error naming s3://bucket/dir/key.jsonl and the header bound", err)
	}
}
