package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/table"
)

// keyedPost posts body to table events with an Idempotency-Key.
func keyedPost(t *testing.T, url, key, body string) (int, ingestResponse, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/tables/events/rows", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set(idempotencyKeyHeader, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r ingestResponse
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
	} else {
		r.Error = string(b)
	}
	return resp.StatusCode, r, resp.Header
}

// countUsers counts the stored rows of events per user.
func countUsers(t *testing.T, url string) map[string]int {
	t.Helper()
	_, body := get(t, url+"/v1/tables/events/query?columns=user")
	n := map[string]int{}
	for _, l := range lines(body) {
		n[l["user"].(string)]++
	}
	return n
}

func keyedBody(user string, rows int) string {
	var b strings.Builder
	for i := range rows {
		fmt.Fprintf(&b, `{"user":%q,"ts":"2024-05-01T10:00:%02dZ","n":%d}`+"\n", user, i%60, i)
	}
	return b.String()
}

// TestIdempotencyKeyStoresOnce: a batch sent again with the same key and
// body is answered with the first answer (Idempotent-Replayed) and stores
// nothing; the same key with another body is a 422 storing nothing; a
// filtered-out batch's key is kept too; without a key a retry stores again.
func TestIdempotencyKeyStoresOnce(t *testing.T) {
	s := startServer(t, testConfig, "")
	body := keyedBody("a", 5) + `{"user":"test","ts":"2024-05-01T10:00:00Z","n":1}` + "\n"
	code, first, hdr := keyedPost(t, s.url, "k1", body)
	if code != 200 || first.Accepted != 5 || first.Filtered != 1 || hdr.Get(replayedHeader) != "" {
		t.Fatalf("first: %d %+v %v", code, first, hdr)
	}
	code, again, hdr := keyedPost(t, s.url, "k1", body)
	if code != 200 || hdr.Get(replayedHeader) != "true" || again.Accepted != 5 || again.Filtered != 1 {
		t.Fatalf("retry: %d %+v replayed=%q", code, again, hdr.Get(replayedHeader))
	}
	if n := countUsers(t, s.url)["a"]; n != 5 {
		t.Fatalf("after a retry with the same key: %d rows of a, want 5", n)
	}
	code, r, _ := keyedPost(t, s.url, "k1", keyedBody("a", 6))
	if code != http.StatusUnprocessableEntity || !strings.Contains(r.Error, "different body") {
		t.Fatalf("same key, other body: %d %s", code, r.Error)
	}
	// A batch whose rows are all filtered out stores no row but its key.
	onlyTest := `{"user":"test","ts":"2024-05-01T10:00:00Z","n":1}` + "\n"
	if code, r, _ := keyedPost(t, s.url, "k2", onlyTest); code != 200 || r.Filtered != 1 {
		t.Fatalf("filtered batch: %d %+v", code, r)
	}
	if code, r, hdr := keyedPost(t, s.url, "k2", onlyTest); code != 200 || hdr.Get(replayedHeader) != "true" || r.Filtered != 1 {
		t.Fatalf("filtered batch again: %d %+v %v", code, r, hdr)
	}
	// Another table's key space is its own; a bad key is a 400.
	if code, r, _ := keyedPost(t, s.url, strings.Repeat("x", 256), body); code != 400 || !strings.Contains(r.Error, "Idempotency-Key") {
		t.Fatalf("long key: %d %s", code, r.Error)
	}
	if code, r, _ := keyedPost(t, s.url, "cl\u00e9", body); code != 400 {
		t.Fatalf("key not ASCII: %d %s", code, r.Error)
	}
	// Without a key a retry stores again: the documented choice.
	for range 2 {
		if code, _, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(keyedBody("b", 3))); code != 200 {
			t.Fatalf("keyless post: %d", code)
		}
	}
	if n := countUsers(t, s.url)["b"]; n != 6 {
		t.Fatalf("two keyless posts: %d rows of b, want 6", n)
	}
	if m := scrapeMetric(t, s.url, "sluice_ingest_idempotent_replays_total"); m != 2 {
		t.Fatalf("sluice_ingest_idempotent_replays_total = %v, want 2", m)
	}
}

