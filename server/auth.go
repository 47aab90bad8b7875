package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/config"
)

// need is what a route requires of a request's principal. Its zero value
// is no decision, which routes refuses: every route states its need.
type need struct {
	perm auth.Permission
	// table: the permission is on the route's {table}; otherwise a
	// per-table permission on any one table will do.
	table bool
	// logsTable: the permission is on otlp.logs_table (the OTLP route
	// has no {table}).
	logsTable bool
	// public: no credentials needed (health, readiness).
	public bool
}

var (
	public     = need{public: true}
	ingestRows = need{perm: auth.Ingest, table: true}
	ingestLogs = need{perm: auth.Ingest, table: true, logsTable: true}
	readTable  = need{perm: auth.Query, table: true}
	readAny    = need{perm: auth.Query}
	adminOnly  = need{perm: auth.Admin}
	memberOnly = need{perm: auth.Member}
	metricsGet = need{perm: auth.Metrics}
)

func (n need) String() string {
	switch {
	case n.public:
		return "public"
	case n.perm == 0:
		return "none"
	case n.logsTable:
		return n.perm.String() + ":otlp.logs_table"
	case n.table:
		return n.perm.String() + ":{table}"
	}
	return n.perm.String()
}

// route is one line of the API's table (Server.routes).
type route struct {
	pattern string
	need    need
	handler http.HandlerFunc
}

// routes is the API: every route with the permission it needs, in one
// table, so that no route is served without a stated permission
// (docs/security.md has the same table for people).
func (s *Server) routes() []route {
	metrics := metricsGet
	if s.cfg.Auth.OpenMetrics {
		metrics = public
	}
	rs := []route{
		{"POST /v1/tables/{table}/rows", ingestRows, s.handleRows},
		// A delete body names keys as rows: an ingest like any other.
		{"DELETE /v1/tables/{table}/rows", ingestRows, s.handleDeleteRows},
		// A replay stores the table's dead letters in it again: rows an
		// ingester of the table may send anyway.
		{"POST /v1/tables/{table}/replay", ingestRows, s.handleReplay},
		// OTLP/HTTP logs: an ingest into the configured logs table.
		{"POST /v1/logs", ingestLogs, s.handleOTLPLogs},
		// A request with Sluice-Coordinator is a member's part of a
		// cluster query and holds this node's cold tier: guard asks
		// member of it.
		{"GET /v1/tables/{table}/query", readTable, s.handleQuery},
		{"POST /v1/tables/{table}/query", readTable, s.handleQuery},
		{"GET /v1/tables", readAny, s.handleTables},
		{"GET /v1/tables/{table}", readTable, s.handleTable},
		{"GET /v1/tables/{table}/schema", readTable, s.handleSchema},
		{"POST /v1/tables/{table}/compact", adminOnly, s.handleCompact},
		{"POST /v1/tables/{table}/orphans", adminOnly, s.handleOrphans},
		{"POST /v1/tables/{table}/maintain", adminOnly, s.handleMaintain},
		{"GET /v1/cluster", readAny, s.handleCluster},
		{"POST /v1/cluster/holdings", memberOnly, s.handleHoldings},
		// A reader (the Trino connector) opens, splits and ends a lease;
		// the holds are what the coordinating node asks of members.
		{"POST /v1/tables/{table}/leases", readTable, s.handleLeaseOpen},
		{"POST /v1/tables/{table}/leases/{id}/done", readTable, s.handleLeaseDone},
		{"POST /v1/tables/{table}/leases/{id}/splits", readTable, s.handleLeaseSplits},
		{"DELETE /v1/tables/{table}/leases/{id}", readTable, s.handleLeaseEnd},
		{"PUT /v1/tables/{table}/leases/{id}/hold", memberOnly, s.handleLeaseHold},
		{"PUT /v1/tables/{table}/leases/{id}/share", memberOnly, s.handleLeaseShare},
		{"DELETE /v1/tables/{table}/leases/{id}/hold", memberOnly, s.handleLeaseUnhold},
		{"GET /metrics", metrics, s.metrics.ServeHTTP},
		{"GET /healthz", public, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }},
		{"GET /readyz", public, s.handleReady},
	}
	if s.cfg.Listen.Pprof {
		rs = append(rs,
			route{"/debug/pprof/", adminOnly, pprof.Index},
			route{"/debug/pprof/cmdline", adminOnly, pprof.Cmdline},
			route{"/debug/pprof/profile", adminOnly, pprof.Profile},
			route{"/debug/pprof/symbol", adminOnly, pprof.Symbol},
			route{"/debug/pprof/trace", adminOnly, pprof.Trace},
		)
	}
	return rs
}

