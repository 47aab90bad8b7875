package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/config"
)

// authTokens are the tokens of authConfig: one per role under test.
type authTokens struct {
	loader, reader, ops, scraper string
}

// authConfig is two tables and an auth section with a token per role;
// extra is appended (a cluster section).
func authConfig(t testing.TB, extra string) (string, authTokens) {
	t.Helper()
	section, toks := authSection(t)
	return `
listen: {http: "127.0.0.1:0", pprof: true}
` + section + `
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
  - name: other
` + extra, toks
}

// authSection is an auth section with a token per role.
func authSection(t testing.TB) (string, authTokens) {
	t.Helper()
	var toks authTokens
	var entries strings.Builder
	for _, e := range []struct {
		tok   *string
		name  string
		roles string
	}{
		{&toks.loader, "loader", `["ingest:events"]`},
		{&toks.reader, "reader", `["query:events"]`},
		{&toks.ops, "ops", `["admin"]`},
		{&toks.scraper, "scraper", `["metrics"]`},
	} {
		tok, hash, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		*e.tok = tok
		fmt.Fprintf(&entries, "    - {name: %s, hash: %q, roles: %s}\n", e.name, hash, e.roles)
	}
	return "auth:\n  tokens:\n" + entries.String(), toks
}

// call sends method target with token (none when empty) and returns the
// status, the body and the header.
func call(t testing.TB, method, target, token string, body io.Reader, hdr ...string) (int, string, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// concrete fills a route pattern's wildcards.
func concrete(pattern string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "GET", pattern
	}
	path = strings.NewReplacer("{table}", "events", "{id}", "l1").Replace(path)
	return method, path
}

// TestAuthEveryRouteNeedsCredentials: with auth on, every route but
// health and readiness answers 401 with WWW-Authenticate to a request
// without credentials: anonymous orphan cleanup, leases, holds and
// holdings reports among them.
func TestAuthEveryRouteNeedsCredentials(t *testing.T) {
	cfg, _ := authConfig(t, "")
	s := startServer(t, cfg, "")
	for _, rt := range s.routes() {
		method, path := concrete(rt.pattern)
		code, body, hdr := call(t, method, s.url+path, "", strings.NewReader(`{}`))
		if rt.need.public {
			if code != http.StatusOK {
				t.Errorf("%s: public route answered %d", rt.pattern, code)
			}
			continue
		}
		if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != `Bearer realm="sluice"` {
			t.Errorf("%s without credentials: %d %q (WWW-Authenticate %q), want 401", rt.pattern, code, body, hdr.Get("WWW-Authenticate"))
		}
	}
	// The attacks of a client without credentials, one by one.
	for _, a := range []struct{ method, path string }{
		{"POST", "/v1/tables/events/orphans?older_than=0s"},
		{"POST", "/v1/tables/events/leases"},
		{"PUT", "/v1/tables/events/leases/x/hold"},
		{"POST", "/v1/cluster/holdings"},
		{"POST", "/v1/tables/events/rows"},
		{"GET", "/v1/tables/events/query"},
	} {
		if code, body, _ := call(t, a.method, s.url+a.path, "", strings.NewReader(`{"ttl":"1h"}`)); code != http.StatusUnauthorized {
			t.Errorf("anonymous %s %s: %d %s", a.method, a.path, code, body)
		}
	}
	if code, _, _ := call(t, "GET", s.url+"/v1/tables", "sluice_not-a-token", nil); code != http.StatusUnauthorized {
		t.Errorf("an unknown token: %d", code)
	}
}

// TestAuthRoutesStateTheirPermission: a route without a permission
// cannot be served, and every route is registered through the one table.
func TestAuthRoutesStateTheirPermission(t *testing.T) {
	s := &Server{}
	func() {
		defer func() {
			if err, _ := recover().(error); !errors.Is(err, ErrRouteWithoutPermission) {
				t.Errorf("a route without a permission: recovered %v", err)
			}
		}()
		s.newMux([]route{{"GET /x", need{}, func(http.ResponseWriter, *http.Request) {}}})
	}()
	files, _ := filepath.Glob("*.go")
	register := regexp.MustCompile(`\.(HandleFunc|Handle)\(`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := len(register.FindAll(src, -1))
		if f == "auth.go" {
			n-- // newMux's one
		}
		if n != 0 {
			t.Errorf("%s registers %d handler(s) outside Server.routes: every route goes through the table with its permission", f, n)
		}
	}
}

