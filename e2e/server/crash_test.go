package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/table"
)

// TestSIGTERMLosesNothing runs a server process, streams batches at it
// from several clients, holds one batch half sent, sends SIGTERM, then
// finishes the held batch: every acknowledged row must be in the store
// when it is reopened, the held batch included, and the process must exit
// 0.
func TestSIGTERMLosesNothing(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	n := startNode(t, store, testConfig)
	addr := strings.TrimPrefix(n.URL, "http://")

	// The held batch: headers and half of the body.
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldRow := `{"user":"held","ts":"2024-05-01T10:00:00Z","n":7}` + "\n"
	fmt.Fprintf(held, "POST /v1/tables/events/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n%s", 2*len(heldRow), heldRow)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var mu sync.Mutex
	acked := 0
	var wg sync.WaitGroup
	stopSending := make(chan struct{})
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stopSending:
					return
				default:
				}
				var b strings.Builder
				for j := 0; j < 50; j++ {
					fmt.Fprintf(&b, `{"user":"u%d","ts":"2024-05-01T10:%02d:00Z","n":%d}`+"\n", w, j, i)
				}
				resp, err := client.Post(n.URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
				if err != nil {
					continue // refused after the listener closed: not acknowledged
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					mu.Lock()
					acked += 50
					mu.Unlock()
				case 503, 429:
				default:
					t.Errorf("unexpected status %d", resp.StatusCode)
				}
			}
		}(w)
	}
	// Signal once a few batches are in (not after a fixed time: the
	// machine may be slow), so that the signal lands mid-stream.
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return acked >= 5*50 })
	if err := n.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	close(stopSending)
	wg.Wait()
	// The held batch finishes after SIGTERM and is acknowledged.
	io.WriteString(held, heldRow)
	held.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(held), nil)
	if err != nil {
		t.Fatalf("held batch: %v\n%s", err, n.Tail())
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("held batch: %d %s", resp.StatusCode, b)
	}
	acked += 2
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if code := n.ProcessState().ExitCode(); code != 0 {
		t.Fatalf("exit status %d after SIGTERM:\n%s", code, n.Tail())
	}
	if !strings.Contains(n.Logs(), `"msg":"stopped"`) {
		t.Errorf("the server did not log a clean stop:\n%s", n.Tail())
	}
	if acked < 100 {
		t.Fatalf("only %d rows acknowledged before SIGTERM: the test did not stream", acked)
	}
	// Reopen the store: every acknowledged row is there, nothing more.
	n.Start(t)
	_, body := get(t, n.URL+"/v1/tables/events/query?columns=user")
	if got := len(lines(body)); got != acked {
		t.Fatalf("after restart %d rows, acknowledged %d", got, acked)
	}
	if _, body := get(t, n.URL+"/v1/tables/events/query?hash=held"); len(lines(body)) != 2 {
		t.Fatalf("held batch not stored: %q", body)
	}
}

// TestKill9LosesNoAcknowledgedBatch: SIGKILL a server process in the middle
// of a stream of batches from several clients. After a restart on the same
// store every acknowledged batch is there whole, and every batch that is
// there at all is whole (no half batch visible).
func TestKill9LosesNoAcknowledgedBatch(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), testConfig)
	const perBatch = 50
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var mu sync.Mutex
	acked := map[string]bool{} // "user/n" of each acknowledged batch
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				var b strings.Builder
				for j := 0; j < perBatch; j++ {
					fmt.Fprintf(&b, `{"user":"k%d","ts":"2024-05-01T10:%02d:00Z","n":%d}`+"\n", w, j, i)
				}
				resp, err := client.Post(n.URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
				if err != nil {
					return // the server is gone
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					acked[fmt.Sprintf("k%d/%d", w, i)] = true
					mu.Unlock()
				}
			}
		}(w)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 5 })
	time.Sleep(50 * time.Millisecond) // and let more be in flight
	n.Kill()
	wg.Wait()
	if len(acked) < 2 {
		t.Fatalf("only %d batches acknowledged before the kill: the test did not stream\n%s", len(acked), n.Tail())
	}
	n.Start(t)
	_, body := get(t, n.URL+"/v1/tables/events/query?columns=user,n")
	count := map[string]int{}
	for _, r := range lines(body) {
		count[fmt.Sprintf("%v/%v", r["user"], r["n"])]++
	}
	for k, c := range count {
		if c != perBatch {
			t.Errorf("batch %s has %d rows stored, want %d (half a batch is visible)", k, c, perBatch)
		}
	}
	for k := range acked {
		if count[k] != perBatch {
			t.Errorf("acknowledged batch %s has %d rows after the kill", k, count[k])
		}
	}
	t.Logf("%d batches acknowledged, %d stored", len(acked), len(count))
}

// TestIdempotencyKeyKill9: the server is killed (SIGKILL) right after the
// batch's commit, before it answers, and right before it. Restarted on its
// store, the retry with the same key is replayed (after) or stored (before):
// the rows are there once either way. This is the crash between the two
// steps the record claims are one (rows, then the key): a record written in
// a second batch would let the retry store the rows again.
func TestIdempotencyKeyKill9(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		point    string
		replayed bool
	}{{"append-after-commit:1", true}, {"append-before-commit:1", false}} {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			n := startNode(t, t.TempDir(), testConfig, table.FaultEnv+"="+tc.point)
			var body strings.Builder
			for i := range 7 {
				fmt.Fprintf(&body, `{"user":"k9","ts":"2024-05-01T10:00:%02dZ","n":%d}`+"\n", i%60, i)
			}
			req, _ := http.NewRequest(http.MethodPost, n.URL+"/v1/tables/events/rows", bytes.NewReader([]byte(body.String())))
			req.Header.Set("Content-Type", "application/x-ndjson")
			req.Header.Set("Idempotency-Key", "batch-1")
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the server answered %d instead of dying at %s", resp.StatusCode, tc.point)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := n.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(n.Logs(), "table: fault "+tc.point) {
				t.Fatalf("the server did not die at the fault:\n%s", n.Tail())
			}
			n.Env = n.Env[:len(n.Env)-1] // the fault point off
			n.Start(t)
			code, r, hdr := post(t, n.URL+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(body.String()), "Idempotency-Key", "batch-1")
			if code != 200 || r["accepted"] != 7.0 || (hdr.Get("Idempotent-Replayed") == "true") != tc.replayed {
				t.Fatalf("retry after the kill: %d %v replayed=%q, want replayed=%v", code, r, hdr.Get("Idempotent-Replayed"), tc.replayed)
			}
			_, rows := get(t, n.URL+"/v1/tables/events/query?columns=user&hash=k9")
			if got := len(lines(rows)); got != 7 {
				t.Fatalf("rows after kill -9 and a retry: %d, want 7", got)
			}
		})
	}
}
