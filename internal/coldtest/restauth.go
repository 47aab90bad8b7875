package coldtest

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// AuthProxy is an authenticating front of a REST catalog that has none
// (the installed RESTCatalogServer): every request needs "Authorization:
// Bearer T" with T the proxy's static token or one it issued, and
// POST /v1/oauth/tokens issues tokens for the OAuth2 client-credentials
// grant with the proxy's client id and secret, as a catalog behind an
// identity provider does. Refusals are 401 with an Iceberg error body that
// names no credential.
type AuthProxy struct {
	URL string
	// Issued counts the tokens the token endpoint gave out; Refused the
	// requests it answered with 401.
	Issued, Refused atomic.Int64

	token, clientID, clientSecret string
	mu                            sync.Mutex
	issued                        map[string]bool
	srv                           *httptest.Server
}

// StartAuthProxy fronts the catalog at backend; token is the static
// bearer token it accepts, clientID and clientSecret the OAuth2 client
// it issues tokens to.
func StartAuthProxy(backend, token, clientID, clientSecret string) (*AuthProxy, error) {
	target, err := url.Parse(backend)
	if err != nil {
		return nil, err
	}
	p := &AuthProxy{token: token, clientID: clientID, clientSecret: clientSecret, issued: map[string]bool{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/oauth/tokens", p.issue)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !p.authorized(r.Header.Get("Authorization")) {
			p.refuse(w, "NotAuthorizedException", "not authorized")
			return
		}
		r.Header.Del("Authorization")
		rp.ServeHTTP(w, r)
	})
	p.srv = httptest.NewServer(mux)
	p.URL = p.srv.URL
	return p, nil
}

// Close stops the proxy.
func (p *AuthProxy) Close() { p.srv.Close() }

func (p *AuthProxy) authorized(header string) bool {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || tok == "" {
		return false
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(p.token)) == 1 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.issued[tok]
}

// issue is the client-credentials grant (RFC 6749 4.4), the client's
// credentials in the form (iceberg-go sends them so).
func (p *AuthProxy) issue(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		p.refuseOAuth(w, "invalid_request")
		return
	}
	id, secret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if user, pass, ok := r.BasicAuth(); ok {
		id, secret = user, pass
	}
	if subtle.ConstantTimeCompare([]byte(id), []byte(p.clientID)) != 1 || subtle.ConstantTimeCompare([]byte(secret), []byte(p.clientSecret)) != 1 {
		p.refuseOAuth(w, "invalid_client")
		return
	}
	b := make([]byte, 16)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	p.mu.Lock()
	p.issued[tok] = true
	p.mu.Unlock()
	p.Issued.Add(1)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok, "token_type": "bearer", "expires_in": 3600,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}

func (p *AuthProxy) refuse(w http.ResponseWriter, typ, msg string) {
	p.Refused.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": http.StatusUnauthorized}})
}

func (p *AuthProxy) refuseOAuth(w http.ResponseWriter, code string) {
	p.Refused.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "the client is not known or its secret is wrong"})
}
