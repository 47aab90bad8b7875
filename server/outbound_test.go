package server

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/testcert"
	"github.com/sluicedb/sluice/stream"
)

// TestConnOfTheSection: a source's tls, sasl and credential keys become
// stream's connection options: the CA pool, the client certificate (read
// at the handshake), the server name and minimum version; the SASL
// mechanism with the password, or the token for OAUTHBEARER, read when
// called; NATS's user and password or token. A CA file that is not there
// or holds no certificate is an error naming it.
func TestConnOfTheSection(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcert.Write(dir, "broker.example")
	if err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_TEST_CONN_TOKEN", "env-token")
	var k config.KafkaSource
	if err := yaml.Unmarshal([]byte(`
tls: {ca_file: `+certs.CAFile+`, cert_file: `+certs.ClientCertFile+`, key_file: `+certs.ClientKeyFile+`, server_name: broker.example, min_version: "1.3"}
sasl: {mechanism: SCRAM-SHA-256, username: u, password: {file: `+pw+`}, token: {env: SLUICE_TEST_CONN_TOKEN}}
`), &k); err != nil {
		t.Fatal(err)
	}
	c, err := kafkaConn(k)
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS == nil || c.TLS.RootCAs == nil || c.TLS.ServerName != "broker.example" || c.TLS.MinVersion != tls.VersionTLS13 || c.TLS.GetClientCertificate == nil {
		t.Fatalf("tls config %+v", c.TLS)
	}
	if cert, err := c.TLS.GetClientCertificate(nil); err != nil || len(cert.Certificate) == 0 {
		t.Fatalf("client certificate: %v", err)
	}
	if c.Mechanism != stream.SASLScramSHA256 || c.Username != "u" {
		t.Fatalf("sasl %s %s", c.Mechanism, c.Username)
	}
	if s, err := c.Secret(); err != nil || s != "file-secret" {
		t.Fatalf("secret %q, %v", s, err)
	}
	if _, err := c.ClientOpts(); err != nil {
		t.Fatal(err)
	}
	k.SASL.Mechanism = stream.SASLOAuthBearer
	if c, _ = kafkaConn(k); c.Secret == nil {
		t.Fatal("OAUTHBEARER: no secret")
	} else if s, _ := c.Secret(); s != "env-token" {
		t.Fatalf("OAUTHBEARER sends %q, want the token", s)
	}

	n := config.NATSSource{User: "u"}
	if err := yaml.Unmarshal([]byte("password: {file: "+pw+"}\n"), &n); err != nil {
		t.Fatal(err)
	}
	nc, err := natsConn(n)
	if err != nil || nc.Password == nil || nc.Token != nil || nc.User != "u" {
		t.Fatalf("nats conn %+v, %v", nc, err)
	}
	if s, _ := nc.Password(); s != "file-secret" {
		t.Fatalf("nats password %q", s)
	}

	for _, ca := range []string{filepath.Join(dir, "missing.pem"), certs.ClientKeyFile} {
		_, err := clientTLS(&config.ClientTLS{CAFile: ca})
		if err == nil || !strings.Contains(err.Error(), filepath.Base(ca)) {
			t.Errorf("ca_file %s: %v, want an error naming it", ca, err)
		}
	}
}

// TestSchemaRegistryOfTheSection: a Kafka source's schema_registry is the
// decoder's registry: the URLs, user, timeout, the password or token read
// when called, the TLS config; none is the zero Registry.
func TestSchemaRegistryOfTheSection(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcert.Write(dir, "registry.example")
	if err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("registry-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var k config.KafkaSource
	if err := yaml.Unmarshal([]byte(`
format: avro
schema_registry: {urls: [https://r1:8081, https://r2:8081], username: u, password: {file: `+pw+`}, timeout: 3s, tls: {ca_file: `+certs.CAFile+`, server_name: registry.example}}
`), &k); err != nil {
		t.Fatal(err)
	}
	r, err := schemaRegistry(k.SchemaRegistry)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.URLs, " ") != "https://r1:8081 https://r2:8081" || r.Username != "u" || r.Timeout != 3*time.Second || r.Token != nil {
		t.Fatalf("registry %+v", r)
	}
	if r.Password == nil {
		t.Fatal("no password")
	}
	if s, err := r.Password(); err != nil || s != "registry-secret" {
		t.Fatalf("password %q, %v", s, err)
	}
	if r.TLS == nil || r.TLS.RootCAs == nil || r.TLS.ServerName != "registry.example" {
		t.Fatalf("tls %+v", r.TLS)
	}
	t.Setenv("SLUICE_TEST_REGISTRY_TOKEN", "tok")
	var kt config.KafkaSource
	if err := yaml.Unmarshal([]byte("schema_registry: {urls: [http://r:8081], token: {env: SLUICE_TEST_REGISTRY_TOKEN}}\n"), &kt); err != nil {
		t.Fatal(err)
	}
	if r, err = schemaRegistry(kt.SchemaRegistry); err != nil || r.Token == nil || r.Password != nil {
		t.Fatalf("token registry %+v, %v", r, err)
	}
	if s, _ := r.Token(); s != "tok" {
		t.Fatalf("token %q", s)
	}
	if r, err := schemaRegistry(nil); err != nil || r.URLs != nil || r.TLS != nil {
		t.Fatalf("no section: %+v, %v", r, err)
	}
	if _, err := schemaRegistry(&config.SchemaRegistry{TLS: &config.ClientTLS{CAFile: filepath.Join(dir, "missing.pem")}}); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("a missing CA file: %v", err)
	}
}
