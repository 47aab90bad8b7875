package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
)

// Client talks to a running server: `sluice ingest --server` and `sluice
// query --server`, and the ingest benchmark. Its methods may be called
// concurrently; the fields must not change after the first call.
type Client struct {
	// URL is the server's base URL, e.g. https://sluice.example:8443;
	// without a scheme (127.0.0.1:8080) http:// is assumed.
	URL string
	// HTTP is the client to use; nil means one with a 5 minute timeout
	// and TLS.
	HTTP *http.Client
	// TLS verifies an https:// server (and may present a client
	// certificate) when HTTP is nil; nil means the system's roots.
	TLS *tls.Config
	// Token, when set, is sent as `Authorization: Bearer <token>` with
	// every request. It is never part of an error or a log line.
	Token string
	// MaxRetries bounds the retries of a batch answered 429 or 503
	// (0 = 20); each waits for the Retry-After the server sent.
	MaxRetries int
	// NoIdempotencyKey leaves out the Idempotency-Key header PostBatch
	// sends by default. With the key, a batch whose answer was lost (the
	// connection broke) is sent again and stored once; without it, the
	// lost answer is an error and the batch may or may not be stored.
	NoIdempotencyKey bool

	once   sync.Once
	client *http.Client // HTTP, or the one made from TLS
}

// lostAnswerRetries bounds the retries of a batch whose answer was lost
// (with an Idempotency-Key), waiting 1, 2, 4 ... seconds.
const lostAnswerRetries = 5

func (c *Client) http() *http.Client {
	c.once.Do(func() {
		c.client = c.HTTP
		if c.client != nil {
			return
		}
		c.client = &http.Client{Timeout: 5 * time.Minute}
		if c.TLS != nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.TLSClientConfig = c.TLS
			c.client.Transport = t
		}
	})
	return c.client
}

// ErrServerURL is wrapped by the requests of a Client whose URL is not an
// http:// or https:// base URL.
var ErrServerURL = errors.New("server URL")

