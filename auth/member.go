package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The headers of a member's signed request.
const (
	HeaderMember    = "Sluice-Member"    // the sender's node id
	HeaderTimestamp = "Sluice-Timestamp" // unix seconds when signed
	HeaderNonce     = "Sluice-Nonce"     // random: two equal requests sign differently
	HeaderDigest    = "Sluice-Body-Digest"
	HeaderSignature = "Sluice-Signature"
)

// UnsignedBody is the digest of a body the sender streams and cannot read
// before sending (a cluster query's body ends only when the coordinator
// has read its own part). The rest of the request is signed; the route
// decides whether it accepts such a body (Unsigned).
const UnsignedBody = "UNSIGNED-PAYLOAD"

// DefaultSkew is the clock skew a Verifier allows by default: a signature
// older or newer than this is refused.
const DefaultSkew = 30 * time.Second

// maxSignedBody bounds the body a Verifier reads to check its digest.
const maxSignedBody = 8 << 20

// minSecret is the shortest cluster secret accepted: 16 bytes is 128 bits
// when it is random (`openssl rand -hex 32` makes one).
const minSecret = 16

// ErrBadSecret is wrapped by LoadSecret's errors about the secret itself.
var ErrBadSecret = errors.New("bad cluster secret")

// LoadSecret reads the cluster secret from the file at path (surrounding
// white space trimmed), or when path is empty from the environment variable
// env (lookup nil means os.LookupEnv). It returns nil when neither is set.
// Errors never hold the secret.
func LoadSecret(path, env string, lookup func(string) (string, bool)) ([]byte, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var raw []byte
	where := ""
	switch v, ok := lookup(env); {
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("auth: cluster secret: %w", err)
		}
		raw, where = b, "file "+path
	case ok:
		raw, where = []byte(v), "environment variable "+env
	default:
		return nil, nil
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) < minSecret {
		return nil, fmt.Errorf("auth: cluster secret from %s: %w: %d bytes, want at least %d (openssl rand -hex 32)", where, ErrBadSecret, len(raw), minSecret)
	}
	return raw, nil
}

// Signer signs a member's requests.
type Signer struct {
	Secret []byte
	Node   string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Sign sets r's signature headers for a body whose digest is digest (hex
// SHA-256, or UnsignedBody).
func (s *Signer) Sign(r *http.Request, digest string) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	var n [12]byte
	rand.Read(n[:])
	ts := strconv.FormatInt(now().Unix(), 10)
	nonce := hex.EncodeToString(n[:])
	r.Header.Set(HeaderMember, s.Node)
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderNonce, nonce)
	r.Header.Set(HeaderDigest, digest)
	r.Header.Set(HeaderSignature, hex.EncodeToString(signature(s.Secret, r.Method, r.URL.RequestURI(), ts, s.Node, nonce, digest)))
}

// signature is the HMAC-SHA256 under secret of the signed parts, each on
// its own line (none holds a newline: the request line and headers cannot).
func signature(secret []byte, method, uri, ts, node, nonce, digest string) []byte {
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, strings.Join([]string{"sluice-member-v1", method, uri, ts, node, nonce, digest}, "\n"))
	return m.Sum(nil)
}

func bodyDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Verifier checks members' signatures. Safe for concurrent use.
type Verifier struct {
	Secret []byte
	// Skew is how far a signature's time may be from this node's clock;
	// zero means DefaultSkew. A captured request replayed later is refused
	// by its time, one replayed sooner by its nonce.
	Skew time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // signature -> when it may be forgotten
	// sweepAt is when seen is next swept of expired entries.
	sweepAt time.Time
}

