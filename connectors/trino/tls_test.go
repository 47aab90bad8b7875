package trino_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
)

// testCA makes certificates for one test: a CA, and leaves it signs.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf is a certificate the CA signs for 127.0.0.1, as PEM: the
// certificate, and the key as SEC1 ("EC PRIVATE KEY"), the form Go and
// openssl write.
func (ca *testCA) leaf(t *testing.T, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// TestTrinoOverTLSWithToken runs a real Trino with the plugin against a
// node behind an HTTPS front that stands in for a secured node: it shows a
// certificate from the test's CA, asks for a client certificate from the
// same CA and wants the catalog's token as a bearer token. One catalog has
// the right token, one a wrong one.
func TestTrinoOverTLSWithToken(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	nodes := startNodes(t, 1)
	fill(t, nodes[0], 0, 100)

	const token = "trino-reader-7f3a9c"
	ca := newTestCA(t)
	serverCert, serverKey := ca.leaf(t, "node", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.leaf(t, "trino", x509.ExtKeyUsageClientAuth)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", ca.pem)
	certFile := write("trino.pem", clientCert)
	keyFile := write("trino.key", clientKey)
	tokenFile := write("token", []byte(token+"\n"))
	wrongTokenFile := write("wrong-token", []byte("not-the-token\n"))

	target, err := url.Parse(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			// Echo what came, as a careless proxy might: the connector must not pass it on.
			http.Error(w, `{"error":"unknown token: `+r.Header.Get("Authorization")+`"}`, http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AddCert(ca.cert)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clients,
		MinVersion:   tls.VersionTLS12,
	}}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	frontURL := "https://" + ln.Addr().String()

	catalog := func(tokenFile string) string {
		return catalogFile(t, frontURL) + "sluice.tls.ca-file=" + caFile + "\nsluice.tls.cert-file=" + certFile +
			"\nsluice.tls.key-file=" + keyFile + "\nsluice.token-file=" + tokenFile + "\n"
	}
	trino, err := coldtest.StartTrino(t.TempDir(), map[string]string{"sluice": catalog(tokenFile), "wrongtoken": catalog(wrongTokenFile)}, pluginDir)
	coldtest.Require(t, err)
	defer trino.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, rows, err := trino.Query(ctx, "SELECT count(*), sum(n) FROM sluice.cluster.events")
	if err != nil {
		log, _ := os.ReadFile(trino.Log)
		t.Fatalf("over TLS with the token: %v\nTrino log (end): %s", err, log[max(0, len(log)-3000):])
	}
	if got := fmt.Sprint(rows); got != "[[100 4950]]" {
		t.Errorf("over TLS with the token: %v, want [[100 4950]]", rows)
	}

	_, _, err = trino.Query(ctx, "SELECT count(*) FROM wrongtoken.cluster.events")
	if err == nil {
		t.Fatal("a catalog with a wrong token read the table")
	}
	if !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "not-the-token") {
		t.Errorf("wrong token: %v, want the node's 401 without the token", err)
	}
}