// ErrRouteWithoutPermission is the panic of a route added without a need.
var ErrRouteWithoutPermission = errors.New("server: route without a permission")

// newMux serves routes, each behind guard.
func (s *Server) newMux(routes []route) *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range routes {
		if rt.need == (need{}) {
			panic(fmt.Errorf("%w: %s", ErrRouteWithoutPermission, rt.pattern))
		}
		mux.Handle(rt.pattern, s.guard(rt))
	}
	return mux
}

// principalKey is the request context's key of its principal.
type principalKey struct{}

// principalOf is r's authenticated principal; nil when auth is off.
func principalOf(r *http.Request) *auth.Principal {
	p, _ := r.Context().Value(principalKey{}).(*auth.Principal)
	return p
}

// guard authenticates and authorizes each request of rt before its
// handler, and writes the audit log's line of a refusal or an admin
// action. Without auth (no auth: config) it passes every request.
func (s *Server) guard(rt route) http.Handler {
	if s.authn == nil || rt.need.public {
		return rt.handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rt.need
		// A member's part of a cluster query holds the cold tier until its
		// body ends.
		coordinated := n.perm == auth.Query && r.Header.Get(cluster.HeaderCoordinator) != ""
		if coordinated {
			n = memberOnly
		}
		table := ""
		switch {
		case n.logsTable:
			table = s.cfg.OTLP.LogsTable
		case n.table:
			table = r.PathValue("table")
		}
		p, err := s.authn.Authenticate(r)
		if err == nil && p.Via == "member" && auth.Unsigned(r) && !coordinated {
			// Only a cluster query's part streams its body (its end is
			// the end of the hold): every other member request signs it.
			err = fmt.Errorf("%w: a member request with an unsigned body on %s", auth.ErrBadCredentials, rt.pattern)
		}
		if err != nil || !p.Allowed(n.perm, table) {
			// A refused request's body is not read: close the connection
			// rather than read what is left of it to reuse it (a cluster
			// query's part streams a body that ends only with the query).
			w.Header().Set("Connection", "close")
		}
		if err != nil {
			s.audit.refused(r, p, rt.pattern, table, http.StatusUnauthorized, err.Error())
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			msg := "authentication required: send Authorization: Bearer <token> (docs/security.md)"
			if !errors.Is(err, auth.ErrNoCredentials) {
				msg = "authentication failed: " + err.Error()
			}
			writeError(w, http.StatusUnauthorized, msg)
			return
		}
		if !p.Allowed(n.perm, table) {
			what := n.perm.String()
			switch {
			case n.perm.PerTable() && table != "":
				what += fmt.Sprintf(" on table %q", table)
			case n.perm.PerTable():
				what += " on some table"
			}
			s.audit.refused(r, p, rt.pattern, table, http.StatusForbidden, "missing permission "+what)
			writeError(w, http.StatusForbidden, fmt.Sprintf("forbidden: %s %q lacks the permission %s", p.Via, p.Name, what))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		if n.perm != auth.Admin {
			rt.handler(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		started := time.Now()
		rt.handler(sw, r)
		s.audit.log.Info("audit: admin action", "principal", p.Name, "via", p.Via, "action", r.Method+" "+r.URL.Path,
			"table", r.PathValue("table"), "query", r.URL.RawQuery, "status", sw.status(), "duration", time.Since(started).String())
	})
}

// statusWriter remembers the status an admin action answered, for the
// audit log.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// auditLog writes the audit log's lines: one per admin action, one per
// refused request, the refusals at most refusalsPerSecond per principal
// and remote address, with a count of those dropped.
type auditLog struct {
	log *slog.Logger
	// now is the clock of the rate limit; nil means time.Now.
	now func() time.Time

	mu      sync.Mutex
	second  int64
	counts  map[string]int
	dropped map[string]int
}

// refusalsPerSecond bounds the refusal lines of one source in a second: a
// client that retries without credentials must not flood the log.
const refusalsPerSecond = 5

func (a *auditLog) refused(r *http.Request, p *auth.Principal, pattern, table string, status int, why string) {
	remote, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		remote = r.RemoteAddr
	}
	key := p.Name + "@" + remote
	clock := time.Now
	if a.now != nil {
		clock = a.now
	}
	now := clock().Unix()
	a.mu.Lock()
	var summary map[string]int
	if now != a.second {
		summary = a.dropped
		a.second, a.counts, a.dropped = now, map[string]int{}, map[string]int{}
	}
	a.counts[key]++
	log := a.counts[key] <= refusalsPerSecond
	if !log {
		a.dropped[key]++
	}
	a.mu.Unlock()
	for k, n := range summary {
		a.log.Warn("audit: refused requests not logged", "source", k, "dropped", n, "per_second_max", refusalsPerSecond)
	}
	if log {
		a.log.Warn("audit: refused", "principal", p.Name, "via", p.Via, "remote", remote, "action", r.Method+" "+r.URL.Path,
			"route", pattern, "table", table, "status", status, "reason", why)
	}
}

// setupAuth makes the authenticator of cfg's auth section (nil without
// one), the cluster secret's signer and verifier, and the one member
// transport every member-to-member request goes through.
func (s *Server) setupAuth(cfg *config.Config, memberTLS *tls.Config) error {
	s.audit = &auditLog{log: s.log.With("component", "audit")}
	secret, err := auth.LoadSecret(s.configPath(cfg.Cluster.SecretFile), config.SecretEnv, nil)
	if err != nil {
		return err
	}
	var signer *auth.Signer
	var verifier *auth.Verifier
	if secret != nil {
		signer = &auth.Signer{Secret: secret, Node: s.nodeID}
		verifier = &auth.Verifier{Secret: secret}
	}
	s.memberTransport = auth.NewMemberTransport(memberTLS, signer)
	s.fanout.Client = &http.Client{Transport: s.memberTransport}
	if !cfg.Auth.Enabled() {
		return nil
	}
	if cfg.Cluster.Enabled() && secret == nil {
		return fmt.Errorf("%w: with auth on, a cluster's members prove who they are with a secret: set cluster.secret_file or %s (docs/security.md)", ErrNoClusterSecret, config.SecretEnv)
	}
	opts := auth.Options{TokensFile: s.configPath(cfg.Auth.TokensFile), Members: verifier}
	for _, t := range cfg.Auth.Tokens {
		opts.Tokens = append(opts.Tokens, auth.TokenEntry{Name: t.Name, Hash: t.Hash, Roles: t.Roles})
	}
	for _, c := range cfg.Auth.ClientCerts {
		opts.Certs = append(opts.Certs, auth.CertIdentity{Name: c.Name, CN: c.CN, URI: c.URI, Roles: c.Roles})
	}
	a, err := auth.New(opts)
	if err != nil {
		return fmt.Errorf("server: auth: %w", err)
	}
	s.authn = a
	return nil
}

// ErrNoClusterSecret: a cluster with auth on and no secret.
var ErrNoClusterSecret = errors.New("server: no cluster secret")

// configPath resolves a path of the config against its directory.
func (s *Server) configPath(p string) string {
	if p == "" || filepath.IsAbs(p) || s.cfg.BaseDir == "" {
		return p
	}
	return filepath.Join(s.cfg.BaseDir, p)
}

// memberClient is an HTTP client over the member transport with an
// overall timeout (zero: none).
func (s *Server) memberClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: s.memberTransport, Timeout: timeout}
}

