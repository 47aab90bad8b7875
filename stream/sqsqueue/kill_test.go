package sqsqueue_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/table"
)

// buildFull builds sluice-full (the binary with the SQS client) into dir.
func buildFull(t *testing.T, dir string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, "sluice-full")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sluice-full")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice-full: %v\n%s", err, out)
	}
	return bin
}

// serve starts `sluice-full serve` on cfg and data with extra environment.
func serve(t *testing.T, bin, cfg, data string, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg, "--data", data, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "info")
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// storedIDs opens a stopped node's store and counts each id of events.
func storedIDs(t *testing.T, data string) map[int64]int {
	t.Helper()
	s, err := table.Open(data, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "events"})
	if err != nil {
		t.Fatal(err)
	}
	return ids(t, tb)
}

// TestSQSKillBetweenStoreAndDelete: a sluice-full node reading the queue
// kills itself (SIGKILL, table.FaultEnv) right after committing an
// object's rows with its record, before deleting the message; restarted on
// its store, it gets the message again after the visibility timeout,
// deletes it without storing the object again, and stores the next one.
func TestSQSKillBetweenStoreAndDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sluice-full")
	}
	e := start(t, 1)
	dir := t.TempDir()
	bin := buildFull(t, dir)
	e.put(t, "in/a.ndjson", []byte(`{"id":1}`+"\n"+`{"id":2}`+"\n"))
	cfg := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`tables:
  - name: events
    sources:
      - s3: {bucket: %s, prefix: in/, queue: %q, endpoint: %q, path_style: true, region: us-east-1,
             access_key: %s, secret_key: %s}
`, coldtest.Bucket, e.queueURL, e.s3opts.Endpoint, coldtest.AccessKey, coldtest.SecretKey)), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")

	cmd, out := serve(t, bin, cfg, data, table.FaultEnv+"=after-commit:1")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("no fault within a minute:\n%s", out)
	}
	if !strings.Contains(out.String(), "table: fault after-commit:1") {
		t.Fatalf("the node exited without reaching the fault:\n%s", out)
	}
	if got := storedIDs(t, data); len(got) != 2 {
		t.Fatalf("killed after the commit, the store holds %v, want ids 1 and 2", got)
	}
	if n := e.queued(t); n != 1 {
		t.Fatalf("killed before the delete, the queue holds %d messages, want 1", n)
	}

	cmd, out = serve(t, bin, cfg, data)
	e.put(t, "in/b.ndjson", []byte(`{"id":3}`+"\n"))
	waitFor(t, "the queue empty", func() bool { return e.queued(t) == 0 })
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	got := storedIDs(t, data)
	if len(got) != 3 {
		t.Fatalf("after the restart the store holds %v, want ids 1-3", got)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("id %d stored %d times", id, n)
		}
	}
}