// Verify checks r's member signature and returns the sender's node id. A
// body with a digest is read (up to 8 MiB), checked and put back in r.
func (v *Verifier) Verify(r *http.Request) (string, error) {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	skew := v.Skew
	if skew <= 0 {
		skew = DefaultSkew
	}
	node, ts, nonce, digest := r.Header.Get(HeaderMember), r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderNonce), r.Header.Get(HeaderDigest)
	got, err := hex.DecodeString(r.Header.Get(HeaderSignature))
	if err != nil || node == "" || ts == "" || nonce == "" || digest == "" {
		return "", fmt.Errorf("%w: member signature: incomplete", ErrBadCredentials)
	}
	if !hmac.Equal(got, signature(v.Secret, r.Method, r.URL.RequestURI(), ts, node, nonce, digest)) {
		return "", fmt.Errorf("%w: member signature does not verify (a different cluster secret?)", ErrBadCredentials)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	t := time.Unix(sec, 0)
	if d := now().Sub(t); err != nil || d > skew || d < -skew {
		return "", fmt.Errorf("%w: member signature of %s is outside the %v clock window (replayed, or the clocks disagree)", ErrBadCredentials, t.UTC().Format(time.RFC3339), skew)
	}
	if digest != UnsignedBody {
		var body []byte
		if r.Body != nil {
			body, err = io.ReadAll(io.LimitReader(r.Body, maxSignedBody+1))
			r.Body.Close()
			if err != nil {
				return "", fmt.Errorf("member request body: %w", err)
			}
			if len(body) > maxSignedBody {
				return "", fmt.Errorf("%w: member request body above %d bytes", ErrBadCredentials, maxSignedBody)
			}
		}
		if bodyDigest(body) != digest {
			return "", fmt.Errorf("%w: member request body does not match its signed digest", ErrBadCredentials)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if !v.firstUse(string(got), t.Add(skew+time.Second), now()) {
		return "", fmt.Errorf("%w: member signature used already (a replay)", ErrBadCredentials)
	}
	return node, nil
}

// firstUse records sig until forget and reports whether it was new. The
// record is bounded by the members' request rate over the window.
func (v *Verifier) firstUse(sig string, forget, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string]time.Time{}
	}
	if now.After(v.sweepAt) {
		for k, until := range v.seen {
			if now.After(until) {
				delete(v.seen, k)
			}
		}
		v.sweepAt = now.Add(time.Second)
	}
	if _, dup := v.seen[sig]; dup {
		return false
	}
	v.seen[sig] = forget
	return true
}

// Unsigned reports whether r's verified signature leaves its body out.
func Unsigned(r *http.Request) bool { return r.Header.Get(HeaderDigest) == UnsignedBody }

// MemberTransport is the one transport of every member-to-member request:
// it signs each request when Signer is set, over Base.
type MemberTransport struct {
	Base   http.RoundTripper
	Signer *Signer
}

// NewMemberTransport is a MemberTransport over a clone of
// http.DefaultTransport that dials TLS with tlsConfig (nil: the defaults),
// signing with signer (nil: unsigned).
func NewMemberTransport(tlsConfig *tls.Config, signer *Signer) *MemberTransport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	if tlsConfig != nil {
		base.TLSClientConfig = tlsConfig.Clone()
	}
	return &MemberTransport{Base: base, Signer: signer}
}

// RoundTrip signs a copy of r (a RoundTripper must not change its
// request) and sends it. A body that can be had again (r.GetBody: bytes,
// strings) is digested; a streamed one is sent as UnsignedBody.
func (t *MemberTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.Signer == nil {
		return t.Base.RoundTrip(r)
	}
	digest := bodyDigest(nil)
	switch {
	case r.Body == nil || r.Body == http.NoBody:
	case r.GetBody != nil:
		b, err := r.GetBody()
		if err == nil {
			var body []byte
			body, err = io.ReadAll(b)
			b.Close()
			digest = bodyDigest(body)
		}
		if err != nil {
			r.Body.Close()
			return nil, fmt.Errorf("member request: digest the body: %w", err)
		}
	default:
		digest = UnsignedBody
	}
	signed := r.Clone(r.Context())
	t.Signer.Sign(signed, digest)
	return t.Base.RoundTrip(signed)
}

// CloseIdleConnections closes Base's idle connections (http.Client's
// CloseIdleConnections reaches it through this).
func (t *MemberTransport) CloseIdleConnections() {
	if c, ok := t.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