// TestAuthRolesAndTables: a token does what its roles grant, on the tables
// they name, and a refusal names the permission and the table.
func TestAuthRolesAndTables(t *testing.T) {
	cfg, tok := authConfig(t, "")
	s := startServer(t, cfg, "")
	row := `{"user":"a","ts":"2026-11-26T10:00:00Z","n":1}` + "\n"
	want := func(what string, code int, gotCode int, body string, mention ...string) {
		t.Helper()
		if gotCode != code {
			t.Errorf("%s: %d %s, want %d", what, gotCode, body, code)
		}
		for _, m := range mention {
			if !strings.Contains(body, m) {
				t.Errorf("%s: %q does not name %q", what, body, m)
			}
		}
	}
	code, body, _ := call(t, "POST", s.url+"/v1/tables/events/rows", tok.loader, strings.NewReader(row))
	want("loader ingests events", 200, code, body)
	code, body, _ = call(t, "POST", s.url+"/v1/tables/other/rows", tok.loader, strings.NewReader(row))
	want("loader ingests other", 403, code, body, "ingest", `\"other\"`)
	code, body, _ = call(t, "GET", s.url+"/v1/tables/events/query", tok.loader, nil)
	want("loader queries", 403, code, body, "query", `\"events\"`)
	code, body, _ = call(t, "GET", s.url+"/v1/tables/events/query", tok.reader, nil)
	want("reader queries events", 200, code, body)
	if len(lines(body)) != 1 {
		t.Errorf("reader's answer: %q", body)
	}
	code, body, _ = call(t, "GET", s.url+"/v1/tables/other/query", tok.reader, nil)
	want("reader queries other", 403, code, body, "query", `\"other\"`)
	code, body, _ = call(t, "POST", s.url+"/v1/tables/events/rows", tok.reader, strings.NewReader(row))
	want("reader ingests", 403, code, body, "ingest")
	// A replay stores rows in the table: the table's ingest permission.
	code, body, _ = call(t, "POST", s.url+"/v1/tables/events/replay", tok.reader, nil)
	want("reader replays events", 403, code, body, "ingest", `\"events\"`)
	code, body, _ = call(t, "POST", s.url+"/v1/tables/other/replay", tok.loader, nil)
	want("loader replays other", 403, code, body, "ingest", `\"other\"`)
	code, body, _ = call(t, "POST", s.url+"/v1/tables/events/orphans?older_than=0s", tok.reader, nil)
	want("reader deletes orphans", 403, code, body, "admin")
	code, body, _ = call(t, "POST", s.url+"/v1/tables/events/leases", tok.ops, nil)
	want("admin opens a lease", 403, code, body, "query")
	code, body, _ = call(t, "PUT", s.url+"/v1/tables/events/leases/x/hold", tok.reader, strings.NewReader(`{"ttl":"1h"}`))
	want("reader holds", 403, code, body, "member")
	code, body, _ = call(t, "POST", s.url+"/v1/cluster/holdings", tok.ops, strings.NewReader(`{}`))
	want("admin reports holdings", 403, code, body, "member")
	// A member's part of a cluster query holds the cold tier: a reader
	// cannot pretend to be a coordinator.
	code, body, _ = call(t, "POST", s.url+"/v1/tables/events/query", tok.reader, strings.NewReader(`{}`), cluster.HeaderCoordinator, "x")
	want("reader as a coordinator", 403, code, body, "member")
	code, body, _ = call(t, "GET", s.url+"/metrics", tok.reader, nil)
	want("reader scrapes", 403, code, body, "metrics")
	code, body, _ = call(t, "GET", s.url+"/metrics", tok.scraper, nil)
	want("scraper scrapes", 200, code, body)
	code, body, _ = call(t, "GET", s.url+"/debug/pprof/cmdline", tok.scraper, nil)
	want("scraper reads pprof", 403, code, body, "admin")
	// The admin's action runs (no cold tier here: 400) and is audited.
	code, body, _ = call(t, "POST", s.url+"/v1/tables/events/orphans?older_than=72h", tok.ops, nil)
	want("admin deletes orphans", 400, code, body)
	s.stop() // the log is read once the server is done with it
	logs := s.logs.String()
	if !regexp.MustCompile(`audit: admin action.*principal=ops.*POST /v1/tables/events/orphans.*table=events.*status=400`).MatchString(logs) {
		t.Errorf("no audit line of the admin action:\n%s", logs)
	}
	if !regexp.MustCompile(`audit: refused.*principal=reader.*table=other.*status=403.*"missing permission query on table \\"other\\""`).MatchString(logs) {
		t.Errorf("no audit line of the refusal:\n%s", logs)
	}
	for _, secret := range []string{tok.loader, tok.reader, tok.ops, tok.scraper} {
		if strings.Contains(logs, secret) {
			t.Errorf("a token is in the log")
		}
	}
}

