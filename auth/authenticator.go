package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// CertIdentity maps a verified client certificate to a principal: by its
// subject common name or one of its URI SANs (a SPIFFE id), whichever is
// set.
type CertIdentity struct {
	Name  string   `yaml:"name"`
	CN    string   `yaml:"cn"`
	URI   string   `yaml:"uri"`
	Roles []string `yaml:"roles"`
}

// Options configure an Authenticator.
type Options struct {
	// Tokens are the config's inline tokens.
	Tokens []TokenEntry
	// TokensFile, when set, is a file of more tokens (TokensFile's shape),
	// read by New and again by Reload.
	TokensFile string
	// Certs map verified client certificates to principals.
	Certs []CertIdentity
	// Members, when set, verifies members' signatures.
	Members *Verifier
}

// The errors of Authenticate.
var (
	// ErrNoCredentials: the request carries none (the principal is
	// Anonymous).
	ErrNoCredentials = errors.New("no credentials")
	// ErrBadCredentials: the request carries credentials that prove
	// nothing (an unknown token, a bad signature). Its message never holds
	// the credential.
	ErrBadCredentials = errors.New("invalid credentials")
)

// Authenticator finds the principal of requests. Safe for concurrent use;
// Reload swaps the tokens file's tokens in.
type Authenticator struct {
	inline  []token
	certs   []certIdentity
	members *Verifier
	file    string

	mu       sync.RWMutex
	fromFile []token
	fileStat fileVersion // of the file last read
}

type certIdentity struct {
	cn, uri   string
	principal *Principal
}

type fileVersion struct {
	mod  time.Time
	size int64
}

// New checks opts and reads the tokens file, reporting every problem.
func New(opts Options) (*Authenticator, error) {
	a := &Authenticator{file: opts.TokensFile, members: opts.Members}
	var errs []error
	toks, err := compileTokens(opts.Tokens, "auth.tokens")
	errs = append(errs, err)
	a.inline = toks
	for i, c := range opts.Certs {
		at := fmt.Sprintf("auth.client_certs[%d] %q", i, c.Name)
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("%s: no name", at))
		}
		if (c.CN == "") == (c.URI == "") {
			errs = append(errs, fmt.Errorf("%s: set one of cn and uri", at))
		}
		grants, err := ParseRoles(c.Roles)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
		if len(c.Roles) == 0 {
			errs = append(errs, fmt.Errorf("%s: no roles", at))
		}
		a.certs = append(a.certs, certIdentity{cn: c.CN, uri: c.URI, principal: &Principal{Name: c.Name, Via: "certificate", Grants: grants}})
	}
	if a.file != "" {
		if _, err := a.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload reads the tokens file again when it changed since the last read
// (its modification time or size) and swaps its tokens in; a file that
// does not read or check keeps the old tokens. It reports whether it
// swapped.
func (a *Authenticator) Reload() (bool, error) {
	if a.file == "" {
		return false, nil
	}
	fi, err := os.Stat(a.file)
	if err != nil {
		return false, fmt.Errorf("auth: tokens file: %w", err)
	}
	v := fileVersion{mod: fi.ModTime(), size: fi.Size()}
	a.mu.RLock()
	same := a.fromFile != nil && v == a.fileStat
	a.mu.RUnlock()
	if same {
		return false, nil
	}
	toks, err := readTokensFile(a.file)
	if err != nil {
		return false, err
	}
	if toks == nil {
		toks = []token{}
	}
	a.mu.Lock()
	a.fromFile, a.fileStat = toks, v
	a.mu.Unlock()
	return true, nil
}

// Watch calls Reload every interval until ctx ends, reporting each swap
// and failure to report.
func (a *Authenticator) Watch(ctx context.Context, interval time.Duration, report func(swapped bool, err error)) {
	if a.file == "" {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if swapped, err := a.Reload(); swapped || err != nil {
				report(swapped, err)
			}
		}
	}
}

// Authenticate finds r's principal: a member's signature (Sluice-Signature)
// when present, else a bearer token, else a verified client certificate.
// Without any it returns Anonymous and ErrNoCredentials; with credentials
// that prove nothing, Anonymous and an error wrapping ErrBadCredentials.
// Verifying a member's signature reads r's body and puts it back.
func (a *Authenticator) Authenticate(r *http.Request) (*Principal, error) {
	if r.Header.Get(HeaderSignature) != "" {
		if a.members == nil {
			return Anonymous, fmt.Errorf("%w: a member signature, and this node has no cluster secret", ErrBadCredentials)
		}
		node, err := a.members.Verify(r)
		if err != nil {
			return Anonymous, err
		}
		return &Principal{Name: MemberName(node), Via: "member", Grants: MemberGrants}, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return Anonymous, fmt.Errorf("%w: the Authorization header is not Bearer <token>", ErrBadCredentials)
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		a.mu.RLock()
		p := matchToken(a.inline, sum)
		if f := matchToken(a.fromFile, sum); f != nil {
			p = f
		}
		a.mu.RUnlock()
		if p == nil {
			return Anonymous, fmt.Errorf("%w: unknown token", ErrBadCredentials)
		}
		return p, nil
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		leaf := r.TLS.VerifiedChains[0][0]
		if p := a.certPrincipal(leaf); p != nil {
			return p, nil
		}
		return Anonymous, fmt.Errorf("%w: client certificate %q maps to no identity", ErrBadCredentials, leaf.Subject.CommonName)
	}
	return Anonymous, ErrNoCredentials
}

func (a *Authenticator) certPrincipal(leaf *x509.Certificate) *Principal {
	for _, c := range a.certs {
		if c.cn != "" && leaf.Subject.CommonName == c.cn {
			return c.principal
		}
		if c.uri != "" {
			for _, u := range leaf.URIs {
				if u.String() == c.uri {
					return c.principal
				}
			}
		}
	}
	return nil
}

// MemberGrants are a member's: its own endpoints, and reading every table
// (a cluster query's coordinator asks each member for its rows).
var MemberGrants = []Grant{{Permission: Member}, {Permission: Query, Table: AnyTable}}