// ErrUnauthenticatedExposure: a server without auth on an address beyond
// loopback, without listen.allow_unauthenticated.
var ErrUnauthenticatedExposure = errors.New("server: refusing to serve without authentication beyond loopback")

// checkExposure is the secure default: without auth only loopback is
// served, unless the config allows more explicitly (then it warns).
func (s *Server) checkExposure(addr net.Addr) error {
	if s.authn != nil {
		return nil
	}
	if ta, ok := addr.(*net.TCPAddr); !ok || ta.IP.IsLoopback() {
		return nil
	}
	if s.cfg.Listen.AllowUnauthenticated {
		s.log.Warn("serving WITHOUT authentication beyond loopback (listen.allow_unauthenticated): anyone who reaches this address may write, read, delete files of the cold tier and hold every node's commits", "addr", addr.String())
		return nil
	}
	return unauthenticatedExposure(addr.String())
}

// unauthenticatedExposure is the refusal of checkExposure and
// checkListenExposure, one message for serve and for serve --check.
func unauthenticatedExposure(addr string) error {
	return fmt.Errorf("%w: %s is reachable from other hosts and the config has no auth: section; configure tokens (docs/security.md), listen on 127.0.0.1, or set listen.allow_unauthenticated: true", ErrUnauthenticatedExposure, addr)
}

