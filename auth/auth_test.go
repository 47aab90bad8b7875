package auth

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRole(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		g, err := ParseRole(in)
		got := g.String()
		if err != nil {
			got = "error"
			if !errors.Is(err, ErrBadRole) {
				t.Errorf("%q: %v does not wrap ErrBadRole", in, err)
			}
		}
		if got != want {
			t.Errorf("ParseRole(%q) = %s, want %s", in, got, want)
		}
	}
	f("ingest:events", "ingest:events")
	f("query:*", "query:*")
	f("admin", "admin")
	f("member", "member")
	f("metrics", "metrics")
	f("ingest", "error") // every table is written, never implied
	f("query:", "error")
	f("admin:events", "error")
	f("root", "error")
}

func TestAllowed(t *testing.T) {
	grants, err := ParseRoles([]string{"ingest:events", "query:*", "admin"})
	if err != nil {
		t.Fatal(err)
	}
	p := &Principal{Name: "x", Grants: grants}
	for _, c := range []struct {
		perm  Permission
		table string
		want  bool
	}{
		{Ingest, "events", true},
		{Ingest, "other", false},
		{Ingest, "", true},
		{Query, "anything", true},
		{Admin, "", true},
		{Metrics, "", true}, // admin includes metrics
		{Member, "", false},
	} {
		if got := p.Allowed(c.perm, c.table); got != c.want {
			t.Errorf("Allowed(%v, %q) = %v, want %v", c.perm, c.table, got, c.want)
		}
	}
	if _, err := ParseRoles([]string{"query:*", "member"}); !errors.Is(err, ErrMemberRole) {
		t.Errorf("a configured member role: %v, want ErrMemberRole", err)
	}
	reader := &Principal{Grants: []Grant{{Permission: Query, Table: "a"}}}
	if reader.Allowed(Query, "b") || !reader.Allowed(Query, "a") || reader.Allowed(Ingest, "a") {
		t.Error("query:a must read a only, and not write it")
	}
}

