package trino_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/tlsfiles/tlstest"
	"github.com/sluicedb/sluice/server"
)

// TestTrinoOverTLSWithToken runs a real Trino with the plugin against a
// secured sluice node: HTTPS with a certificate from the test's CA, client
// certificates required (the member transport shows one too, since the
// node asks its own URL for its part of a cluster read), bearer tokens with
// roles, and the cluster secret. One catalog has the reader's token, one a
// wrong token.
func TestTrinoOverTLSWithToken(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)

	ca := tlstest.NewCA(t, "sluice-trino")
	serverPair := ca.Server(t, "node")
	trinoPair, memberPair, loaderPair := ca.Client(t, "trino"), ca.Client(t, "member"), ca.Client(t, "loader")
	readerToken, readerHash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	loaderToken, loaderHash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secretFile := write("cluster-secret", "trino-test-cluster-secret-0123456789")
	tokenFile := write("token", readerToken+"\n")
	wrongTokenFile := write("wrong-token", "not-the-token\n")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node := "https://" + ln.Addr().String()
	yaml := fmt.Sprintf(`listen:
  tls: {cert_file: %q, key_file: %q, client_ca_file: %q, client_auth: require}
auth:
  tokens:
    - {name: trino, hash: %q, roles: ["query:events"]}
    - {name: loader, hash: %q, roles: ["ingest:events"]}
cluster:
  members: [%q]
  secret_file: %q
  tls: {ca_file: %q, cert_file: %q, key_file: %q}
%s`, serverPair.CertFile, serverPair.KeyFile, ca.File, readerHash, loaderHash, node, secretFile,
		ca.File, memberPair.CertFile, memberPair.KeyFile, tableYAML)
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), cfg, server.Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	// The loader ingests over HTTPS with its certificate and token.
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	loaderCert, err := tls.LoadX509KeyPair(loaderPair.CertFile, loaderPair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{loaderCert}}}
	defer tr.CloseIdleConnections()
	loader := &server.Client{URL: node, HTTP: &http.Client{Transport: tr, Timeout: time.Minute}, Token: loaderToken}
	var b strings.Builder
	for n := range 100 {
		b.WriteString(rowJSON(n) + "\n")
	}
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		_, err := loader.PostBatch(ctx, "events", "application/x-ndjson", []byte(b.String()))
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("ingest over HTTPS with the loader's token: %v", err)
		}
	}

	catalog := func(tokenFile string) string {
		return catalogFile(t, node) + "sluice.tls.ca-file=" + ca.File + "\nsluice.tls.cert-file=" + trinoPair.CertFile +
			"\nsluice.tls.key-file=" + trinoPair.KeyFile + "\nsluice.token-file=" + tokenFile + "\n"
	}
	trino := sharedTrino(t)
	right := newCatalog(t, trino, "sluice", catalog(tokenFile))
	wrong := newCatalog(t, trino, "wrongtoken", catalog(wrongTokenFile))

	qctx, qcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer qcancel()
	_, rows, err := trino.Query(qctx, "SELECT count(*), sum(n) FROM "+right+".cluster.events")
	if err != nil {
		log, _ := os.ReadFile(trino.Log)
		t.Fatalf("over TLS with the token: %v\nTrino log (end): %s", err, log[max(0, len(log)-3000):])
	}
	if got := fmt.Sprint(rows); got != "[[100 4950]]" {
		t.Errorf("over TLS with the token: %v, want [[100 4950]]", rows)
	}

	_, _, err = trino.Query(qctx, "SELECT count(*) FROM "+wrong+".cluster.events")
	if err == nil {
		t.Fatal("a catalog with a wrong token read the table")
	}
	if !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "not-the-token") {
		t.Errorf("wrong token: %v, want the node's 401 without the token", err)
	}
}
