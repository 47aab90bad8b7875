package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/internal/tlsfiles/tlstest"
	"github.com/sluicedb/sluice/server"
)

// benchConfig is one table of ten columns, the rows of benchBodies.
const benchConfig = `
tables:
  - name: bench
    hashBy: user
    sortBy: time
    schema:
      - {name: time, type: timestamp}
      - {name: user, type: string}
      - {name: action, type: string}
      - {name: country, type: string}
      - {name: device, type: string}
      - {name: amount, type: float64}
      - {name: score, type: float64}
      - {name: count, type: int64}
      - {name: session, type: int64}
      - {name: ok, type: bool}
`

// startBenchNode starts a server process of a benchmark on yaml; a
// non-nil tlsConfig is the client's of a node that listens with TLS.
func startBenchNode(b *testing.B, yaml string, tlsConfig *tls.Config) *testnode.Node {
	b.Helper()
	n := newNode(b, b.TempDir(), yaml)
	if tlsConfig != nil {
		n.URL = strings.Replace(n.URL, "http://", "https://", 1)
		n.Client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	}
	n.Start(b)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			b.Errorf("server process: %v", err)
		}
	})
	return n
}

// cpu is the node's user+sys CPU time so far, from /proc (what its
// rusage reports).
func cpu(n *testnode.Node) time.Duration {
	return time.Duration(n.CPUSeconds() * float64(time.Second))
}

// benchBodies are 16 NDJSON batches of 1000 ten-field rows (benchConfig's
// table), as server's BenchmarkIngestBatch sends.
func benchBodies() [][]byte {
	var bodies [][]byte
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for n := 0; n < 16; n++ {
		var buf bytes.Buffer
		for i := 0; i < 1000; i++ {
			k := n*1000 + i
			fmt.Fprintf(&buf, `{"time":"%s","user":"u%d","action":"view","country":"SG","device":"web","amount":%d.5,"score":%d.5,"count":%d,"session":%d,"ok":true}`+"\n",
				base.Add(time.Duration(k)*37*time.Millisecond).Format(time.RFC3339Nano), k%10, k%500, k%97, k%13, k/7)
		}
		bodies = append(bodies, buf.Bytes())
	}
	return bodies
}

// BenchmarkIngestHTTPSCost sends b.N batches of 1000 rows to two server
// processes, one plain HTTP and one HTTPS (ECDSA P-256, TLS 1.3,
// keep-alive, a bearer token checked against the auth: section), in
// alternating rounds so that both see the same machine, from two client
// goroutines. It reports each server's rows per CPU-second (the server
// process's CPU only, not the client's) and the CPU TLS and the token
// check add.
func BenchmarkIngestHTTPSCost(b *testing.B) {
	ca := tlstest.NewCA(b, "bench")
	pair := ca.Server(b, "server")
	plain := startBenchNode(b, benchConfig, nil)
	// The HTTPS server checks the token (auth on, one ingest role); the
	// plain one has no auth: the figure is TLS and authentication together.
	const token = "bench-token-0123456789abcdef"
	authSection := fmt.Sprintf("auth:\n  tokens:\n    - {name: bench, hash: %q, roles: [\"ingest:bench\"]}\n", auth.HashToken(token))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	secure := startBenchNode(b, fmt.Sprintf("listen:\n  tls:\n    cert_file: %s\n    key_file: %s\n", pair.CertFile, pair.KeyFile)+authSection+benchConfig, &tls.Config{RootCAs: pool})
	client := func(tc *tls.Config) *server.Client {
		tr := &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 4}
		b.Cleanup(tr.CloseIdleConnections)
		return &server.Client{HTTP: &http.Client{Transport: tr, Timeout: time.Minute}, Token: token, NoIdempotencyKey: true}
	}
	plainClient, secureClient := client(nil), client(&tls.Config{RootCAs: pool})
	plainClient.URL, secureClient.URL = plain.URL, secure.URL
	bodies := benchBodies()
	send := func(c *server.Client, n int) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					if _, err := c.PostBatch(b.Context(), "bench", "application/x-ndjson", bodies[i%int64(len(bodies))]); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	send(plainClient, 4) // warm both (connections, the store's first writes)
	send(secureClient, 4)
	const rounds = 10
	var plainCPU, secureCPU time.Duration
	b.ResetTimer()
	for r := range rounds {
		n := b.N / rounds
		if r < b.N%rounds {
			n++
		}
		cpu0 := cpu(plain)
		send(plainClient, n)
		plainCPU += cpu(plain) - cpu0
		cpu0 = cpu(secure)
		send(secureClient, n)
		secureCPU += cpu(secure) - cpu0
	}
	b.StopTimer()
	rows := float64(b.N) * 1000
	b.ReportMetric(rows/plainCPU.Seconds(), "http-rows/CPU-s")
	b.ReportMetric(rows/secureCPU.Seconds(), "https-rows/CPU-s")
	b.ReportMetric((secureCPU.Seconds()/plainCPU.Seconds()-1)*100, "tls-cost-%")
}

// BenchmarkTLSHandshake makes b.N new connections to a server process,
// each closed after one GET /healthz, from two goroutines: connections per
// second and the server's CPU per connection, over plain HTTP (the cost of
// a connection without TLS) and over TLS with full handshakes (ECDSA P-256,
// no session resumption) with Go's default key exchange (X25519MLKEM768,
// post-quantum hybrid) and with X25519 alone.
func BenchmarkTLSHandshake(b *testing.B) {
	ca := tlstest.NewCA(b, "bench")
	pair := ca.Server(b, "server")
	plain := startBenchNode(b, benchConfig, nil)
	// The HTTPS server checks the token (auth on, one ingest role); the
	// plain one has no auth: the figure is TLS and authentication together.
	const token = "bench-token-0123456789abcdef"
	authSection := fmt.Sprintf("auth:\n  tokens:\n    - {name: bench, hash: %q, roles: [\"ingest:bench\"]}\n", auth.HashToken(token))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	secure := startBenchNode(b, fmt.Sprintf("listen:\n  tls:\n    cert_file: %s\n    key_file: %s\n", pair.CertFile, pair.KeyFile)+authSection+benchConfig, &tls.Config{RootCAs: pool})
	for _, c := range []struct {
		name string
		srv  *testnode.Node
		tls  *tls.Config
	}{
		{"http", plain, nil},
		{"tls-default", secure, &tls.Config{RootCAs: pool}},
		{"tls-x25519", secure, &tls.Config{RootCAs: pool, CurvePreferences: []tls.CurveID{tls.X25519}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: c.tls}}
			get := func() error {
				resp, err := hc.Get(c.srv.URL + "/healthz")
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return nil
			}
			for start := time.Now(); get() != nil; time.Sleep(20 * time.Millisecond) {
				if time.Since(start) > 10*time.Second {
					b.Fatal(get())
				}
			}
			b.SetParallelism(1)
			b.ResetTimer()
			cpu0 := cpu(c.srv)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := get(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			used := cpu(c.srv) - cpu0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
			b.ReportMetric(float64(used.Microseconds())/float64(b.N), "server-CPU-µs/conn")
		})
	}
}
