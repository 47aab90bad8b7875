//go:build linux

package server

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/smallfs"
)

// diskFullConfig keeps 128 MiB free (four of Pebble's 32 MiB memtables) and
// a 16 MiB reserve.
const diskFullConfig = `
listen: {http: "127.0.0.1:0"}
storage: {min_free_bytes: 134217728, reserve_bytes: 16777216}
limits: {max_body_bytes: 4194304}
tables:
  - name: blobs
    hashBy: k
    sortBy: ts
`

// blobBody is an NDJSON request of 200 rows of ~5 KiB that compress
// little, ids "req-i".
func blobBody(req int) []byte {
	var b bytes.Buffer
	buf := make([]byte, 3600)
	for i := range 200 {
		rand.Read(buf)
		fmt.Fprintf(&b, `{"k":"k%d","id":"%d-%d","ts":"2024-05-01T10:00:00Z","blob":%q}`+"\n", i%8, req, i, base64.StdEncoding.EncodeToString(buf))
	}
	return b.Bytes()
}

// postBlobs posts request req; a transport error (a dropped connection)
// fails the test.
func postBlobs(t *testing.T, url string, req int) (int, string, http.Header) {
	// Bounded: a store stalled on a full disk must fail the test, not hang it.
	cl := &http.Client{Timeout: time.Minute}
	defer cl.CloseIdleConnections()
	resp, err := cl.Post(url+"/v1/tables/blobs/rows", "application/x-ndjson", bytes.NewReader(blobBody(req)))
	if err != nil {
		t.Errorf("request %d: no answer (a dropped connection, or a store stalled on the full disk): %v", req, err)
		return 0, "", nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// storedIDs queries every id of the table.
func storedIDs(t *testing.T, url string) map[string]int {
	t.Helper()
	code, body := get(t, url+"/v1/tables/blobs/query?columns=id")
	if code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	ids := map[string]int{}
	for _, r := range lines(body) {
		ids[r["id"].(string)]++
	}
	return ids
}

// checkAcked fails unless every row of the acknowledged requests is stored
// once and nothing else is.
func checkAcked(t *testing.T, url string, acked map[int]bool) {
	t.Helper()
	ids := storedIDs(t, url)
	for req := range acked {
		for i := range 200 {
			if n := ids[fmt.Sprintf("%d-%d", req, i)]; n != 1 {
				t.Fatalf("row %d-%d of an acknowledged request stored %d times", req, i, n)
			}
		}
	}
	if len(ids) != 200*len(acked) {
		t.Fatalf("%d rows stored, want %d: a refused request stored rows", len(ids), 200*len(acked))
	}
}

func metric(t *testing.T, url, name string) string {
	t.Helper()
	_, body := get(t, url+"/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("metric %s missing", name)
	return ""
}

// TestDiskFullHTTPIngest fills a tmpfs through HTTP ingest from four
// clients at once: every request gets an answer (200, or 507 naming the
// disk with a Retry-After), never a dropped connection; the server stays
// up, queries work, /readyz and /metrics say why; every acknowledged row is
// there once. Freeing the space makes ingest work again by itself. Then a
// restart on the disk filled to the last byte starts (read-only), answers
// queries with every row, refuses ingest with 507, and takes writes again
// once space is freed.
func TestDiskFullHTTPIngest(t *testing.T) {
	mnt := smallfs.Mount(t, 448<<20)
	dir := filepath.Join(mnt, "store")
	s := startServer(t, diskFullConfig, dir)
	// Room for ~100 requests (Pebble preallocates each WAL: 35 MiB) beyond the minimum free space and the reserve.
	hog := smallfs.Fill(t, mnt, (128+16+160)<<20)

	var mu sync.Mutex
	acked := map[int]bool{}
	var next int
	var wg sync.WaitGroup
	refused := ""
	for range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				req := next
				next++
				mu.Unlock()
				if req > 400 {
					t.Error("the disk never filled")
					return
				}
				code, body, hdr := postBlobs(t, s.url, req)
				switch code {
				case 0:
					return
				case 200:
					mu.Lock()
					acked[req] = true
					mu.Unlock()
				case http.StatusInsufficientStorage:
					if hdr.Get("Retry-After") == "" || !strings.Contains(body, "disk full") {
						t.Errorf("507 without Retry-After or cause: %v %s", hdr, body)
					}
					mu.Lock()
					refused = body
					mu.Unlock()
					return
				default:
					t.Errorf("request %d: %d %s", req, code, body)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d requests acknowledged, then: %s", len(acked), refused)
	var resp ingestResponse
	if err := json.Unmarshal([]byte(refused), &resp); err != nil || !strings.Contains(resp.Error, "min_free_bytes") {
		t.Fatalf("507 body does not name the cause: %s", refused)
	}
	// Pebble may free some space once its flush is done (an old WAL goes):
	// a second hog keeps the disk under the minimum for the checks.
	hog2 := smallfs.Fill(t, mnt, 64<<20)
	if code, body, _ := postBlobs(t, s.url, next); code != http.StatusInsufficientStorage {
		t.Fatalf("ingest under the minimum free space: %d %s", code, body)
	}
	if code, body := get(t, s.url+"/readyz"); code != 503 || !strings.Contains(body, "disk full") {
		t.Fatalf("readyz while full: %d %s", code, body)
	}
	if v := metric(t, s.url, "sluice_store_disk_full"); v != "1" {
		t.Fatalf("sluice_store_disk_full %s while full", v)
	}
	if v := metric(t, s.url, "sluice_store_writes_refused_total"); v == "0" {
		t.Fatal("no refused write counted")
	}
	checkAcked(t, s.url, acked)

	// Space freed: ingest works again without a restart.
	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	os.Remove(hog2)
	req := next + 1
	if code, body, _ := postBlobs(t, s.url, req); code != 200 {
		t.Fatalf("after freeing space: %d %s", code, body)
	}
	acked[req] = true
	waitReadyWithin(t, s.url, 20*time.Second)
	if v := metric(t, s.url, "sluice_store_disk_full"); v != "0" {
		t.Fatalf("sluice_store_disk_full %s after freeing space", v)
	}
	checkAcked(t, s.url, acked)

	// A restart on a disk full to the last byte.
	s.stop()
	hog = smallfs.Fill(t, mnt, 0)
	s = startServerNotReady(t, diskFullConfig, dir)
	checkAcked(t, s.url, acked)
	if code, body := get(t, s.url+"/readyz"); code != 503 || !strings.Contains(body, "disk full") {
		t.Fatalf("readyz after a start on a full disk: %d %s", code, body)
	}
	if code, body, _ := postBlobs(t, s.url, req+1); code != http.StatusInsufficientStorage || !strings.Contains(body, "disk full") {
		t.Fatalf("ingest after a start on a full disk: %d %s", code, body)
	}
	checkAcked(t, s.url, acked)
	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	waitReadyWithin(t, s.url, 20*time.Second) // the store reopened read-write and made its reserve again
	if code, body, _ := postBlobs(t, s.url, req+1); code != 200 {
		t.Fatalf("after freeing space on the restarted server: %d %s", code, body)
	}
	acked[req+1] = true
	checkAcked(t, s.url, acked)
}

// startServerNotReady is startServer for a server that starts not ready
// (on a full disk): it waits for /healthz instead of /readyz.
func startServerNotReady(t *testing.T, yaml, dir string) *testServer {
	t.Helper()
	ts := serveConfig(t, yaml, dir)
	for i := 0; ; i++ {
		if code, _ := get(t, ts.url+"/healthz"); code == 200 {
			break
		}
		if i == 200 {
			t.Fatal("server never healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ts
}

func waitReadyWithin(t *testing.T, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		code, body := get(t, url+"/readyz")
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready %v after freeing space: %d %s", d, code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