// BaseURL is raw as a server's base URL: http:// when it has no scheme
// (a host:port), no trailing slash. Only http and https are accepted.
func BaseURL(raw string) (string, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrServerURL, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w %q: the scheme is not http or https", ErrServerURL, raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%w %q: no host", ErrServerURL, raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// newRequest is a request to the server's path with the token.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	base, err := BaseURL(c.URL)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// StatusError is a non-200 answer of the server. Line is the line of the
// sent body the error is about (0 when none).
type StatusError struct {
	Code int
	Body string
	Line int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("server answered %d: %s", e.Code, strings.TrimSpace(e.Body))
}

// PostBatch sends one body to POST /v1/tables/{table}/rows, retrying while
// the server answers 429 or 503 (waiting for its Retry-After), and returns
// the server's result. Unless NoIdempotencyKey, the body carries a random
// Idempotency-Key, and a batch whose answer is lost (the connection broke
// after it was sent) or that is still in progress on the server (409) is
// sent again: the server stores it once and answers the retry with the
// first answer.
func (c *Client) PostBatch(ctx context.Context, tableName, contentType string, body []byte) (ingest.Result, error) {
	var res ingest.Result
	path := "/v1/tables/" + url.PathEscape(tableName) + "/rows"
	retries := c.MaxRetries
	if retries == 0 {
		retries = 20
	}
	key := ""
	if !c.NoIdempotencyKey {
		key = rand.Text()
	}
	lost := 0
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, http.MethodPost, path, bytes.NewReader(body))
		if err != nil {
			return res, err
		}
		req.Header.Set("Content-Type", contentType)
		if key != "" {
			req.Header.Set(idempotencyKeyHeader, key)
		}
		resp, err := c.http().Do(req)
		if err != nil {
			var op *net.OpError
			if key == "" || ctx.Err() != nil || lost >= lostAnswerRetries || (errors.As(err, &op) && op.Op == "dial") {
				// Not sent (no connection), or no key to make a resend safe.
				return res, err
			}
			// The answer is lost, not the batch's fate: the same key
			// makes the retry store it at most once.
			if werr := sleepCtx(ctx, time.Second<<lost); werr != nil {
				return res, err
			}
			lost++
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if key != "" && resp.StatusCode == http.StatusConflict && attempt < retries {
			// The first try of this key is still being stored.
			if err := sleepCtx(ctx, time.Second); err != nil {
				return res, err
			}
			continue
		}
		if (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && attempt < retries {
			wait := time.Second
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
				wait = time.Duration(s) * time.Second
			}
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		var r ingestResponse
		_ = json.Unmarshal(b, &r)
		if resp.StatusCode != http.StatusOK {
			return r.Result, &StatusError{Code: resp.StatusCode, Body: string(b), Line: r.Line}
		}
		return r.Result, nil
	}
}

// sleepCtx waits d or until ctx is done (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IngestStream decodes r (gzip or not) locally and sends it in batches of
// batchRows rows as NDJSON, so that any input format (and any size) goes
// through the server's batch limit. Results are summed; bad lines are
// handled by policy as the server would.
func (c *Client) IngestStream(ctx context.Context, tableName string, r io.Reader, format ingest.Format, policy ingest.Policy, batchRows int) (ingest.Result, error) {
	var total ingest.Result
	zr, err := ingest.MaybeGunzip(r)
	if err != nil {
		return total, err
	}
	if batchRows <= 0 {
		batchRows = 1000
	}
	var buf []byte
	d, err := ingest.Decode(zr, ingest.DecodeOptions{Format: format, Policy: policy, BatchRows: batchRows}, func(rows []ingest.Row, lines []int) error {
		buf = buf[:0]
		for _, row := range rows {
			var err error
			if buf, err = compute.AppendJSONRow(buf, row, nil); err != nil {
				return err
			}
			buf = append(buf, '\n')
		}
		res, err := c.PostBatch(ctx, tableName, "application/x-ndjson", buf)
		addResult(&total, res)
		// The server counts lines of the batch sent: name the input's.
		var se *StatusError
		if errors.As(err, &se) && se.Line > 0 && se.Line <= len(lines) {
			return fmt.Errorf("input line %d: %w", lines[se.Line-1], err)
		}
		return err
	})
	total.AddBadLines(d)
	return total, err
}

func addResult(total *ingest.Result, r ingest.Result) {
	total.Accepted += r.Accepted
	total.Filtered += r.Filtered
	total.Failed += r.Failed
	for k, v := range r.ColumnErrors {
		if total.ColumnErrors == nil {
			total.ColumnErrors = map[string]int{}
		}
		total.ColumnErrors[k] += v
	}
	total.DeadLetters = append(total.DeadLetters, r.DeadLetters...)
	total.BadLines = append(total.BadLines, r.BadLines...)
}

// Query runs req on the server and copies the streamed answer to w. A
// cluster query's partial answer (req.Partial) is copied whole and then
// reported as a *PartialError naming the nodes it lacks.
func (c *Client) Query(ctx context.Context, tableName string, req QueryRequest, w io.Writer) (int64, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	hr, err := c.newRequest(ctx, http.MethodPost, "/v1/tables/"+url.PathEscape(tableName)+"/query", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.http().Do(hr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, &StatusError{Code: resp.StatusCode, Body: string(b)}
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil {
		if m := resp.Trailer.Get(cluster.HeaderMissing); m != "" {
			err = &PartialError{Missing: strings.Split(m, ",")}
		}
	}
	return n, err
}

// PartialError is a cluster query's answer that lacks the rows of some
// nodes, which the query allowed (partial).
type PartialError struct {
	Missing []string
}

func (e *PartialError) Error() string {
	return "partial answer: without the rows of " + strings.Join(e.Missing, ", ")
}

// OpenSource opens a local file or an http(s) URL for reading.
func OpenSource(ctx context.Context, src string) (io.ReadCloser, error) {
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("%s: %s", src, resp.Status)
		}
		return resp.Body, nil
	}
	if src == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// IngestSource ingests one file or URL straight into this (not listening)
// server's store, in batches of batchRows rows (each durable on its own).
func (s *Server) IngestSource(ctx context.Context, tableName, src string, batchRows int) (ingest.Result, error) {
	rc, err := OpenSource(ctx, src)
	if err != nil {
		return ingest.Result{}, err
	}
	defer rc.Close()
	if batchRows <= 0 {
		batchRows = 10000
	}
	res, err := s.Ingest(ctx, tableName, rc, IngestOptions{Format: ingest.FormatOfPath(src), BatchRows: batchRows, Origin: "file " + src})
	if err != nil {
		return res, fmt.Errorf("%s: %w", src, err)
	}
	return res, nil
}
