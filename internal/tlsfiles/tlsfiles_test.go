package tlsfiles_test

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedb/sluice/internal/tlsfiles"
	"github.com/sluicedb/sluice/internal/tlsfiles/tlstest"
)

// TestReloadKeepsTheOldPairOnABadNewOne: a new pair is swapped in, a
// broken one (key of another certificate, an expired certificate, a file
// cut short) is refused with the previous one still served, and a refused
// version is reported once.
func TestReloadKeepsTheOldPairOnABadNewOne(t *testing.T) {
	ca := tlstest.NewCA(t, "test")
	first, second, expired := ca.Server(t, "first"), ca.Server(t, "second"), ca.Expired(t, "old")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.pem"), filepath.Join(dir, "tls-key.pem")
	first.CopyTo(t, certFile, keyFile)
	r, err := tlsfiles.NewReloader(tlsfiles.Files{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	serving := func() string {
		c, err := r.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.Subject.CommonName
	}
	if got := serving(); got != "first" {
		t.Fatalf("serving %q", got)
	}
	if changed, err := r.Reload(false); changed || err != nil {
		t.Fatalf("unchanged files: changed %v, %v", changed, err)
	}

	// The key of another certificate.
	copyFile(t, second.KeyFile, keyFile)
	if _, err := r.Reload(false); err == nil {
		t.Fatal("a key that does not match its certificate was accepted")
	}
	if got := serving(); got != "first" {
		t.Fatalf("after a refused pair: serving %q", got)
	}
	if changed, err := r.Reload(false); changed || err != nil {
		t.Fatalf("the refused version again: changed %v, %v (want it reported once)", changed, err)
	}

	second.CopyTo(t, certFile, keyFile)
	if changed, err := r.Reload(false); !changed || err != nil {
		t.Fatalf("new pair: changed %v, %v", changed, err)
	}
	if got := serving(); got != "second" {
		t.Fatalf("after reload: serving %q", got)
	}

	expired.CopyTo(t, certFile, keyFile)
	if _, err := r.Reload(false); !errors.Is(err, tlsfiles.ErrExpired) {
		t.Fatalf("expired pair: %v", err)
	}
	if err := os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\nMIIB"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(false); err == nil {
		t.Fatal("a certificate file cut short was accepted")
	}
	if got := serving(); got != "second" {
		t.Fatalf("after refused pairs: serving %q", got)
	}
}

func TestConfigsRefuseWhatCannotWork(t *testing.T) {
	ca := tlstest.NewCA(t, "test")
	p := ca.Server(t, "srv")
	if _, _, err := tlsfiles.ServerConfig(tlsfiles.ServerOptions{Files: tlsfiles.Files{CertFile: p.CertFile, KeyFile: p.KeyFile}, ClientAuth: tlsfiles.RequireClientCert}); err == nil {
		t.Error("client certificates required without a CA to verify them: accepted")
	}
	if _, _, err := tlsfiles.ClientConfig(tlsfiles.ClientOptions{CertFile: p.CertFile}); err == nil {
		t.Error("a client certificate without its key: accepted")
	}
	if _, err := tlsfiles.LoadPool(p.KeyFile); !errors.Is(err, tlsfiles.ErrNoCertificates) {
		t.Errorf("a key file as CA file: %v", err)
	}
	cfg, _, err := tlsfiles.ServerConfig(tlsfiles.ServerOptions{Files: tlsfiles.Files{CertFile: p.CertFile, KeyFile: p.KeyFile}})
	if err != nil {
		t.Fatal(err)
	}
	hello, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || cfg.MinVersion != tls.VersionTLS12 || hello.MinVersion != tls.VersionTLS12 {
		t.Errorf("min version %x / %x (%v), want TLS 1.2", cfg.MinVersion, hello.MinVersion, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