func bearer(tok string) *http.Request {
	r := httptest.NewRequest("GET", "/v1/tables", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

func TestTokens(t *testing.T) {
	tok, hash, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(hash, tok) || !strings.HasPrefix(hash, "sha256:") {
		t.Fatalf("hash %q", hash)
	}
	a, err := New(Options{Tokens: []TokenEntry{{Name: "loader", Hash: hash, Roles: []string{"ingest:events"}}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(bearer(tok))
	if err != nil || p.Name != "loader" || !p.Allowed(Ingest, "events") {
		t.Fatalf("good token: %v %v", p, err)
	}
	wrong := tok[:len(tok)-1] + "x"
	if wrong == tok {
		wrong = tok[:len(tok)-1] + "y"
	}
	for _, r := range []*http.Request{bearer(wrong), bearer(""), bearer(hash)} {
		p, err := a.Authenticate(r)
		if !errors.Is(err, ErrBadCredentials) || p != Anonymous {
			t.Errorf("%q: %v, %v: want ErrBadCredentials", r.Header.Get("Authorization"), p.Name, err)
		}
		if err != nil && (strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), hash[7:])) {
			t.Errorf("error %q echoes the credential", err)
		}
	}
	if _, err := a.Authenticate(httptest.NewRequest("GET", "/", nil)); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("no credentials: %v", err)
	}
}

func TestBadConfigNamesNoHash(t *testing.T) {
	bad := "sha256:" + strings.Repeat("z", 64)
	_, err := New(Options{Tokens: []TokenEntry{{Name: "x", Hash: bad, Roles: []string{"root"}}, {Name: "x", Hash: bad}}})
	if err == nil || !errors.Is(err, ErrBadHash) || !errors.Is(err, ErrBadRole) {
		t.Fatalf("want every problem, got %v", err)
	}
	if strings.Contains(err.Error(), bad[7:]) {
		t.Errorf("error quotes the hash: %v", err)
	}
}

func TestTokensFileReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	tok1, h1, _ := NewToken()
	tok2, h2, _ := NewToken()
	write := func(name, hash string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte("tokens:\n  - {name: "+name+", hash: \""+hash+"\", roles: [\"query:*\"]}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, mod, mod)
	}
	t0 := time.Now().Add(-time.Hour)
	write("one", h1, t0)
	a, err := New(Options{TokensFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.Authenticate(bearer(tok1)); err != nil || p.Name != "one" {
		t.Fatalf("token of the file: %v", err)
	}
	write("two", h2, t0.Add(time.Minute))
	if swapped, err := a.Reload(); !swapped || err != nil {
		t.Fatalf("reload: %v %v", swapped, err)
	}
	if _, err := a.Authenticate(bearer(tok1)); err == nil {
		t.Error("the removed token still authenticates")
	}
	if p, err := a.Authenticate(bearer(tok2)); err != nil || p.Name != "two" {
		t.Errorf("the new token: %v", err)
	}
	// A broken file keeps the old tokens, and its error holds no hash.
	os.WriteFile(path, []byte("tokens: [{name: three, hash: \""+h1[:20]+"\", roles: [admin]}]\n"), 0o600)
	os.Chtimes(path, t0.Add(2*time.Minute), t0.Add(2*time.Minute))
	if _, err := a.Reload(); err == nil || strings.Contains(err.Error(), h1[7:20]) {
		t.Errorf("broken file: %v", err)
	}
	if _, err := a.Authenticate(bearer(tok2)); err != nil {
		t.Errorf("a broken file dropped the tokens: %v", err)
	}
}

// signedRequest is a member request signed by signer through the member
// transport, as the server receives it.
func signedRequest(t *testing.T, signer *Signer, method, target string, body []byte) *http.Request {
	t.Helper()
	var got *http.Request
	tr := &MemberTransport{Signer: signer, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return &http.Response{StatusCode: 204, Body: http.NoBody}, nil
	})}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, "http://node"+target, rd)
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewRequest(method, target, nil)
	srv.Header = got.Header.Clone()
	if body != nil {
		srv.Body = io.NopCloser(bytes.NewReader(body))
	}
	return srv
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestMemberSignature(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	v := &Verifier{Secret: secret, Now: clock}
	a, err := New(Options{Members: v})
	if err != nil {
		t.Fatal(err)
	}
	good := &Signer{Secret: secret, Node: "n1", Now: clock}
	body := []byte(`{"node":"n1"}`)

	r := signedRequest(t, good, "POST", "/v1/cluster/holdings?x=1", body)
	p, err := a.Authenticate(r)
	if err != nil || p.Name != "member:n1" || p.Node() != "n1" || !p.Allowed(Member, "") {
		t.Fatalf("good signature: %v %v", p, err)
	}
	if b, _ := io.ReadAll(r.Body); !bytes.Equal(b, body) {
		t.Errorf("the body after verifying: %q", b)
	}

	refused := func(what string, r *http.Request) {
		t.Helper()
		if _, err := a.Authenticate(r); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s: %v, want ErrBadCredentials", what, err)
		} else if strings.Contains(err.Error(), string(secret)) {
			t.Errorf("%s: the error holds the secret", what)
		}
	}
	// The same signed request again: a replay within the window.
	again := signedRequest(t, good, "POST", "/v1/cluster/holdings", body)
	a.Authenticate(again.Clone(again.Context()))
	again.Body = io.NopCloser(bytes.NewReader(body))
	refused("replay within the window", again)

	refused("wrong secret", signedRequest(t, &Signer{Secret: []byte("another secret of 32 bytes......"), Node: "n1", Now: clock}, "GET", "/v1/cluster", nil))
	old := &Signer{Secret: secret, Node: "n1", Now: func() time.Time { return now.Add(-DefaultSkew - 2*time.Second) }}
	refused("an old timestamp", signedRequest(t, old, "GET", "/v1/cluster", nil))
	future := &Signer{Secret: secret, Node: "n1", Now: func() time.Time { return now.Add(DefaultSkew + 2*time.Second) }}
	refused("a future timestamp", signedRequest(t, future, "GET", "/v1/cluster", nil))

	tampered := signedRequest(t, good, "POST", "/v1/cluster/holdings", body)
	tampered.Body = io.NopCloser(strings.NewReader(`{"node":"n2"}`))
	refused("another body", tampered)
	renamed := signedRequest(t, good, "GET", "/v1/cluster", nil)
	renamed.Header.Set(HeaderMember, "n2")
	refused("another sender", renamed)
	moved := signedRequest(t, good, "GET", "/v1/cluster", nil)
	moved.URL.Path = "/v1/tables"
	refused("another path", moved)
	requery := signedRequest(t, good, "POST", "/v1/tables/t/orphans?older_than=1h", nil)
	requery.URL.RawQuery = "older_than=0s"
	refused("another query", requery)

	if _, err := (&Authenticator{}).Authenticate(signedRequest(t, good, "GET", "/v1/cluster", nil)); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a node without a secret accepted a signature: %v", err)
	}
}

