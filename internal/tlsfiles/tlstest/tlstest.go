// Package tlstest makes certificate authorities and the certificates they
// sign, written as PEM files, for tests of TLS servers and clients. It is
// imported only by tests.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of a test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file.
	File string
	dir  string
}

// NewCA makes a CA named name whose certificate is written under t's
// temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
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
	dir := t.TempDir()
	ca := &CA{Cert: cert, key: key, dir: dir, File: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Pair is a certificate and its key as PEM files.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
}

// Server signs a server certificate for 127.0.0.1, ::1 and localhost (and
// the extra DNS names), valid for a day, written as name.pem and
// name-key.pem.
func (ca *CA) Server(t testing.TB, name string, dnsNames ...string) Pair {
	t.Helper()
	return ca.sign(t, name, x509.ExtKeyUsageServerAuth, time.Now().Add(24*time.Hour), append([]string{"localhost"}, dnsNames...), []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
}

// Client signs a client certificate with common name name.
func (ca *CA) Client(t testing.TB, name string) Pair {
	t.Helper()
	return ca.sign(t, name, x509.ExtKeyUsageClientAuth, time.Now().Add(24*time.Hour), nil, nil)
}

// Expired signs a server certificate that expired an hour ago.
func (ca *CA) Expired(t testing.TB, name string) Pair {
	t.Helper()
	return ca.sign(t, name, x509.ExtKeyUsageServerAuth, time.Now().Add(-time.Hour), []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
}

func (ca *CA) sign(t testing.TB, name string, usage x509.ExtKeyUsage, notAfter time.Time, dns []string, ips []net.IP) Pair {
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"), Cert: cert}
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	writePEM(t, p.KeyFile, "PRIVATE KEY", keyDER)
	return p
}

// CopyTo writes p's files over certFile and keyFile (a renewal as an
// operator does it: rewrite in place), key first.
func (p Pair) CopyTo(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for _, f := range [][2]string{{p.KeyFile, keyFile}, {p.CertFile, certFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
