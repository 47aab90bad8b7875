// Package testcert makes the certificates a test's TLS servers and clients
// need: a CA, a server certificate that names one host name, a client
// certificate, and an unrelated CA that signed neither, written as PEM
// files. Tests only.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files are the PEM files Write makes.
type Files struct {
	// ServerName is the one name the server certificate carries: a host
	// name, or an IP address (then only that address verifies).
	ServerName string
	// CAFile signed the server and client certificates; OtherCAFile is an
	// unrelated CA that signed neither.
	CAFile, OtherCAFile string
	// ServerCertFile holds the server certificate and the CA's;
	// ServerKeyFile its key (PKCS#8, unencrypted). ServerKeyAndChainFile
	// holds the key then the chain, as Kafka's PEM keystore wants it.
	ServerCertFile, ServerKeyFile, ServerKeyAndChainFile string
	// ClientCertFile and ClientKeyFile are a client certificate the CA
	// signed, and its key.
	ClientCertFile, ClientKeyFile string
}

// Write makes the certificates for serverName under dir (valid for a
// day).
func Write(dir, serverName string) (*Files, error) {
	f := &Files{ServerName: serverName,
		CAFile: filepath.Join(dir, "ca.pem"), OtherCAFile: filepath.Join(dir, "other-ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"), ServerKeyFile: filepath.Join(dir, "server-key.pem"),
		ServerKeyAndChainFile: filepath.Join(dir, "server-key-and-chain.pem"),
		ClientCertFile:        filepath.Join(dir, "client.pem"), ClientKeyFile: filepath.Join(dir, "client-key.pem")}
	ca, caKey, err := newCert("sluice test CA", "", nil, nil, true)
	if err != nil {
		return nil, err
	}
	other, _, err := newCert("an unrelated CA", "", nil, nil, true)
	if err != nil {
		return nil, err
	}
	server, serverKey, err := newCert(serverName, serverName, ca, caKey, false)
	if err != nil {
		return nil, err
	}
	client, clientKey, err := newCert("sluice test client", "", ca, caKey, false)
	if err != nil {
		return nil, err
	}
	serverKeyPEM, err := keyPEM(serverKey)
	if err != nil {
		return nil, err
	}
	clientKeyPEM, err := keyPEM(clientKey)
	if err != nil {
		return nil, err
	}
	chain := append(certPEM(server), certPEM(ca)...)
	for path, data := range map[string][]byte{
		f.CAFile:                certPEM(ca),
		f.OtherCAFile:           certPEM(other),
		f.ServerCertFile:        chain,
		f.ServerKeyFile:         serverKeyPEM,
		f.ServerKeyAndChainFile: append(serverKeyPEM, chain...),
		f.ClientCertFile:        certPEM(client),
		f.ClientKeyFile:         clientKeyPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("testcert: %w", err)
		}
	}
	return f, nil
}

// newCert makes a certificate for name (a CA when isCA) that carries
// subjectAlt (a host name or an IP address) when set, signed by parent, or
// self-signed when parent is nil.
func newCert(name, subjectAlt string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ip := net.ParseIP(subjectAlt); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else if subjectAlt != "" {
		tmpl.DNSNames = []string{subjectAlt}
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("testcert: certificate %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("testcert: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