// scrapeMetric reads one unlabelled sample from /metrics.
func scrapeMetric(t *testing.T, url, name string) float64 {
	t.Helper()
	_, body := get(t, url+"/metrics")
	for _, l := range strings.Split(body, "\n") {
		var v float64
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}

// TestIdempotencyKeyInProgress: a second request with the key of one being
// stored is refused (409) rather than stored next to it.
func TestIdempotencyKeyInProgress(t *testing.T) {
	s := startServer(t, testConfig, "")
	body := &chunkReader{chunks: [][]byte{[]byte(keyedBody("c", 1))}}
	k, err := s.beginKeyed("events", "busy", body, false)
	if err != nil || k.replay != nil {
		t.Fatalf("begin: %v %v", k, err)
	}
	code, r, _ := keyedPost(t, s.url, "busy", keyedBody("c", 1))
	if code != http.StatusConflict {
		t.Fatalf("key in progress: %d %s", code, r.Error)
	}
	k.end()
	if code, _, _ := keyedPost(t, s.url, "busy", keyedBody("c", 1)); code != 200 {
		t.Fatalf("after the first ended: %d", code)
	}
}

// TestIdempotencyKeyExpires: past limits.idempotency_ttl a key is new
// again, and the sweep deletes its record.
func TestIdempotencyKeyExpires(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	cfg, err := config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	srv.ready.Store(true)
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); srv.Close() }()
	s := &testServer{Server: srv, url: hs.URL}
	body := keyedBody("e", 2)
	if code, _, _ := keyedPost(t, s.url, "old", body); code != 200 {
		t.Fatal(code)
	}
	now.Add(int64(s.cfg.Limits.IdempotencyTTL - time.Second))
	if _, _, hdr := keyedPost(t, s.url, "old", body); hdr.Get(replayedHeader) != "true" {
		t.Fatal("replay within the TTL: not replayed")
	}
	s.sweepIdempotency(context.Background())
	if n := records(t, s.store); n != 1 {
		t.Fatalf("records after a sweep within the TTL: %d, want 1", n)
	}
	now.Add(int64(2 * time.Second))
	s.sweepIdempotency(context.Background())
	if n := records(t, s.store); n != 0 {
		t.Fatalf("records after the TTL's sweep: %d, want 0", n)
	}
	if code, _, hdr := keyedPost(t, s.url, "old", body); code != 200 || hdr.Get(replayedHeader) != "" {
		t.Fatalf("after the TTL: %d replayed=%q", code, hdr.Get(replayedHeader))
	}
	if n := countUsers(t, s.url)["e"]; n != 4 {
		t.Fatalf("rows of e: %d, want 4 (the key expired once)", n)
	}
}

