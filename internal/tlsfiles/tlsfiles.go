// Package tlsfiles turns PEM files into TLS configurations for sluice's
// servers and clients: a CA pool, a certificate pair, and a Reloader that
// holds the pair (and the CA pool of client certificates) and loads them
// again when the files change, so that a renewed certificate is served to
// new handshakes without a restart and without closing the connections
// already established.
//
// Every configuration it makes refuses TLS versions below 1.2.
package tlsfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// MinVersion is the lowest TLS version any configuration accepts: 1.0 and
// 1.1 are deprecated (RFC 8996).
const MinVersion = tls.VersionTLS12

// ErrNoCertificates is wrapped by LoadPool when a CA file holds no PEM
// certificate (a key file or a DER file given by mistake).
var ErrNoCertificates = errors.New("no PEM certificates")

// ErrExpired is wrapped when a certificate pair's leaf is past its NotAfter:
// serving it would only make every client fail.
var ErrExpired = errors.New("certificate expired")

// LoadPool reads the PEM certificates of file into a new pool.
func LoadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: %w", file, ErrNoCertificates)
	}
	return pool, nil
}

// LoadPair reads a certificate chain and its private key (PEM) and checks
// that they match and that the leaf has not expired at now.
func LoadPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate %s with key %s: %w", certFile, keyFile, err)
	}
	if pair.Leaf == nil { // X509KeyPair parses it since Go 1.23; never trust that silently
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certificate %s: %w", certFile, err)
		}
	}
	if now.After(pair.Leaf.NotAfter) {
		return nil, fmt.Errorf("certificate %s: %w at %s", certFile, ErrExpired, pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &pair, nil
}

// Files are the PEM files of one side of a TLS connection.
type Files struct {
	// CertFile and KeyFile are the certificate chain (leaf first) and its
	// private key.
	CertFile, KeyFile string
	// CAFile, when set, is the pool that verifies the other side: on a
	// server the CAs of client certificates, on a client the server's CAs
	// (empty: the system's roots).
	CAFile string
}

// loaded is one consistent generation of the files.
type loaded struct {
	pair *tls.Certificate
	pool *x509.CertPool // nil without CAFile
	// server is the configuration handshakes get (GetConfigForClient);
	// nil for a client's Reloader.
	server *tls.Config
}

// signature identifies a version of the files cheaply (stat, no read): a
// renewal that rewrites a file or swaps a symlink changes it.
type signature [3]struct {
	mod  time.Time
	size int64
}

// Reloader holds the certificate pair and CA pool loaded from Files and
// loads them again when Reload finds them changed. A new generation that
// does not load (a key that does not match its certificate, a file half
// written, an expired certificate) is refused and the previous one keeps
// serving. Safe for concurrent use.
type Reloader struct {
	files Files
	// derive builds the server configuration of a generation; nil on a
	// client.
	derive func(*tls.Certificate, *x509.CertPool) *tls.Config

	cur atomic.Pointer[loaded]

	mu sync.Mutex // serialises Reload
	// seen is the signature of the files as last loaded or refused, so a
	// refused version is reported once, not at every poll. REQUIRES mu.
	seen signature
}

// NewReloader loads files (a certificate pair is required) and returns the
// Reloader that holds them.
func NewReloader(files Files) (*Reloader, error) {
	return newReloader(files, nil)
}

func newReloader(files Files, derive func(*tls.Certificate, *x509.CertPool) *tls.Config) (*Reloader, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("tls: a certificate file and a key file are both required")
	}
	r := &Reloader{files: files, derive: derive}
	if _, err := r.Reload(true); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reloader) stat() signature {
	var sig signature
	for i, f := range []string{r.files.CertFile, r.files.KeyFile, r.files.CAFile} {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			sig[i].mod, sig[i].size = fi.ModTime(), fi.Size()
		}
	}
	return sig
}

// Reload loads the files again if they changed since the last Reload (or
// always, with force) and swaps the new generation in for the handshakes
// that follow; established connections keep the one they were made with.
// It reports whether a new generation was swapped in, and why the files
// did not load; a failed version is reported once (until the files change
// again or force).
func (r *Reloader) Reload(force bool) (changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sig := r.stat()
	if !force && sig == r.seen {
		return false, nil
	}
	r.seen = sig
	pair, err := LoadPair(r.files.CertFile, r.files.KeyFile, time.Now())
	if err != nil {
		return false, fmt.Errorf("tls: %w", err)
	}
	var pool *x509.CertPool
	if r.files.CAFile != "" {
		if pool, err = LoadPool(r.files.CAFile); err != nil {
			return false, fmt.Errorf("tls: %w", err)
		}
	}
	l := &loaded{pair: pair, pool: pool}
	if r.derive != nil {
		l.server = r.derive(pair, pool)
	}
	r.cur.Store(l)
	return true, nil
}

