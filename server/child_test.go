package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
)

// runChild is the test binary run as a server process (SLUICE_TEST_CHILD
// set): it serves SLUICE_TEST_CONFIG on a free port, writes the address to
// SLUICE_TEST_ADDR and stops on SIGTERM, as `sluice serve` does.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1) // as `sluice serve` does
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if os.Getenv("SLUICE_TEST_STOP_AFTER_OWN_PART") != "" {
		// A coordinator stopped (as by SIGSTOP from outside) right after
		// its own part of a cluster query, before it reads any member.
		// The signal stops every thread soon, not at once: block here so
		// that this goroutine does not go on reading members meanwhile.
		stop := func() {
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			select {}
		}
		afterOwnPart.Store(&stop)
	}
	cfg, err := config.Parse([]byte(os.Getenv("SLUICE_TEST_CONFIG")), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := New(ctx, cfg, Options{StorageDir: os.Getenv("SLUICE_TEST_DIR"), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), SetMemoryLimit: true, ReloadSignals: hup})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := os.WriteFile(os.Getenv("SLUICE_TEST_ADDR"), []byte(ln.Addr().String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := s.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestSIGTERMLosesNothing runs the server as a child process, streams
// batches at it from several clients, holds one batch half sent, sends
// SIGTERM, then finishes the held batch: every acknowledged row must be in
// the store when it is reopened, the held batch included, and the process
// must exit 0.
func TestSIGTERMLosesNothing(t *testing.T) {
	dir := t.TempDir()
	cmd, addr, stderr := startChild(t, dir)
	url := "http://" + addr
	waitReady(t, url)

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
				resp, err := client.Post(url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
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
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
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
		t.Fatalf("held batch: %v\n%s", err, stderr.String())
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("held batch: %d %s", resp.StatusCode, b)
	}
	acked += 2
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped") {
		t.Errorf("child did not log a clean stop:\n%s", stderr.String())
	}
	if acked < 100 {
		t.Fatalf("only %d rows acknowledged before SIGTERM: the test did not stream", acked)
	}
	// Reopen the store: every acknowledged row is there, nothing more.
	s := startServer(t, testConfig, dir)
	_, body := get(t, s.url+"/v1/tables/events/query?columns=user")
	if got := len(lines(body)); got != acked {
		t.Fatalf("after restart %d rows, acknowledged %d", got, acked)
	}
	if _, body := get(t, s.url+"/v1/tables/events/query?hash=held"); len(lines(body)) != 2 {
		t.Fatalf("held batch not stored: %q", body)
	}
}

// startChild starts the test binary as a server process on dir and
// returns it with its address.
func startChild(t *testing.T, dir string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	return startChildConfig(t, dir, testConfig)
}

// startChildConfig is startChild with another config.
func startChildConfig(t testing.TB, dir, config string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_CHILD=1", "SLUICE_TEST_CONFIG="+config, "SLUICE_TEST_DIR="+dir, "SLUICE_TEST_ADDR="+addrFile,
		"GOMEMLIMIT=") // the server's own soft limit (TestIngestMemoryBound)
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var addr string
	for i := 0; ; i++ {
		b, err := os.ReadFile(addrFile)
		if err == nil && len(b) > 0 {
			addr = string(b)
			break
		}
		if i > 1000 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child never listened: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, addr, &stderr
}

// TestKill9LosesNoAcknowledgedBatch: SIGKILL a server process in the middle
// of a stream of batches from several clients. After a restart on the same
// store every acknowledged batch is there whole, and every batch that is
// there at all is whole (no half batch visible).
func TestKill9LosesNoAcknowledgedBatch(t *testing.T) {
	dir := t.TempDir()
	cmd, addr, stderr := startChild(t, dir)
	url := "http://" + addr
	waitReady(t, url)
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
				resp, err := client.Post(url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
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
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	wg.Wait()
	if len(acked) < 2 {
		t.Fatalf("only %d batches acknowledged before the kill: the test did not stream\n%s", len(acked), stderr.String())
	}
	s := startServer(t, testConfig, dir)
	_, body := get(t, s.url+"/v1/tables/events/query?columns=user,n")
	count := map[string]int{}
	for _, r := range lines(body) {
		count[fmt.Sprintf("%v/%v", r["user"], r["n"])]++
	}
	for k, n := range count {
		if n != perBatch {
			t.Errorf("batch %s has %d rows stored, want %d (half a batch is visible)", k, n, perBatch)
		}
	}
	for k := range acked {
		if count[k] != perBatch {
			t.Errorf("acknowledged batch %s has %d rows after the kill", k, count[k])
		}
	}
	t.Logf("%d batches acknowledged, %d stored", len(acked), len(count))
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 3000 {
			t.Fatal("condition not reached in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