func records(t *testing.T, st *table.Store) int {
	t.Helper()
	n := 0
	if err := st.Positions(idempotencyPrefix, func(string, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClientRetriesLostAnswer: the connection breaks after the server
// stored a batch and before the client read the answer; Client.PostBatch
// sends it again with the same key and gets the first answer: the rows are
// stored once. Without a key the lost answer is an error.
func TestClientRetriesLostAnswer(t *testing.T) {
	s := startServer(t, testConfig, "")
	var posts atomic.Int64
	lose := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && posts.Add(1) == 1 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r) // stored...
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close() // ...and the answer lost
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	proxy := httptest.NewServer(lose(s.Handler()))
	defer proxy.Close()
	c := &Client{URL: proxy.URL}
	res, err := c.PostBatch(context.Background(), "events", "application/x-ndjson", []byte(keyedBody("lost", 4)))
	if err != nil || res.Accepted != 4 {
		t.Fatalf("PostBatch: %+v %v", res, err)
	}
	if posts.Load() != 2 {
		t.Fatalf("%d posts, want 2 (the lost one and its retry)", posts.Load())
	}
	if n := countUsers(t, s.url)["lost"]; n != 4 {
		t.Fatalf("rows after a lost answer and a retry: %d, want 4", n)
	}
	posts.Store(0)
	c.NoIdempotencyKey = true
	if _, err := c.PostBatch(context.Background(), "events", "application/x-ndjson", []byte(keyedBody("nokey", 1))); err == nil {
		t.Fatal("without a key a lost answer must be an error")
	}
}

// BenchmarkIngestKeyed is POST /rows through the handler (no network) of
// 1000 ten-field rows, without and with an Idempotency-Key (a new one per
// request: a lookup that misses, the body's CRC-32C and the record staged
// with the rows). It is what the key costs a request.
func BenchmarkIngestKeyed(b *testing.B) {
	cfg, err := config.Parse([]byte(benchConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(context.Background(), cfg, Options{StorageDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.ready.Store(true)
	h := s.Handler()
	var body bytes.Buffer
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		fmt.Fprintf(&body, `{"time":"%s","user":"u%d","action":"view","country":"SG","device":"web","amount":%d.5,"score":%d.5,"count":%d,"session":%d,"ok":true}`+"\n",
			base.Add(time.Duration(i)*37*time.Millisecond).Format(time.RFC3339Nano), i%benchPartitions, i%500, i%97, i%13, i/7)
	}
	for _, keyed := range []bool{false, true} {
		b.Run(fmt.Sprintf("keyed=%v", keyed), func(b *testing.B) {
			b.ReportAllocs()
			prefix := rand.Text() // keys new to the store on every run
			cpu0 := processCPU()
			for i := 0; b.Loop(); i++ {
				req := httptest.NewRequest(http.MethodPost, "/v1/tables/bench/rows", bytes.NewReader(body.Bytes()))
				req.Header.Set("Content-Type", "application/x-ndjson")
				if keyed {
					req.Header.Set(idempotencyKeyHeader, fmt.Sprintf("%s-%d", prefix, i))
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(b.N)*1000/(processCPU()-cpu0).Seconds(), "rows/CPU-s")
		})
	}
}

// TestClientDoesNotResendUnsent: a batch that never reached a server (the
// connection was refused) is an error at once, not resent for half a
// minute.
func TestClientDoesNotResendUnsent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	start := time.Now()
	if _, err := (&Client{URL: url}).PostBatch(context.Background(), "events", "application/x-ndjson", []byte("{}\n")); err == nil {
		t.Fatal("no error from a closed port")
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Fatalf("took %v: a refused connection was resent", d)
	}
}

// TestIdempotencyKeysBounded: with limits.idempotency_max_keys 3, a
// fourth live key of a table is refused with 429 naming the bound and
// stores nothing, while retries of the three stored keys are still
// answered from their records (never stored twice); the bound holds over
// a restart (the count is read from the store) and frees up as the keys
// expire and are swept.
func TestIdempotencyKeysBounded(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	yaml := strings.Replace(testConfig, "limits: {", "limits: {idempotency_max_keys: 3, ", 1)
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	open := func() (*testServer, func()) {
		srv, err := New(context.Background(), cfg, Options{StorageDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Now: func() time.Time { return time.Unix(0, now.Load()) }})
		if err != nil {
			t.Fatal(err)
		}
		srv.ready.Store(true)
		hs := httptest.NewServer(srv.Handler())
		return &testServer{Server: srv, url: hs.URL}, func() { hs.Close(); srv.Close() }
	}
	s, closeServer := open()
	for _, key := range []string{"k1", "k2", "k3"} {
		if code, r, _ := keyedPost(t, s.url, key, keyedBody(key, 2)); code != 200 {
			t.Fatalf("%s: %d %s", key, code, r.Error)
		}
	}
	refused := func(s *testServer) {
		t.Helper()
		code, r, _ := keyedPost(t, s.url, "k4", keyedBody("k4", 2))
		if code != http.StatusTooManyRequests || !strings.Contains(r.Error, "idempotency_max_keys") || !strings.Contains(r.Error, `holds 3`) {
			t.Fatalf("a fourth key: %d %q, want 429 naming the bound", code, r.Error)
		}
		if n := countUsers(t, s.url)["k4"]; n != 0 {
			t.Fatalf("the refused batch stored %d rows", n)
		}
	}
	refused(s)
	for _, key := range []string{"k1", "k2", "k3"} {
		if code, _, hdr := keyedPost(t, s.url, key, keyedBody(key, 2)); code != 200 || hdr.Get(replayedHeader) != "true" {
			t.Fatalf("retry of %s at the bound: %d replayed=%q", key, code, hdr.Get(replayedHeader))
		}
	}
	closeServer()
	s, closeServer = open()
	defer closeServer()
	refused(s)
	now.Add(int64(s.cfg.Limits.IdempotencyTTL + time.Second))
	s.sweepIdempotency(context.Background())
	if code, r, _ := keyedPost(t, s.url, "k4", keyedBody("k4", 2)); code != 200 {
		t.Fatalf("a new key once the old ones expired: %d %s", code, r.Error)
	}
	for _, key := range []string{"k1", "k2", "k3", "k4"} {
		if n := countUsers(t, s.url)[key]; n != 2 {
			t.Errorf("rows of %s: %d, want 2 (stored once)", key, n)
		}
	}
}
