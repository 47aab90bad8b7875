package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/tlsfiles/tlstest"
)

// TestIdleConnectionsCannotLockOut: one client holds 5,000 idle keep-alive
// connections; /healthz from another still answers within a bound, and the
// server keeps no more than listen.max_connections of them open. Once with
// a small cap and once with the default.
func TestIdleConnectionsCannotLockOut(t *testing.T) {
	for _, max := range []int{64, config.DefaultMaxConnections} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			yaml := "tables:\n  - name: t\n"
			if max != config.DefaultMaxConnections {
				yaml = fmt.Sprintf("listen:\n  max_connections: %d\n", max) + yaml
			}
			ts := startServer(t, yaml, "")
			floodIdle(t, strings.TrimPrefix(ts.url, "http://"), ts.url, max, 5000, nil)
		})
	}
}

// floodIdle opens n keep-alive connections to addr (over TLS with tc),
// each left idle after one GET /healthz, then checks that a new client gets /healthz from
// base within 5 s and that at most max of the n stay open.
func floodIdle(t *testing.T, addr, base string, max, n int, tc *tls.Config) {
	t.Helper()
	conns := make([]net.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	var failed sync.Map
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					failed.Store(i, err)
					continue
				}
				conns[i] = c
				rw := c
				if tc != nil {
					rw = tls.Client(c, tc)
				}
				c.SetDeadline(deadline)
				if _, err := io.WriteString(rw, "GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n"); err != nil {
					failed.Store(i, err)
					continue
				}
				resp, err := http.ReadResponse(bufio.NewReader(rw), nil)
				if err != nil {
					failed.Store(i, err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	nFailed := 0
	failed.Range(func(k, v any) bool {
		if nFailed == 0 {
			t.Logf("connection %v: %v", k, v)
		}
		nFailed++
		return true
	})

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tc}}
	start := time.Now()
	resp, err := hc.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with %d idle connections open (cap %d): %v after %v", n, max, err, time.Since(start))
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %s", resp.Status)
	}
	t.Logf("/healthz answered in %v with %d idle connections made (cap %d)", time.Since(start), n, max)

	var open int
	for wait := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		open = 0
		for _, c := range conns {
			if c != nil && stillOpen(c) {
				open++
			}
		}
		if open <= max || time.Since(wait) > 10*time.Second {
			break
		}
	}
	if open > max {
		t.Fatalf("%d of %d idle connections still open, over the cap %d", open, n, max)
	}
	if nFailed > 0 {
		t.Fatalf("%d of %d connections got no answer while idle ones could have made room", nFailed, n)
	}
}

// stillOpen reports whether the server has not closed c (a peek that does
// not wait: EOF or a reset means closed).
func stillOpen(c net.Conn) bool {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return false
	}
	open := false
	rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n > 0 || errors.Is(err, syscall.EAGAIN)
		return true
	})
	return open
}

// loggedServer is a real server whose log and SIGHUP channel the test
// holds, on a port the kernel picks (its url assumes listen.tls).
type loggedServer struct {
	addr, url string
	logs      *syncLog
	hup       chan os.Signal
}

func startLogged(t *testing.T, yaml string) *loggedServer {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &loggedServer{addr: ln.Addr().String(), logs: &syncLog{}, hup: make(chan os.Signal, 1)}
	ts.url = "https://" + ts.addr
	s, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(ts.logs, nil)), ReloadSignals: ts.hup})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// TestIdleTLSConnectionsCannotLockOut is the same over TLS: the cap sees
// through the TLS connection to the socket it counts (fewer connections:
// each costs a full handshake).
func TestIdleTLSConnectionsCannotLockOut(t *testing.T) {
	ca := tlstest.NewCA(t, "sluice-test")
	srv := ca.Server(t, "server")
	const max = 16
	ts := startLogged(t, fmt.Sprintf("listen:\n  max_connections: %d\n  tls:\n    cert_file: %s\n    key_file: %s\ntables:\n  - name: t\n", max, srv.CertFile, srv.KeyFile))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	tc := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	waitUntil(t, "the server to answer over TLS", func() bool {
		c, err := dialTLS(t, ts.addr, tc)
		return err == nil && c.Close() == nil
	})
	floodIdle(t, ts.addr, ts.url, max, 300, tc)
}

