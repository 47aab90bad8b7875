package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/tlsfiles/tlstest"
)

// TestClusterMembersOverTLS: members that serve HTTPS ask each other over
// https:// and verify each other against cluster.tls's CA. A node without
// cluster.tls cannot verify the others (Go's default roots do not hold the
// test CA), so its cluster query fails naming the member instead of
// trusting whatever answers.
func TestClusterMembersOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "members")
	lns := make([]net.Listener, 2)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, "https://"+ln.Addr().String())
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(client.CloseIdleConnections)
	nodes := make([]*testServer, len(lns))
	for i, ln := range lns {
		srv := ca.Server(t, fmt.Sprintf("node%d", i))
		memberTLS := fmt.Sprintf(", tls: {ca_file: %q}", ca.File)
		if i == 1 {
			memberTLS = "" // node1 does not know the members' CA
		}
		cfg := fmt.Sprintf(`
listen:
  http: "127.0.0.1:0"
  tls: {cert_file: %q, key_file: %q}
cluster: {members: ["%s"], node_timeout: 5s%s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
`, srv.CertFile, srv.KeyFile, strings.Join(members, `", "`), memberTLS)
		nodes[i] = serveConfigOn(t, cfg, "", ln)
		nodes[i].url = members[i]
	}
	do := func(method, url, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, s := range nodes {
		waitUntil(t, "node over HTTPS", func() bool { code, _ := do("GET", s.url+"/readyz", ""); return code == 200 })
		var b strings.Builder
		for n := i * 10; n < i*10+10; n++ {
			fmt.Fprintf(&b, `{"user":"u%d","ts":"2026-11-26T10:00:00Z","n":%d}`+"\n", n, n)
		}
		if code, body := do("POST", s.url+"/v1/tables/events/rows", b.String()); code != 200 {
			t.Fatalf("ingest into node%d: %d %s", i, code, body)
		}
	}
	code, body := do("GET", nodes[0].url+"/v1/tables/events/query?cluster=true", "")
	if code != 200 || len(lines(body)) != 20 {
		t.Fatalf("cluster query from the node that knows the members' CA: %d, %d rows, want 20: %s", code, len(lines(body)), body)
	}
	code, body = do("GET", nodes[1].url+"/v1/tables/events/query?cluster=true", "")
	if code == 200 || !strings.Contains(body, members[0]) || !strings.Contains(body, "certificate") {
		t.Errorf("cluster query from the node without cluster.tls: %d %s, want a failure naming %s and its certificate", code, body, members[0])
	}
}
