// Package s3http reads objects from S3 and S3-compatible servers with plain
// net/http and a small Signature Version 4 signer of its own: GET (with
// If-None-Match) and ListObjectsV2 (and PUT, for tests). It exists so that the lean sluice
// binary can load scripts from a bucket and list a prefix without linking the
// AWS SDK (which only sluice-full carries, for the cold tier and SQS).
//
// Credentials come from the Client's Credentials function, or else from the
// environment the way the AWS SDK's default chain starts
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); shared
// profiles and instance metadata are not read.
package s3http

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// ErrNotFound is wrapped by the error of a request for a missing bucket or key.
var ErrNotFound = errors.New("not found")

// ErrForbidden is wrapped by the error of a request the server refused
// (403: wrong credentials, a wrong signature or no permission).
var ErrForbidden = errors.New("forbidden")

// ErrNoCredentials: neither the Client nor the environment has an access key.
var ErrNoCredentials = errors.New("no S3 credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the s3 section's access_key and secret_key)")

// Credentials sign requests.
type Credentials struct {
	AccessKey, SecretKey, SessionToken string
}

// EnvCredentials are the credentials of the environment: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
func EnvCredentials() (Credentials, error) {
	c := Credentials{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv("AWS_SESSION_TOKEN")}
	if c.AccessKey == "" || c.SecretKey == "" {
		return Credentials{}, ErrNoCredentials
	}
	return c, nil
}

// Client sends signed requests to one endpoint. The zero fields take
// defaults when used (see each field); a Client is safe for concurrent use.
type Client struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:7070; empty
	// means $AWS_ENDPOINT_URL_S3, then $AWS_ENDPOINT_URL, then AWS itself
	// (https://s3.REGION.amazonaws.com).
	Endpoint string
	// Region signs the requests; empty means $AWS_REGION, then
	// $AWS_DEFAULT_REGION, then us-east-1.
	Region string
	// PathStyle puts the bucket in the URL's path (self-hosted servers)
	// instead of its host name. A custom Endpoint without PathStyle still
	// uses virtual hosts, as the AWS SDK does.
	PathStyle bool
	// Credentials returns the keys each request is signed with; nil means
	// EnvCredentials.
	Credentials func() (Credentials, error)
	// HTTP sends the requests; nil means a client that waits at most
	// DefaultIdleTimeout for a response's headers.
	HTTP *http.Client
	// HeaderTimeout bounds Get's wait for a response's headers, whatever
	// the HTTP client; zero means DefaultIdleTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout bounds Get's wait for each next part of an object's
	// body: no Read of Object.Body returning for that long cancels the
	// request; zero means DefaultIdleTimeout.
	IdleTimeout time.Duration

	now func() time.Time // tests
}

// DefaultIdleTimeout bounds the wait for a response's headers and, while
// an object is read, for each next part of its body. Neither bounds the
// whole read: an object of any size may take minutes to read whole (a
// bound on the whole request cut a 40 MB object read under load), but a
// stalled connection may not hold its reader.
const DefaultIdleTimeout = 30 * time.Second

var defaultHTTP = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = DefaultIdleTimeout
	return t
}()}

// orDefault is d, or DefaultIdleTimeout when d is not positive.
func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultIdleTimeout
	}
	return d
}

