package cluster

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(ctx context.Context, node string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, node+"/q", nil)
}

func TestFanoutAnswersInOrder(t *testing.T) {
	var nodes []string
	for _, body := range []string{"a\n", "b\nb\n", ""} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }))
		defer srv.Close()
		nodes = append(nodes, srv.URL)
	}
	f := &Fanout{NodeTimeout: time.Second}
	answers := f.Open(context.Background(), nodes, get)
	var got []string
	for _, a := range answers {
		b, err := io.ReadAll(a)
		if err != nil {
			t.Fatalf("%s: %v", a.Node, err)
		}
		got = append(got, string(b))
		a.Close()
	}
	if strings.Join(got, "|") != "a\n|b\nb\n|" {
		t.Errorf("answers %q", got)
	}
}

// TestFanoutNodeTimeout: a node that does not send its header, and one that
// stops in the middle of its body, each fail after the node timeout with
// ErrTimeout naming them; a node that keeps sending slowly for longer than
// the timeout in all is not cut off.
func TestFanoutNodeTimeout(t *testing.T) {
	// The handlers below block until release is closed, which must come
	// before the servers' Close (it waits for running handlers).
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer silent.Close()
	stalls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
	}))
	defer stalls.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for range 6 {
			io.WriteString(w, "row\n")
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	defer slow.Close()
	defer close(release)

	const timeout = 300 * time.Millisecond
	f := &Fanout{NodeTimeout: timeout}
	start := time.Now()
	answers := f.Open(context.Background(), []string{silent.URL, stalls.URL, slow.URL}, get)
	defer func() {
		for _, a := range answers {
			a.Close()
		}
	}()
	if el := time.Since(start); el > 3*timeout+500*time.Millisecond {
		t.Errorf("Open took %v with a %v node timeout", el, timeout)
	}
	var ne *NodeError
	if a := answers[0]; !errors.Is(a.Err, ErrTimeout) || !errors.As(a.Err, &ne) || ne.Node != silent.URL {
		t.Errorf("silent node: %v, want a timeout naming it", a.Err)
	}
	if answers[1].Err != nil {
		t.Fatalf("stalling node failed before its body: %v", answers[1].Err)
	}
	start = time.Now()
	b, err := io.ReadAll(answers[1])
	if string(b) != "first\n" || !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), stalls.URL) {
		t.Errorf("stalling node: %q, %v; want its first line, then a timeout naming it", b, err)
	}
	if el := time.Since(start); el > 3*timeout+500*time.Millisecond {
		t.Errorf("the stall was noticed after %v with a %v node timeout", el, timeout)
	}
	b, err = io.ReadAll(answers[2])
	if err != nil || strings.Count(string(b), "row\n") != 6 {
		t.Errorf("slow but steady node: %q, %v; want 6 rows", b, err)
	}
}

func TestFanoutErrors(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unknown column \"x\"", http.StatusBadRequest)
	}))
	defer bad.Close()
	broke := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Trailer", TrailerError)
		io.WriteString(w, "row\n")
		w.Header().Set(TrailerError, "disk read failed")
	}))
	defer broke.Close()
	f := &Fanout{}
	answers := f.Open(context.Background(), []string{bad.URL, broke.URL, "http://127.0.0.1:1"}, get)
	defer func() {
		for _, a := range answers {
			a.Close()
		}
	}()
	var se *StatusError
	if !errors.As(answers[0].Err, &se) || se.Code != 400 || !strings.Contains(se.Body, "unknown column") {
		t.Errorf("error status: %v", answers[0].Err)
	}
	b, err := io.ReadAll(answers[1])
	if string(b) != "row\n" || err == nil || !strings.Contains(err.Error(), "disk read failed") || !strings.Contains(err.Error(), broke.URL) {
		t.Errorf("trailer error: %q, %v", b, err)
	}
	if answers[2].Err == nil || !strings.Contains(answers[2].Err.Error(), "127.0.0.1:1") {
		t.Errorf("refused connection: %v", answers[2].Err)
	}
}

func TestMembers(t *testing.T) {
	got, _ := Static{"http://a:1/", "http://b:2"}.Members(context.Background())
	if strings.Join(got, ",") != "http://a:1,http://b:2" {
		t.Errorf("static: %q", got)
	}
	d, err := ParseDNS("localhost:8080", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err = d.Members(context.Background())
	if err != nil || len(got) == 0 || !strings.HasPrefix(got[0], "http://") || !strings.HasSuffix(got[0], ":8080") {
		t.Errorf("dns localhost: %q, %v", got, err)
	}
	for _, bad := range []string{"localhost", "localhost:0", ":80", "localhost:x"} {
		if _, err := ParseDNS(bad, ""); err == nil {
			t.Errorf("ParseDNS(%q) accepted", bad)
		}
	}
	if _, err := (DNS{Host: "no-such-host.invalid", Port: 1}).Members(context.Background()); err == nil {
		t.Error("an unresolvable name gave members")
	}
}
