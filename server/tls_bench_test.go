package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/internal/tlsfiles/tlstest"
)

// benchChild is a server process of a benchmark whose CPU time is read
// from /proc (the process's utime+stime, what its rusage reports).
type benchChild struct {
	cmd *exec.Cmd
	url string
}

func startBenchChild(b *testing.B, yaml, scheme string) *benchChild {
	b.Helper()
	cmd, addr, stderr := startChildConfig(b, b.TempDir(), yaml)
	c := &benchChild{cmd: cmd, url: scheme + "://" + addr}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			b.Errorf("server process: %v\n%s", err, stderr.String())
		}
	})
	return c
}

// cpu is the child's user+sys CPU time so far.
func (c *benchChild) cpu(b *testing.B) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (which may hold spaces): state is
	// the first, utime the 12th, stime the 13th, in clock ticks (USER_HZ,
	// 100 on Linux).
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc stat %q: %v %v", stat, err1, err2)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// benchBodies are 16 NDJSON batches of 1000 ten-field rows (benchConfig's
// table), as BenchmarkIngestBatch sends.
func benchBodies() [][]byte {
	var bodies [][]byte
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for n := 0; n < 16; n++ {
		var buf bytes.Buffer
		for i := 0; i < 1000; i++ {
			k := n*1000 + i
			fmt.Fprintf(&buf, `{"time":"%s","user":"u%d","action":"view","country":"SG","device":"web","amount":%d.5,"score":%d.5,"count":%d,"session":%d,"ok":true}`+"\n",
				base.Add(time.Duration(k)*37*time.Millisecond).Format(time.RFC3339Nano), k%benchPartitions, k%500, k%97, k%13, k/7)
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
	plain := startBenchChild(b, benchConfig, "http")
	// The HTTPS server checks the token (auth on, one ingest role); the
	// plain one has no auth: the figure is TLS and authentication together.
	const token = "bench-token-0123456789abcdef"
	authSection := fmt.Sprintf("auth:\n  tokens:\n    - {name: bench, hash: %q, roles: [\"ingest:bench\"]}\n", auth.HashToken(token))
	secure := startBenchChild(b, fmt.Sprintf("listen:\n  tls:\n    cert_file: %s\n    key_file: %s\n", pair.CertFile, pair.KeyFile)+authSection+benchConfig, "https")
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	client := func(tc *tls.Config) *Client {
		tr := &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 4}
		b.Cleanup(tr.CloseIdleConnections)
		return &Client{HTTP: &http.Client{Transport: tr, Timeout: time.Minute}, Token: token, NoIdempotencyKey: true}
	}
	plainClient, secureClient := client(nil), client(&tls.Config{RootCAs: pool})
	plainClient.URL, secureClient.URL = plain.url, secure.url
	waitReady(b, plain.url)
	bodies := benchBodies()
	send := func(c *Client, n int) {
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
		cpu0 := plain.cpu(b)
		send(plainClient, n)
		plainCPU += plain.cpu(b) - cpu0
		cpu0 = secure.cpu(b)
		send(secureClient, n)
		secureCPU += secure.cpu(b) - cpu0
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
	plain := startBenchChild(b, benchConfig, "http")
	// The HTTPS server checks the token (auth on, one ingest role); the
	// plain one has no auth: the figure is TLS and authentication together.
	const token = "bench-token-0123456789abcdef"
	authSection := fmt.Sprintf("auth:\n  tokens:\n    - {name: bench, hash: %q, roles: [\"ingest:bench\"]}\n", auth.HashToken(token))
	secure := startBenchChild(b, fmt.Sprintf("listen:\n  tls:\n    cert_file: %s\n    key_file: %s\n", pair.CertFile, pair.KeyFile)+authSection+benchConfig, "https")
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, c := range []struct {
		name string
		srv  *benchChild
		tls  *tls.Config
	}{
		{"http", plain, nil},
		{"tls-default", secure, &tls.Config{RootCAs: pool}},
		{"tls-x25519", secure, &tls.Config{RootCAs: pool, CurvePreferences: []tls.CurveID{tls.X25519}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: c.tls}}
			get := func() error {
				resp, err := hc.Get(c.srv.url + "/healthz")
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
			cpu0 := c.srv.cpu(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := get(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			cpu := c.srv.cpu(b) - cpu0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "server-CPU-µs/conn")
		})
	}
}