// tlsConn is a keep-alive HTTPS connection driven by hand, so that the test
// knows which connection each request goes over.
type tlsConn struct {
	*tls.Conn
	r *bufio.Reader
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) (*tlsConn, error) {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := &tlsConn{Conn: c.(*tls.Conn)}
	tc.r = bufio.NewReader(tc.Conn)
	t.Cleanup(func() { tc.Close() })
	return tc, nil
}

// get sends GET path over c and returns the status.
func (c *tlsConn) get(path string) (int, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: sluice\r\n\r\n", path); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (c *tlsConn) servedBy() string {
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestTLSCertReloadKeepsConnections: the certificate files are replaced
// while a keep-alive connection is open; new handshakes get the new
// certificate (by polling, and on SIGHUP), the open connection keeps
// answering, and a broken new pair leaves the last good one serving.
func TestTLSCertReloadKeepsConnections(t *testing.T) {
	for _, how := range []string{"poll", "sighup"} {
		t.Run(how, func(t *testing.T) {
			ca := tlstest.NewCA(t, "sluice-test")
			first, second, third := ca.Server(t, "first"), ca.Server(t, "second"), ca.Server(t, "third")
			dir := t.TempDir()
			certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
			first.CopyTo(t, certFile, keyFile)
			interval := "50ms"
			if how == "sighup" {
				interval = "1h"
			}
			ts := startLogged(t, fmt.Sprintf("listen:\n  tls:\n    cert_file: %s\n    key_file: %s\n    reload_interval: %s\ntables:\n  - name: t\n", certFile, keyFile, interval))
			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			client := &tls.Config{RootCAs: pool}

			var old *tlsConn
			waitUntil(t, "the server to answer over TLS", func() bool {
				c, err := dialTLS(t, ts.addr, client)
				if err != nil {
					return false
				}
				old = c
				code, err := c.get("/readyz")
				return err == nil && code == 200
			})
			if got := old.servedBy(); got != "first" {
				t.Fatalf("served by %q", got)
			}

			renew := func(p tlstest.Pair, want string) {
				t.Helper()
				p.CopyTo(t, certFile, keyFile)
				if how == "sighup" {
					ts.hup <- syscall.SIGHUP
				}
				waitUntil(t, "a new handshake to get "+want, func() bool {
					c, err := dialTLS(t, ts.addr, client)
					return err == nil && c.servedBy() == want
				})
			}
			renew(second, "second")
			if code, err := old.get("/healthz"); err != nil || code != 200 {
				t.Fatalf("the connection made before the reload: %d, %v", code, err)
			}
			if got := old.servedBy(); got != "first" {
				t.Fatalf("the old connection now says %q", got)
			}

			// A key of another certificate: refused, logged, "second" still served.
			b, err := os.ReadFile(third.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(keyFile, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if how == "sighup" {
				ts.hup <- syscall.SIGHUP
			}
			waitUntil(t, "the refused pair to be logged", func() bool {
				return strings.Contains(ts.logs.String(), "new certificate files refused")
			})
			c, err := dialTLS(t, ts.addr, client)
			if err != nil || c.servedBy() != "second" {
				t.Fatalf("after a bad pair: %v", err)
			}
			renew(third, "third")
		})
	}
}

// TestTLSRefusesWhatItCannotVerify: client_auth require refuses a client
// without a certificate or with one of another CA; a client that does not
// trust the server's CA, or speaks TLS 1.1, gets no answer.
func TestTLSRefusesWhatItCannotVerify(t *testing.T) {
	ca, other := tlstest.NewCA(t, "sluice-test"), tlstest.NewCA(t, "other")
	srv := ca.Server(t, "server")
	ts := startLogged(t, fmt.Sprintf("listen:\n  tls:\n    cert_file: %s\n    key_file: %s\n    client_ca_file: %s\n    client_auth: require\ntables:\n  - name: t\n", srv.CertFile, srv.KeyFile, ca.File))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	wrongPool := x509.NewCertPool()
	wrongPool.AddCert(other.Cert)
	pair := func(p tlstest.Pair) []tls.Certificate {
		c, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	good, mallory := pair(ca.Client(t, "alice")), pair(other.Client(t, "mallory"))
	get := func(cfg *tls.Config) error {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(ts.url + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return errors.New(resp.Status)
		}
		return nil
	}
	waitUntil(t, "the server to answer a verified client", func() bool { return get(&tls.Config{RootCAs: pool, Certificates: good}) == nil })
	for _, c := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"no client certificate", &tls.Config{RootCAs: pool}, "certificate required"},
		// Sent even though the server names other CAs as acceptable, as a
		// hostile client would.
		{"a client certificate of another CA", &tls.Config{RootCAs: pool, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &mallory[0], nil }}, "unknown certificate authority"},
		{"a server the client's CA did not sign", &tls.Config{RootCAs: wrongPool, Certificates: good}, "certificate signed by unknown authority"},
		{"TLS 1.1", &tls.Config{RootCAs: pool, Certificates: good, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, "protocol version"},
	} {
		err := get(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no %s in 10s", what)
		}
	}
}

// syncLog is a log a server writes while the test reads it.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMaxConnectionsOverFDLimitWarns: a cap the process's open-file limit
// cannot hold beside the store is said at start.
func TestMaxConnectionsOverFDLimitWarns(t *testing.T) {
	ts := startLogged(t, "listen:\n  max_connections: 100000000\ntables:\n  - name: t\n")
	waitUntil(t, "the warning", func() bool {
		return strings.Contains(ts.logs.String(), "listen.max_connections leaves too few file descriptors")
	})
}

// TestBusyConnectionIsNeverEvicted: at the cap, a connection in the middle
// of a request (here one whose body is half sent, for longer than a new
// connection's grace) is not closed to make room; the new connection is
// refused instead, and the request completes.
func TestBusyConnectionIsNeverEvicted(t *testing.T) {
	ts := startServer(t, "listen:\n  max_connections: 1\ntables:\n  - name: t\n", "")
	addr := strings.TrimPrefix(ts.url, "http://")
	busy, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busy.SetDeadline(time.Now().Add(30 * time.Second))
	row := `{"n":1}` + "\n"
	fmt.Fprintf(busy, "POST /v1/tables/t/rows HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/x-ndjson\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", 2*len(row))
	r := bufio.NewReader(busy)
	// 100 Continue comes once the handler reads the body: the server has
	// marked the connection active by then.
	if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("no 100 Continue: %v", err)
	}
	io.WriteString(busy, row)
	time.Sleep(staleNewConn + 100*time.Millisecond) // past the grace of a connection without a request

	other, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(other, "GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(other), nil); err == nil {
		t.Fatalf("a connection over the cap with none idle was served: %s", resp.Status)
	}

	io.WriteString(busy, row)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("the busy connection, after a new one came at the cap: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"accepted":2`) {
		t.Fatalf("the busy request: %s %s", resp.Status, body)
	}
}

// TestCheckLoadsTLSFiles: `serve --check` and Serve refuse a certificate
// whose key is another's, before anything listens.
func TestCheckLoadsTLSFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "sluice-test")
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen:\n  tls:\n    cert_file: %s\n    key_file: %s\ntables:\n  - name: t\n", a.CertFile, b.KeyFile)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "listen.tls") {
		t.Fatalf("Check: %v", err)
	}
	s, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Serve(ctx, ln); err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
		t.Fatalf("Serve: %v", err)
	}
}
