package config

import (
	"strings"
	"testing"
	"time"
)

// TestListenTLS: the defaults of listen.tls and of the connection limits,
// and the shapes the config refuses before any file is read.
func TestListenTLS(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	const table = "tables:\n  - name: t\n"
	cfg, err := Parse([]byte("listen:\n  tls:\n    cert_file: s.pem\n    key_file: s-key.pem\n    client_ca_file: ca.pem\n"+table), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Listen
	if l.TLS.ClientAuth != ClientAuthVerifyIfGiven || l.TLS.ReloadInterval != DefaultTLSReload || l.MaxConnections != DefaultMaxConnections || l.IdleTimeout != DefaultIdleTimeout {
		t.Fatalf("defaults: %+v", l)
	}
	cfg, err = Parse([]byte("listen:\n  max_connections: 10\n  idle_timeout: 5s\n  tls:\n    cert_file: s.pem\n    key_file: s-key.pem\n"+table), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Listen; l.TLS.ClientAuth != ClientAuthNone || l.MaxConnections != 10 || l.IdleTimeout != 5*time.Second {
		t.Fatalf("set: %+v", l)
	}
	for _, c := range []struct{ yaml, want string }{
		{"listen:\n  tls:\n    cert_file: s.pem\n", "listen.tls.key_file: empty"},
		{"listen:\n  tls:\n    key_file: s-key.pem\n", "listen.tls.cert_file: empty"},
		{"listen:\n  tls:\n    cert_file: s.pem\n    key_file: k.pem\n    client_auth: require\n", "client_ca_file is empty"},
		{"listen:\n  tls:\n    cert_file: s.pem\n    key_file: k.pem\n    client_ca_file: ca.pem\n    client_auth: always\n", `client_auth "always"`},
		{"listen:\n  max_connections: -1\n", "listen.max_connections: negative"},
		{"listen:\n  idle_timeout: -1s\n", "listen.idle_timeout: negative"},
	} {
		_, err := Parse([]byte(c.yaml+table), noEnv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