// idleBody is a response body whose request is cancelled when no Read
// returns for idle.
type idleBody struct {
	io.ReadCloser
	object string // s3://bucket/key, for the error
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

func newIdleBody(body io.ReadCloser, object string, idle time.Duration, cancel context.CancelFunc) *idleBody {
	b := &idleBody{ReadCloser: body, object: object, idle: idle, cancel: cancel}
	b.timer = time.AfterFunc(idle, func() { b.fired.Store(true); cancel() })
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.timer.Reset(b.idle)
	if err != nil && b.fired.Load() {
		err = fmt.Errorf("%s: no data for %v: %w", b.object, b.idle, err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (c *Client) region() string {
	for _, r := range []string{c.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")} {
		if r != "" {
			return r
		}
	}
	return "us-east-1"
}

func (c *Client) endpoint() string {
	for _, e := range []string{c.Endpoint, os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL")} {
		if e != "" {
			return strings.TrimRight(e, "/")
		}
	}
	return "https://s3." + c.region() + ".amazonaws.com"
}

// objectURL is the URL of bucket/key (key may be empty: the bucket itself).
func (c *Client) objectURL(bucket, key string) (*url.URL, error) {
	base, err := url.Parse(c.endpoint())
	if err != nil {
		return nil, fmt.Errorf("s3 endpoint %q: %w", c.endpoint(), err)
	}
	path := "/" + key
	if c.PathStyle {
		path = "/" + bucket + path
	} else {
		base.Host = bucket + "." + base.Host
	}
	base.Path = strings.TrimRight(base.Path, "/") + path
	base.RawPath = encodePath(base.Path)
	return base, nil
}

// Object is what a GET returned.
type Object struct {
	// Body is the object's content; the caller closes it. Nil when
	// NotModified.
	Body io.ReadCloser
	// ETag is the object's entity tag as the server sent it (quoted).
	ETag string
	// Size is the Content-Length (-1 when the server sent none).
	Size int64
	// NotModified: the object still has the ETag the request named.
	NotModified bool
}

// Get reads bucket/key. With ifNoneMatch set (an ETag of an earlier Get),
// an unchanged object answers NotModified and no body.
func (c *Client) Get(ctx context.Context, bucket, key, ifNoneMatch string) (Object, error) {
	u, err := c.objectURL(bucket, key)
	if err != nil {
		return Object{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		return Object{}, fmt.Errorf("s3://%s/%s: %w", bucket, key, err)
	}
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	// The bound on the headers is Get's own, so that it holds whatever
	// the HTTP client (a caller's may have no ResponseHeaderTimeout).
	headerTimeout := orDefault(c.HeaderTimeout)
	var late atomic.Bool
	headerWait := time.AfterFunc(headerTimeout, func() { late.Store(true); cancel() })
	resp, err := c.do(req)
	if !headerWait.Stop() && err == nil {
		// The headers came as the bound passed: the request is cancelled
		// already, so its body cannot be read.
		resp.Body.Close()
		err = context.Canceled
	}
	if err != nil {
		cancel()
		if late.Load() {
			err = fmt.Errorf("no response headers within %v: %w", headerTimeout, err)
		}
		return Object{}, fmt.Errorf("s3://%s/%s: %w", bucket, key, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && ifNoneMatch != "":
		resp.Body.Close()
		cancel()
		return Object{ETag: ifNoneMatch, NotModified: true}, nil
	case resp.StatusCode != http.StatusOK:
		defer cancel()
		return Object{}, statusError(resp, "GET", bucket, key)
	}
	body := newIdleBody(resp.Body, fmt.Sprintf("s3://%s/%s", bucket, key), orDefault(c.IdleTimeout), cancel)
	return Object{Body: body, ETag: resp.Header.Get("ETag"), Size: resp.ContentLength}, nil
}

// Put writes data to bucket/key and returns the new ETag. sluice reads
// buckets only; Put serves its tests and benchmarks, which fill a bucket
// through the same signer.
func (c *Client) Put(ctx context.Context, bucket, key string, data []byte) (string, error) {
	u, err := c.objectURL(bucket, key)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("s3://%s/%s: %w", bucket, key, err)
	}
	resp, err := c.do(req)
	if err != nil {
		return "", fmt.Errorf("PUT s3://%s/%s: %w", bucket, key, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", statusError(resp, "PUT", bucket, key)
	}
	resp.Body.Close()
	return resp.Header.Get("ETag"), nil
}

// Listed is one object of a listing.
type Listed struct {
	Key  string
	ETag string
	Size int64
}

// List returns the objects under prefix whose keys sort after startAfter, in
// key order, up to 1000 (one ListObjectsV2 page): call again with the last
// key to go on; an empty answer is the end.
func (c *Client) List(ctx context.Context, bucket, prefix, startAfter string) ([]Listed, error) {
	u, err := c.objectURL(bucket, "")
	if err != nil {
		return nil, err
	}
	q := url.Values{"list-type": {"2"}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if startAfter != "" {
		q.Set("start-after", startAfter)
	}
	u.RawQuery = canonicalQuery(q)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, "LIST", bucket, prefix)
	}
	var page struct {
		Contents []struct {
			Key  string
			ETag string
			Size int64
		}
	}
	if err := xml.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&page); err != nil {
		return nil, fmt.Errorf("list s3://%s/%s: decode answer: %w", bucket, prefix, err)
	}
	out := make([]Listed, 0, len(page.Contents))
	for _, o := range page.Contents {
		out = append(out, Listed{Key: o.Key, ETag: o.ETag, Size: o.Size})
	}
	return out, nil
}

// statusError reads the server's error document into an error naming the
// bucket and key; 404 wraps ErrNotFound and 403 ErrForbidden.
func statusError(resp *http.Response, op, bucket, key string) error {
	defer resp.Body.Close()
	var doc struct {
		Code, Message string
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = xml.Unmarshal(body, &doc)
	detail := resp.Status
	if doc.Code != "" {
		detail += ": " + doc.Code
		if doc.Message != "" {
			detail += ": " + doc.Message
		}
	}
	where := fmt.Sprintf("%s s3://%s/%s", op, bucket, key)
	switch resp.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w (%s)", where, ErrNotFound, detail)
	case http.StatusForbidden:
		return fmt.Errorf("%s: %w (%s)", where, ErrForbidden, detail)
	}
	return fmt.Errorf("%s: %s", where, detail)
}

func (c *Client) do(req *http.Request) (*http.Response, error) {
	creds := c.Credentials
	if creds == nil {
		creds = EnvCredentials
	}
	cr, err := creds()
	if err != nil {
		return nil, err
	}
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	sign(req, cr, c.region(), now().UTC())
	h := c.HTTP
	if h == nil {
		h = defaultHTTP
	}
	return h.Do(req)
}

// unsignedPayload: the body is not hashed into the signature (a GET has
// none; S3 accepts it over TLS and plain HTTP alike).
const unsignedPayload = "UNSIGNED-PAYLOAD"

// sign adds the Signature Version 4 headers of an S3 request without a body
// (https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html).
func sign(req *http.Request, cr Credentials, region string, t time.Time) {
	amzDate := t.Format("20060102T150405Z")
	day := amzDate[:8]
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", unsignedPayload)
	if cr.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", cr.SessionToken)
	}
	names := []string{"host"}
	for name := range req.Header {
		l := strings.ToLower(name)
		if strings.HasPrefix(l, "x-amz-") || l == "if-none-match" {
			names = append(names, l)
		}
	}
	sort.Strings(names)
	var headers strings.Builder
	for _, n := range names {
		v := req.Host
		if n == "host" {
			if v == "" {
				v = req.URL.Host
			}
		} else {
			v = strings.Join(req.Header.Values(n), ",")
		}
		headers.WriteString(n + ":" + strings.TrimSpace(v) + "\n")
	}
	signed := strings.Join(names, ";")
	canonical := strings.Join([]string{
		req.Method,
		req.URL.EscapedPath(),
		canonicalQuery(req.URL.Query()),
		headers.String(),
		signed,
		unsignedPayload,
	}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+cr.SecretKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+cr.AccessKey+"/"+scope+", SignedHeaders="+signed+", Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalQuery is the query sorted by name, each name and value
// URI-encoded as SigV4 wants (which url.Values.Encode's '+' for a space is
// not).
func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			parts = append(parts, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	return strings.Join(parts, "&")
}

// encodePath encodes an object path once, keeping its slashes, as S3's
// canonical URI is (S3 alone among AWS services does not encode it twice).
func encodePath(p string) string { return uriEncode(p, false) }

// uriEncode keeps the unreserved characters A-Z a-z 0-9 - _ . ~ (and '/'
// unless encodeSlash) and percent-encodes every other byte in upper case.
func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