// TestAuthSecretsNeverEchoed: a refused token is neither answered back
// nor logged, nor is the cluster secret.
func TestAuthSecretsNeverEchoed(t *testing.T) {
	dir := t.TempDir()
	secret := "cluster-secret-0123456789abcdef-never-shown"
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte(secret), 0o600)
	cfg, tok := authConfig(t, fmt.Sprintf("cluster: {members: [\"http://127.0.0.1:1\"], secret_file: %q}\n", secretFile))
	s := startServer(t, cfg, "")
	bad := "sluice_guessed-token-that-must-not-be-echoed"
	for _, target := range []string{"/v1/tables", "/v1/tables/events/query", "/v1/cluster"} {
		_, body, hdr := call(t, "GET", s.url+target, bad, nil)
		if strings.Contains(body, bad) || strings.Contains(fmt.Sprint(hdr), bad) {
			t.Errorf("%s echoes the token: %s", target, body)
		}
		_, body, _ = call(t, "GET", s.url+target, "", nil, "Authorization", "Basic "+bad)
		if strings.Contains(body, bad) {
			t.Errorf("%s echoes the credential: %s", target, body)
		}
	}
	call(t, "GET", s.url+"/v1/tables", tok.reader, nil)
	s.stop() // the log is read once the server is done with it
	logs := s.logs.String()
	for _, sec := range []string{bad, tok.reader, secret} {
		if strings.Contains(logs, sec) {
			t.Errorf("the log holds a secret:\n%s", logs)
		}
	}
	if !strings.Contains(logs, "audit: refused") {
		t.Errorf("no refusal logged:\n%s", logs)
	}
}

