package cli

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/redisproc"
)

// manyKeysRDB has a real redis-server write n string keys of about 300
// bytes each (hex, so that the staged blocks do not shrink to nothing).
func manyKeysRDB(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	srv, err := redisproc.Start(context.Background(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	err = srv.Pipeline(context.Background(), func(w *bufio.Writer) error {
		// The value is 20 numbers in 16 hex digits each (%016x), made
		// without fmt: 3 M Fprintf calls were most of the test's time
		// under -race.
		var v []byte
		var word [8]byte
		for i := range n {
			v = v[:0]
			for j := range 20 {
				binary.BigEndian.PutUint64(word[:], uint64(i+1)*0x9e3779b97f4a7c15^uint64(j)*0xbf58476d1ce4e5b9)
				v = hex.AppendEncode(v, word[:])
			}
			redisproc.WriteCommand(w, "SET", "key:"+strconv.Itoa(i), string(v))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dump, err := srv.Save()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "many.rdb")
	if err := os.Rename(dump, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// killWhen starts `sluice ingest` of snapshot into the store data (with
// the flags extra), waits for ready (polled every 5 ms) and kills the
// process with SIGKILL. It fails the test if the ingest ended first.
func killWhen(t *testing.T, bin, cfg, data, snapshot string, mode string, ready func() bool, extra ...string) {
	t.Helper()
	args := append([]string{"ingest", "--config", cfg, "--data", data, "--table", "keys", "--no-progress", "--mode", mode}, extra...)
	cmd := exec.Command(bin, append(args, snapshot)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(2 * time.Minute)
	for !ready() {
		select {
		case err := <-exited:
			t.Fatalf("--mode %s: the ingest ended (%v) before the kill point; stderr %q", mode, err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("--mode %s: the kill point was not reached in 2 minutes", mode)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("--mode %s: the ingest ended (%v) before the kill; stderr %q", mode, err, stderr.String())
	}
}

// countRows counts the rows of the keys table of the store data.
func countRows(t *testing.T, bin, cfg, data string) int {
	t.Helper()
	// Every column: after a kill in atomic mode the table has none yet.
	cmd := exec.Command(bin, "query", "--config", cfg, "--data", data, "--table", "keys")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sluice query: %v\n%s", err, stderr.String())
	}
	return strings.Count(string(out), "\n")
}

// TestIngestRDBKill9StoresNothing kills `sluice ingest` of a real-server
// snapshot (a process of its own) with SIGKILL once it has staged more
// than a memtable of blocks (an sstable of the stage is on disk): in the
// default atomic mode the store holds no row of it after; the same
// ingest run again to its end stores each key once and leaves no scratch
// directory. The same kill in stream mode leaves rows stored (the kill
// lands mid-ingest: the test can tell half-stored from nothing).
func TestIngestRDBKill9StoresNothing(t *testing.T) {
	t.Parallel() // its own processes, directories and ports
	redisproc.Need(t)
	bin := buildSluice(t)
	const keys = 150_000
	start := time.Now()
	snapshot := manyKeysRDB(t, keys)
	cfg := writeKeysConfig(t)
	t.Logf("snapshot of %d keys written in %v", keys, time.Since(start))

	data := t.TempDir()
	killWhen(t, bin, cfg, data, snapshot, "atomic", func() bool {
		staged, _ := filepath.Glob(filepath.Join(data, "staging", "*", "*.sst"))
		return len(staged) > 0
	})
	t.Logf("atomic mode killed at %v", time.Since(start))
	if n := countRows(t, bin, cfg, data); n != 0 {
		t.Fatalf("atomic mode: %d rows stored by an ingest killed half way", n)
	}
	out, err := exec.Command(bin, "ingest", "--config", cfg, "--data", data, "--table", "keys", "--no-progress", snapshot).CombinedOutput()
	if err != nil {
		t.Fatalf("ingest after the kill: %v\n%s", err, out)
	}
	if rep := ingestReport(t, string(out)); rep["accepted"] != float64(keys) || rep["mode"] != "atomic" {
		t.Fatalf("ingest after the kill: report %v", rep)
	}
	if n := countRows(t, bin, cfg, data); n != keys {
		t.Fatalf("after the kill and a full ingest: %d rows, want %d", n, keys)
	}
	if left, _ := filepath.Glob(filepath.Join(data, "staging", "*")); len(left) != 0 {
		t.Errorf("scratch directories left after the second ingest: %q", left)
	}

	t.Logf("full ingest done at %v", time.Since(start))
	streamed := t.TempDir()
	killWhen(t, bin, cfg, streamed, snapshot, "stream", func() bool {
		logs, _ := filepath.Glob(filepath.Join(streamed, "*.log"))
		var size int64
		for _, l := range logs {
			if st, err := os.Stat(l); err == nil {
				size += st.Size()
			}
		}
		return size > 4<<20
	})
	if n := countRows(t, bin, cfg, streamed); n == 0 || n >= keys {
		t.Fatalf("stream mode: %d rows stored by an ingest killed half way, want some", n)
	}
}