// Leaf is the certificate now served (its subject, NotAfter).
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().pair.Leaf }

// Pool is the CA pool now loaded (nil without Files.CAFile).
func (r *Reloader) Pool() *x509.CertPool { return r.cur.Load().pool }

// GetCertificate serves the current pair (tls.Config.GetCertificate).
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load().pair, nil
}

// GetClientCertificate presents the current pair to a server that asks for
// one (tls.Config.GetClientCertificate).
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.cur.Load().pair, nil
}

// Watch calls Reload every interval until ctx is done, logging each new
// certificate at INFO and each refused version at ERROR (the previous
// certificate keeps serving).
func (r *Reloader) Watch(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.ReloadAndLog(false, log)
		}
	}
}

// ReloadAndLog is Reload with its outcome logged as Watch logs it.
func (r *Reloader) ReloadAndLog(force bool, log *slog.Logger) {
	changed, err := r.Reload(force)
	switch {
	case err != nil:
		leaf := r.Leaf()
		log.Error("tls: new certificate files refused; the previous certificate keeps serving", "cert_file", r.files.CertFile, "serving_subject", leaf.Subject.String(), "serving_not_after", leaf.NotAfter.UTC(), "error", err)
	case changed:
		leaf := r.Leaf()
		log.Info("tls: certificate loaded", "cert_file", r.files.CertFile, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC())
	}
}

// ClientAuth is how a server treats client certificates.
type ClientAuth int

const (
	// NoClientCert asks for none.
	NoClientCert ClientAuth = iota
	// VerifyIfGiven verifies a certificate the client sends against the
	// client CA pool and lets a client without one through (to another
	// way of authenticating).
	VerifyIfGiven
	// RequireClientCert refuses the handshake of a client without a
	// certificate the client CA pool verifies.
	RequireClientCert
)

// ServerOptions are a TLS listener's files and client-certificate policy.
type ServerOptions struct {
	Files
	ClientAuth ClientAuth
}

// ServerConfig loads opts and returns the configuration of a TLS listener
// that serves HTTP/1.1, and the Reloader behind it: each handshake gets the
// generation current when it starts (GetConfigForClient), so Reload
// changes the certificate and the client CA pool together.
func ServerConfig(opts ServerOptions) (*tls.Config, *Reloader, error) {
	if opts.ClientAuth != NoClientCert && opts.CAFile == "" {
		return nil, nil, errors.New("tls: client certificates need a client CA file to verify them")
	}
	auth := tls.NoClientCert
	switch opts.ClientAuth {
	case VerifyIfGiven:
		auth = tls.VerifyClientCertIfGiven
	case RequireClientCert:
		auth = tls.RequireAndVerifyClientCert
	}
	// HTTP/1.1 only: one request at a time per connection keeps the
	// connection cap and idle accounting exact, and a batch ingest gains
	// nothing from HTTP/2's multiplexing.
	protos := []string{"http/1.1"}
	derive := func(pair *tls.Certificate, pool *x509.CertPool) *tls.Config {
		return &tls.Config{
			MinVersion:   MinVersion,
			NextProtos:   protos,
			Certificates: []tls.Certificate{*pair},
			ClientCAs:    pool,
			ClientAuth:   auth,
		}
	}
	r, err := newReloader(opts.Files, derive)
	if err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion: MinVersion,
		NextProtos: protos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load().server, nil
		},
	}
	return cfg, r, nil
}

// ClientOptions are the files of a TLS client.
type ClientOptions struct {
	// CAFile verifies the server; empty: the system's roots.
	CAFile string
	// CertFile and KeyFile, both or neither, are the client certificate
	// presented to a server that asks for one.
	CertFile, KeyFile string
	// ServerName, when set, is the name the server's certificate must
	// carry instead of the host of the address dialled.
	ServerName string
}

// ClientConfig loads opts and returns a client configuration that verifies
// the server, and the Reloader of its client certificate (nil without
// one) for a long-lived client to Watch.
func ClientConfig(opts ClientOptions) (*tls.Config, *Reloader, error) {
	cfg := &tls.Config{MinVersion: MinVersion, ServerName: opts.ServerName}
	if opts.CAFile != "" {
		pool, err := LoadPool(opts.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("tls: %w", err)
		}
		cfg.RootCAs = pool
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, nil, errors.New("tls: a client certificate needs both its certificate file and its key file")
	}
	if opts.CertFile == "" {
		return cfg, nil, nil
	}
	r, err := NewReloader(Files{CertFile: opts.CertFile, KeyFile: opts.KeyFile})
	if err != nil {
		return nil, nil, err
	}
	cfg.GetClientCertificate = r.GetClientCertificate
	return cfg, r, nil
}