// TestAuthSecureByDefault: without auth, loopback is served with no
// credentials; beyond loopback the server refuses to start unless the
// config allows it explicitly, and then warns.
func TestAuthSecureByDefault(t *testing.T) {
	const plain = "tables: [{name: events}]\n"
	s := startServer(t, plain, "")
	if code, body := get(t, s.url+"/v1/tables"); code != 200 {
		t.Fatalf("loopback without auth: %d %s", code, body)
	}
	serveOn := func(yaml string) (string, error) {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		srv, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err = srv.Serve(ctx, ln)
		return logs.String(), err
	}
	_, err := serveOn(plain)
	if !errors.Is(err, ErrUnauthenticatedExposure) || !strings.Contains(err.Error(), "allow_unauthenticated") {
		t.Errorf("0.0.0.0 without auth: %v, want ErrUnauthenticatedExposure", err)
	}
	logs, err := serveOn("listen: {allow_unauthenticated: true}\n" + plain)
	if err != nil || !strings.Contains(logs, "WITHOUT authentication") {
		t.Errorf("allowed explicitly: %v; want a warning in:\n%s", err, logs)
	}
	withAuth, _ := authConfig(t, "")
	if _, err := serveOn(strings.Replace(withAuth, "127.0.0.1:0", "0.0.0.0:0", 1)); err != nil {
		t.Errorf("0.0.0.0 with auth: %v", err)
	}
	// A cluster with auth needs a secret.
	cfg, err := config.Parse([]byte(withAuth+"cluster: {members: [\"http://127.0.0.1:1\"]}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir()}); !errors.Is(err, ErrNoClusterSecret) {
		t.Errorf("a cluster with auth and no secret: %v", err)
	}
}

// startAuthCluster starts one node per secret (each node's
// cluster.secret_file holds its secret), all with the same tokens,
// listing each other as members.
func startAuthCluster(t *testing.T, secrets ...string) ([]*testServer, authTokens) {
	t.Helper()
	dir := t.TempDir()
	lns := make([]net.Listener, len(secrets))
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, fmt.Sprintf("%q", "http://"+ln.Addr().String()))
	}
	base, tok := authConfig(t, "")
	nodes := make([]*testServer, len(secrets))
	for i, ln := range lns {
		file := filepath.Join(dir, fmt.Sprintf("secret%d", i))
		if err := os.WriteFile(file, []byte(secrets[i]), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := base + fmt.Sprintf("cluster: {members: [%s], node_timeout: 5s, secret_file: %q}\n", strings.Join(members, ", "), file)
		nodes[i] = serveConfigOn(t, cfg, "", ln)
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	for i, s := range nodes {
		var b strings.Builder
		for n := i * 10; n < i*10+10; n++ {
			fmt.Fprintf(&b, `{"user":"u%d","ts":"2026-11-26T10:00:00Z","n":%d}`+"\n", n, n)
		}
		if code, body, _ := call(t, "POST", s.url+"/v1/tables/events/rows", tok.loader, strings.NewReader(b.String())); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	return nodes, tok
}

// TestAuthClusterMembers: members with the cluster secret answer each
// other's parts of a cluster query and take their holdings reports; a
// member with another secret, an unsigned request, a replayed or old
// signature and a report in another node's name are refused.
func TestAuthClusterMembers(t *testing.T) {
	const secret = "the-cluster-secret-0123456789abcdef"
	nodes, tok := startAuthCluster(t, secret, secret)
	a, b := nodes[0], nodes[1]

	code, body, _ := call(t, "GET", a.url+"/v1/tables/events/query?cluster=true", tok.reader, nil)
	if code != 200 || len(lines(body)) != 20 {
		t.Fatalf("cluster query with the secret: %d, %d rows, want 20: %s", code, len(lines(body)), body)
	}

	// Holdings reports go through the member transport, as the routing's do.
	report := func(client *http.Client, about string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", b.url+"/v1/cluster/holdings", strings.NewReader(fmt.Sprintf(`{"node":%q,"version":999999}`, about)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	// Its own report passes authentication (this cluster routes no table
	// by key: 404 from the handler).
	if code, body := report(a.memberClient(0), a.nodeID); code != http.StatusNotFound {
		t.Errorf("a member's own report: %d %s, want 404 (past auth)", code, body)
	}
	if code, body := report(a.memberClient(0), "ffff"+b.nodeID); code != http.StatusForbidden || !strings.Contains(body, "only its own") {
		t.Errorf("a member's report in another node's name: %d %s, want 403", code, body)
	}
	// A member request whose body is not signed (streamed) is a cluster
	// query's part only.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	streamed, _ := http.NewRequestWithContext(ctx, "POST", b.url+"/v1/cluster/holdings", io.MultiReader(strings.NewReader(fmt.Sprintf(`{"node":%q}`, a.nodeID))))
	if resp, err := a.memberClient(0).Do(streamed); err != nil {
		t.Errorf("a member's report with an unsigned body: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a member's report with an unsigned body: %d, want 401", resp.StatusCode)
		}
	}
	if code, body := report(http.DefaultClient, a.nodeID); code != http.StatusUnauthorized {
		t.Errorf("an unsigned report: %d %s, want 401", code, body)
	}
	forger := func(s *auth.Signer) *http.Client {
		return &http.Client{Transport: &auth.MemberTransport{Base: http.DefaultTransport, Signer: s}}
	}
	if code, body := report(forger(&auth.Signer{Secret: []byte("a-guessed-secret-0123456789abcdef"), Node: a.nodeID}), a.nodeID); code != http.StatusUnauthorized {
		t.Errorf("a report signed with another secret: %d %s, want 401", code, body)
	}
	old := func() time.Time { return time.Now().Add(-time.Hour) }
	if code, body := report(forger(&auth.Signer{Secret: []byte(secret), Node: a.nodeID, Now: old}), a.nodeID); code != http.StatusUnauthorized {
		t.Errorf("a report signed an hour ago: %d %s, want 401", code, body)
	}
	// A captured request sent again.
	var captured *http.Request
	capture := forger(&auth.Signer{Secret: []byte(secret), Node: a.nodeID})
	capture.Transport.(*auth.MemberTransport).Base = roundTripper(func(r *http.Request) (*http.Response, error) {
		captured = r
		return http.DefaultTransport.RoundTrip(r)
	})
	report(capture, a.nodeID)
	replay, _ := http.NewRequest("POST", captured.URL.String(), strings.NewReader(fmt.Sprintf(`{"node":%q,"version":999999}`, a.nodeID)))
	replay.Header = captured.Header.Clone()
	resp, err := http.DefaultClient.Do(replay)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a replayed report: %d, want 401", resp.StatusCode)
	}
	// A reader cannot ask a member for its part of a cluster query.
	if code, body, _ := call(t, "POST", b.url+"/v1/tables/events/query", tok.reader, strings.NewReader(`{"tier":"hot"}`), cluster.HeaderCoordinator, a.nodeID); code != http.StatusForbidden {
		t.Errorf("a reader as coordinator: %d %s", code, body)
	}
	a.stop()
	b.stop()
	if strings.Contains(a.logs.String()+b.logs.String(), secret) {
		t.Error("the cluster secret is in a log")
	}
}

// TestAuthClusterWrongSecret: a member with another secret is refused,
// so a cluster query through it fails (and names the node).
func TestAuthClusterWrongSecret(t *testing.T) {
	nodes, tok := startAuthCluster(t, "the-cluster-secret-0123456789abcdef", "another-secret-0123456789abcdefgh")
	code, body, _ := call(t, "GET", nodes[0].url+"/v1/tables/events/query?cluster=true", tok.reader, nil)
	if code != http.StatusBadGateway || !strings.Contains(body, "401") {
		t.Errorf("cluster query with a member of another secret: %d %s, want 502 naming 401", code, body)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAuditRefusalsRateLimited: a source's refusals are logged at most
// refusalsPerSecond a second, then the count of those not logged.
func TestAuditRefusalsRateLimited(t *testing.T) {
	var logs bytes.Buffer
	now := time.Unix(1_800_000_000, 0)
	a := &auditLog{log: slog.New(slog.NewTextHandler(&logs, nil)), now: func() time.Time { return now }}
	r, _ := http.NewRequest("GET", "/v1/tables", nil)
	r.RemoteAddr = "192.0.2.7:4000"
	other, _ := http.NewRequest("GET", "/v1/tables", nil)
	other.RemoteAddr = "192.0.2.8:4000"
	for range 20 {
		a.refused(r, auth.Anonymous, "GET /v1/tables", "", 401, "no credentials")
	}
	a.refused(other, auth.Anonymous, "GET /v1/tables", "", 401, "no credentials")
	if n := strings.Count(logs.String(), `"audit: refused"`); n != refusalsPerSecond+1 {
		t.Errorf("%d refusal lines in a second, want %d (one source's max, and the other's):\n%s", n, refusalsPerSecond+1, logs.String())
	}
	now = now.Add(time.Second)
	a.refused(r, auth.Anonymous, "GET /v1/tables", "", 401, "no credentials")
	if !strings.Contains(logs.String(), `"audit: refused requests not logged" source=anonymous@192.0.2.7 dropped=15`) {
		t.Errorf("no summary of the dropped lines:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), `"audit: refused"`); n != refusalsPerSecond+2 {
		t.Errorf("the next second's refusal is not logged: %d lines", n)
	}
}

// TestSecurityExample: docs/security.md's example config loads, with its
// tokens file and a cluster secret beside it, and with it a node refuses
// anonymous requests.
func TestSecurityExample(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"sluice.yaml", "tokens.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "examples", "security", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o600)
	}
	os.WriteFile(filepath.Join(dir, "cluster-secret"), []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	cfg, err := config.Load(filepath.Join(dir, "sluice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateOptions(cfg); err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.authn == nil || s.fanout.Client.Transport.(*auth.MemberTransport).Signer == nil {
		t.Fatal("the example's auth or cluster secret is not on")
	}
	srv := httptestServer(t, s.Handler())
	if code, _, _ := call(t, "POST", srv+"/v1/tables/events/orphans", "", nil); code != http.StatusUnauthorized {
		t.Errorf("anonymous orphan cleanup: %d", code)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String()
}

// TestAuthTokensFileReloaded: a running server swaps in the tokens file's
// new tokens when the file changes.
func TestAuthTokensFileReloaded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	write := func(name, hash string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(fmt.Sprintf("tokens:\n  - {name: %s, hash: %q, roles: [\"query:*\"]}\n", name, hash)), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, mod, mod)
	}
	old, oldHash, _ := auth.NewToken()
	next, nextHash, _ := auth.NewToken()
	write("old", oldHash, time.Now().Add(-time.Hour))
	s := startServer(t, fmt.Sprintf("auth: {tokens_file: %q}\ntables: [{name: events}]\n", path), "")
	if code, body, _ := call(t, "GET", s.url+"/v1/tables", old, nil); code != 200 {
		t.Fatalf("the file's token: %d %s", code, body)
	}
	write("next", nextHash, time.Now())
	deadline := time.Now().Add(4 * tokensPoll)
	for {
		code, _, _ := call(t, "GET", s.url+"/v1/tables", next, nil)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new token is refused %v after the file changed: %d", 4*tokensPoll, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, _ := call(t, "GET", s.url+"/v1/tables", old, nil); code != http.StatusUnauthorized {
		t.Errorf("the removed token: %d, want 401", code)
	}
	s.stop()
	if !strings.Contains(s.logs.String(), "auth: tokens file reloaded") {
		t.Error("the reload is not logged")
	}
}

// TestAuthLeaseOverMembers: with auth on, a reader's lease holds every
// member through the signed member transport, its splits read every row
// once, and the admin's orphan cleanup runs and is audited while an
// anonymous one is refused.
func TestAuthLeaseOverMembers(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte("the-cluster-secret-0123456789abcdef"), 0o600)
	lns := make([]net.Listener, 2)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, "http://"+ln.Addr().String())
	}
	section, tok := authSection(t)
	warehouse, catalog := t.TempDir(), filepath.Join(t.TempDir(), "catalog.db")
	nodes := make([]*testServer, len(lns))
	for i, ln := range lns {
		cfg := exactClusterConfig(members, fmt.Sprintf("node%d", i), warehouse, catalog)
		cfg = strings.Replace(cfg, "node_timeout: 10s}", fmt.Sprintf("node_timeout: 10s, secret_file: %q}", secretFile), 1)
		nodes[i] = serveConfigOn(t, cfg+section, "", ln)
	}
	for i, s := range nodes {
		waitReady(t, s.url)
		var b strings.Builder
		for n := i * 50; n < i*50+50; n++ {
			fmt.Fprintf(&b, `{"user":"u%d","ts":"2024-01-01T00:00:00Z","n":%d}`+"\n", n, n)
		}
		if code, body, _ := call(t, "POST", s.url+"/v1/tables/events/rows", tok.loader, strings.NewReader(b.String())); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	if code, _, _ := call(t, "POST", nodes[0].url+"/v1/tables/events/orphans?older_than=0s", "", nil); code != http.StatusUnauthorized {
		t.Errorf("anonymous orphan cleanup: %d", code)
	}
	code, body, _ := call(t, "POST", nodes[0].url+"/v1/tables/events/leases", tok.reader, strings.NewReader(`{"ttl":"1m"}`))
	if code != 200 {
		t.Fatalf("a reader's lease: %d %s", code, body)
	}
	var lease Lease
	if err := json.Unmarshal([]byte(body), &lease); err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	for _, sp := range lease.Splits {
		node := sp.Node
		if node == "" {
			node = nodes[0].url
		}
		code, body, _ := call(t, "GET", node+"/v1/tables/events/query?tier="+sp.Tier+"&lease="+lease.ID+"&columns=n", tok.reader, nil)
		if code != 200 {
			t.Fatalf("split %+v: %d %s", sp, code, body)
		}
		for _, row := range lines(body) {
			n, ok := row["n"].(float64)
			if !ok {
				t.Fatalf("split %+v: row %v", sp, row)
			}
			seen[int(n)]++
		}
	}
	for n := range 100 {
		if seen[n] != 1 {
			t.Errorf("row %d read %d times under the lease, want once", n, seen[n])
		}
	}
	if code, body, _ := call(t, "DELETE", nodes[0].url+"/v1/tables/events/leases/"+lease.ID, tok.reader, nil); code/100 != 2 {
		t.Errorf("end the lease: %d %s", code, body)
	}
	// A compaction now makes sure the Iceberg table exists for the cleanup.
	if code, body, _ := call(t, "POST", nodes[0].url+"/v1/tables/events/compact", tok.ops, nil); code != 200 {
		t.Errorf("the admin's compaction: %d %s", code, body)
	}
	if code, body, _ := call(t, "POST", nodes[0].url+"/v1/tables/events/orphans?older_than=72h", tok.ops, nil); code != 200 {
		t.Errorf("the admin's orphan cleanup: %d %s", code, body)
	}
	nodes[0].stop()
	if !strings.Contains(nodes[0].logs.String(), "audit: admin action") {
		t.Error("the admin's orphan cleanup is not audited")
	}
}

// TestAuthLeasesBoundedPerPrincipal: with auth on, the read-lease bound
// counts per authenticated principal: the 429 names the token's principal,
// not the address every client here shares.
func TestAuthLeasesBoundedPerPrincipal(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte("the-cluster-secret-0123456789abcdef"), 0o600)
	lns := make([]net.Listener, 2)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, "http://"+ln.Addr().String())
	}
	section, tok := authSection(t)
	warehouse, catalog := t.TempDir(), filepath.Join(t.TempDir(), "catalog.db")
	nodes := make([]*testServer, len(lns))
	for i, ln := range lns {
		cfg := exactClusterConfig(members, fmt.Sprintf("node%d", i), warehouse, catalog)
		cfg = strings.Replace(cfg, "node_timeout: 10s}", fmt.Sprintf("node_timeout: 10s, secret_file: %q}", secretFile), 1)
		nodes[i] = serveConfigOn(t, cfg+section, "", ln)
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	var held []string
	for range MaxLeasesPerClient {
		code, body, _ := call(t, "POST", nodes[0].url+"/v1/tables/events/leases", tok.reader, strings.NewReader(`{"ttl":"1m"}`))
		if code != 200 {
			t.Fatalf("lease %d of the bound: %d %s", len(held), code, body)
		}
		var l Lease
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatal(err)
		}
		held = append(held, l.ID)
	}
	if code, body, _ := call(t, "POST", nodes[0].url+"/v1/tables/events/leases", tok.reader, strings.NewReader(`{"ttl":"1m"}`)); code != http.StatusTooManyRequests || !strings.Contains(body, "client reader") {
		t.Errorf("a lease over the bound: %d %s, want 429 naming the principal reader", code, body)
	}
	for _, id := range held {
		if code, body, _ := call(t, "DELETE", nodes[0].url+"/v1/tables/events/leases/"+id, tok.reader, nil); code/100 != 2 {
			t.Errorf("end lease %s: %d %s", id, code, body)
		}
	}
}
