package config

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Auth is who may do what (docs/security.md). Without it, and on a
// loopback address, every request is allowed; a server that listens
// beyond loopback refuses to start without it unless
// listen.allow_unauthenticated says so.
type Auth struct {
	// Tokens are bearer tokens, kept as their SHA-256 (`sluice auth token`
	// makes one and prints its entry).
	Tokens []AuthToken `yaml:"tokens"`
	// TokensFile is a file of more tokens (tokens: [...] in the same
	// shape), relative to the config's directory; it is read again on
	// SIGHUP and when it changes.
	TokensFile string `yaml:"tokens_file"`
	// ClientCerts map verified client certificates to identities.
	ClientCerts []ClientCert `yaml:"client_certs"`
	// OpenMetrics serves /metrics to anyone; otherwise it needs the
	// metrics (or admin) role.
	OpenMetrics bool `yaml:"open_metrics"`
}

// AuthToken is one bearer token: its name (the audit log's), its hash and
// its roles ("ingest:events", "query:*", "admin", "metrics").
type AuthToken struct {
	Name  string   `yaml:"name"`
	Hash  string   `yaml:"hash"`
	Roles []string `yaml:"roles"`
}

// ClientCert is the identity of a verified client certificate: by its
// subject common name or a URI SAN (one of them), with its roles.
type ClientCert struct {
	Name  string   `yaml:"name"`
	CN    string   `yaml:"cn"`
	URI   string   `yaml:"uri"`
	Roles []string `yaml:"roles"`
}

// Enabled reports whether the config names any credential: then every
// request but /healthz and /readyz needs one.
func (a Auth) Enabled() bool {
	return len(a.Tokens) > 0 || a.TokensFile != "" || len(a.ClientCerts) > 0
}

// validate checks the shapes; the roles are checked by the server, which
// owns their meaning (server.ValidateOptions). Errors never quote a hash.
func (a Auth) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	names := map[string]bool{}
	for i, t := range a.Tokens {
		at := fmt.Sprintf("auth.tokens[%d] %q", i, t.Name)
		if t.Name == "" {
			add("%s: no name", at)
		} else if names[t.Name] {
			add("%s: the name is taken by another token", at)
		}
		names[t.Name] = true
		hx, ok := strings.CutPrefix(t.Hash, "sha256:")
		if _, err := hex.DecodeString(hx); !ok || err != nil || len(hx) != 64 {
			add("%s: hash: want sha256: and 64 hex digits (`sluice auth token` prints the entry; never the token itself)", at)
		}
		if len(t.Roles) == 0 {
			add("%s: no roles", at)
		}
	}
	for i, c := range a.ClientCerts {
		at := fmt.Sprintf("auth.client_certs[%d] %q", i, c.Name)
		if c.Name == "" {
			add("%s: no name", at)
		}
		if (c.CN == "") == (c.URI == "") {
			add("%s: set one of cn and uri", at)
		}
		if len(c.Roles) == 0 {
			add("%s: no roles", at)
		}
	}
	return errs
}