func TestStreamedBodyIsUnsigned(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	var got *http.Request
	tr := &MemberTransport{Signer: &Signer{Secret: secret, Node: "n1"}, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return &http.Response{StatusCode: 204, Body: http.NoBody}, nil
	})}
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", "http://node/v1/tables/t/query", pr)
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got.Header.Get(HeaderDigest) != UnsignedBody || req.Header.Get(HeaderSignature) != "" {
		t.Errorf("streamed body: digest %q; the caller's request changed: %v", got.Header.Get(HeaderDigest), req.Header)
	}
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	os.WriteFile(path, []byte("  0123456789abcdef0123  \n"), 0o600)
	env := func(string) (string, bool) { return "from-the-environment-0123456789", true }
	if s, err := LoadSecret(path, "X", env); err != nil || string(s) != "0123456789abcdef0123" {
		t.Errorf("file: %q %v", s, err)
	}
	if s, err := LoadSecret("", "X", env); err != nil || string(s) != "from-the-environment-0123456789" {
		t.Errorf("env: %q %v", s, err)
	}
	if s, err := LoadSecret("", "X", func(string) (string, bool) { return "", false }); s != nil || err != nil {
		t.Errorf("none: %q %v", s, err)
	}
	_, err := LoadSecret("", "X", func(string) (string, bool) { return "short", true })
	if !errors.Is(err, ErrBadSecret) || strings.Contains(err.Error(), "short") {
		t.Errorf("short secret: %v", err)
	}
}

// BenchmarkAuthenticateToken is the cost a bearer token adds to a request
// (hash, and a constant-time compare with each of 20 tokens).
func BenchmarkAuthenticateToken(b *testing.B) {
	var entries []TokenEntry
	var last string
	for i := range 20 {
		tok, hash, _ := NewToken()
		entries = append(entries, TokenEntry{Name: "t" + string(rune('a'+i)), Hash: hash, Roles: []string{"ingest:*"}})
		last = tok
	}
	a, err := New(Options{Tokens: entries})
	if err != nil {
		b.Fatal(err)
	}
	r := bearer(last)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyMember is the cost of checking a member's signature
// (a GET: no body).
func BenchmarkVerifyMember(b *testing.B) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	v := &Verifier{Secret: secret}
	s := &Signer{Secret: secret, Node: "n1"}
	r := httptest.NewRequest("GET", "/v1/cluster?members=false", nil)
	b.ReportAllocs()
	for b.Loop() {
		s.Sign(r, bodyDigest(nil))
		if _, err := v.Verify(r); err != nil {
			b.Fatal(err)
		}
	}
}
