package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/tlsfiles/tlstest"
	"github.com/sluicedb/sluice/server"
)

// runClientCLI runs a fresh `sluice ingest` or `sluice query` and returns
// its stdout, its stderr and its error.
func runClientCLI(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := map[string]func() *cobra.Command{"ingest": ingestCmd, "query": queryCmd}[args[0]]()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args[1:])
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// tokenRecorder is what the plain listener's requests carried as
// Authorization.
type tokenRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *tokenRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Get("Authorization"))
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

func (r *tokenRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// TestClientsOverHTTPS: `sluice ingest` and `sluice query` through a real
// server that serves TLS and requires client certificates, with --ca,
// --cert and --cert-key; without the client certificate, or trusting another
// CA, they are refused. The same server's handler on a plain listener
// shows the token (flag or SLUICE_TOKEN) sent as a bearer token, never
// printed, and a --server without scheme taken as http://.
func TestClientsOverHTTPS(t *testing.T) {
	ca, other := tlstest.NewCA(t, "sluice-test"), tlstest.NewCA(t, "other")
	srv, alice := ca.Server(t, "server"), ca.Client(t, "alice")
	cfg, err := config.Load("../../../examples/server/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen.TLS = config.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File, ClientAuth: config.ClientAuthRequire, ReloadInterval: time.Hour}
	s, err := server.New(context.Background(), cfg, server.Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	plainLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tokens := &tokenRecorder{}
	plain := &http.Server{Handler: tokens.wrap(s.Handler()), ReadHeaderTimeout: 10 * time.Second}
	go plain.Serve(plainLn)
	defer plain.Close()

	https := "https://" + ln.Addr().String()
	tlsFlags := []string{"--server", https, "--ca", ca.File, "--cert", alice.CertFile, "--cert-key", alice.KeyFile}
	var out, stderr string
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) { // Serve starts listening in its goroutine
		out, stderr, err = runClientCLI(append([]string{"ingest", "--table", "events", "../../../examples/server/events.jsonl"}, tlsFlags...)...)
		if err == nil || time.Since(start) > 10*time.Second {
			break
		}
	}
	if err != nil || !strings.Contains(out, `events.jsonl: {"accepted":5,"filtered":1,"failed":0}`) {
		t.Fatalf("ingest over HTTPS: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = runClientCLI(append([]string{"query", "--table", "events", "--hash", "ann", "--columns", "user,action"}, tlsFlags...)...)
	if err != nil || strings.Count(out, `"user":"ann"`) != 3 {
		t.Fatalf("query over HTTPS: %v\n%s%s", err, out, stderr)
	}

	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"without a client certificate", []string{"--server", https, "--ca", ca.File}, "certificate required"},
		{"trusting another CA", []string{"--server", https, "--ca", other.File, "--cert", alice.CertFile, "--cert-key", alice.KeyFile}, "certificate signed by unknown authority"},
		{"the system's roots", []string{"--server", https}, "certificate signed by unknown authority"},
		{"--ca with http://", []string{"--server", "http://" + ln.Addr().String(), "--ca", ca.File}, "are for an https:// --server"},
	} {
		_, _, err := runClientCLI(append([]string{"query", "--table", "events", "--hash", "ann"}, c.flags...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("query %s: %v, want an error with %q", c.name, err, c.want)
		}
	}

	// No scheme: http://. The token from the environment, then the flag.
	const secret = "s3cr3t-token-value"
	t.Setenv(TokenEnv, secret)
	hostPort := plainLn.Addr().String()
	if out, stderr, err = runClientCLI("query", "--server", hostPort, "--table", "events", "--hash", "ann"); err != nil || strings.Count(out, `"user":"ann"`) != 3 {
		t.Fatalf("query --server %s: %v\n%s%s", hostPort, err, out, stderr)
	}
	if out, stderr, err = runClientCLI("ingest", "--server", hostPort, "--token", "flag-"+secret, "--table", "events", "../../../examples/server/events.csv"); err != nil {
		t.Fatalf("ingest --server %s: %v\n%s%s", hostPort, err, out, stderr)
	}
	out, stderr, err = runClientCLI("query", "--server", hostPort, "--table", "nosuch", "--hash", "ann")
	if err == nil {
		t.Fatal("query of a table that does not exist: no error")
	}
	if strings.Contains(out+stderr+err.Error(), secret) {
		t.Fatalf("the token is printed:\n%s%s%v", out, stderr, err)
	}
	seen := tokens.all()
	if len(seen) < 3 || seen[0] != "Bearer "+secret || seen[1] != "Bearer flag-"+secret || seen[len(seen)-1] != "Bearer "+secret {
		t.Fatalf("Authorization headers seen: %q", seen)
	}
}