// checkListenExposure is checkExposure before anything listens (serve
// --check, validate): the configured address, its name resolved as the
// listener would resolve it. A name that does not resolve is left to
// serve, which fails to listen on it.
func checkListenExposure(ctx context.Context, cfg *config.Config) error {
	if cfg.Auth.Enabled() || cfg.Listen.AllowUnauthenticated {
		return nil
	}
	for _, addr := range []string{cfg.Listen.HTTP, cfg.Listen.GRPC} {
		if addr == "" {
			continue
		}
		if err := checkAddrExposure(ctx, addr); err != nil {
			return err
		}
	}
	return nil
}

// checkAddrExposure is checkListenExposure of one listener's address.
func checkAddrExposure(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil // config.Validate reports the address
	}
	if host == "" { // ":8080": every interface
		return unauthenticatedExposure(addr)
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return unauthenticatedExposure(addr)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return unauthenticatedExposure(addr)
		}
	}
	return nil
}

// reloadTokens reads the tokens file again (SIGHUP, or a change seen by
// the watch) and logs the outcome.
func (s *Server) reloadTokens() {
	if s.authn == nil {
		return
	}
	swapped, err := s.authn.Reload()
	s.logTokensReload(swapped, err)
}

func (s *Server) logTokensReload(swapped bool, err error) {
	switch {
	case err != nil:
		s.log.Error("auth: tokens file not reloaded; the previous tokens stay", "error", err)
	case swapped:
		s.log.Info("auth: tokens file reloaded", "file", s.configPath(s.cfg.Auth.TokensFile))
	}
}

// tokensPoll is how often the tokens file is checked for a change.
const tokensPoll = 2 * time.Second

// authRoleErrors are the bad roles of a's tokens and identities (package
// auth owns what a role means).
func authRoleErrors(a config.Auth) []error {
	var errs []error
	for i, t := range a.Tokens {
		if _, err := auth.ParseRoles(t.Roles); err != nil {
			errs = append(errs, fmt.Errorf("auth.tokens[%d] %q: %w", i, t.Name, err))
		}
	}
	for i, c := range a.ClientCerts {
		if _, err := auth.ParseRoles(c.Roles); err != nil {
			errs = append(errs, fmt.Errorf("auth.client_certs[%d] %q: %w", i, c.Name, err))
		}
	}
	return errs
}
