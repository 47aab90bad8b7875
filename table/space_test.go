//go:build linux

package table

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/smallfs"
)

// spaceOptions are a small store's: a 2 MiB memtable, 8 MiB kept free, a
// 3 MiB reserve, the free space looked at every 50 ms.
func spaceOptions(t *testing.T) Options {
	return Options{
		MemTableSize: 2 << 20, MinFreeBytes: 8 << 20, ReserveBytes: 3 << 20, CacheSize: 4 << 20,
		SpaceCheckInterval: 50 * time.Millisecond,
		Logger:             slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// closeWithin closes s, waiting at most limit: a store whose writes
// stalled on a full disk (the guard broken) may never close, and the test
// must then fail and go on to its cleanups (the tmpfs is unmounted lazily,
// open files and all) instead of hanging its package until -timeout.
func closeWithin(t *testing.T, s *Store, limit time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(limit):
		t.Errorf("the store did not close within %v (its writes stall: the disk filled past the guard); left open", limit)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// spaceBatch is 50 rows of about 6 KiB that compress little: n's batch.
func spaceBatch(n int) []Row {
	rows := make([]Row, 50)
	buf := make([]byte, 4500)
	for i := range rows {
		rand.Read(buf)
		rows[i] = Row{"k": fmt.Sprintf("k%d", i%4), "batch": int64(n), "i": int64(i), "ts": t0.Add(time.Duration(n) * time.Second).Unix(), "blob": base64.StdEncoding.EncodeToString(buf)}
	}
	return rows
}

// countBatches returns how many rows each batch has in the table.
func countBatches(t *testing.T, tb *Table) map[int64]int {
	t.Helper()
	got := map[int64]int{}
	err := tb.Query(context.Background(), Query{Columns: []string{"batch"}}, func(r Row) error {
		got[r["batch"].(int64)]++
		return nil
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	return got
}

// fillStore appends batches from first on until one is refused for lack of
// space, and returns the number of the refused one. Every batch before it
// was acknowledged.
func fillStore(t *testing.T, tb *Table, first int) int {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	// Without the guard Pebble stalls writes forever once its flushes fail
	// (or ends the process): a bounded wait makes that a failure here.
	done := make(chan result, 1)
	go func() {
		for n := first; n < first+10000; n++ {
			if err := tb.Append(context.Background(), spaceBatch(n)); err != nil {
				done <- result{n, err}
				return
			}
		}
		done <- result{-1, nil}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("an append hung for a minute on a filling disk (Pebble's write stall: its flushes fail)")
	}
	if r.n < 0 {
		t.Fatal("the disk never filled")
	}
	var dfe *DiskFullError
	if !errors.Is(r.err, ErrDiskFull) || !errors.As(r.err, &dfe) {
		t.Fatalf("batch %d: want a disk-full error, got %v", r.n, r.err)
	}
	return r.n
}

func checkBatches(t *testing.T, tb *Table, upTo int) {
	t.Helper()
	got := countBatches(t, tb)
	for n := range upTo {
		if got[int64(n)] != 50 {
			t.Fatalf("batch %d: %d rows stored, want 50 (acknowledged)", n, got[int64(n)])
		}
	}
	if len(got) != upTo {
		t.Fatalf("%d batches stored, want %d (a refused batch stored something)", len(got), upTo)
	}
}

// TestDiskFullRefusesWrites fills a 64 MiB tmpfs through the store: the
// write that would eat the minimum free space is refused with ErrDiskFull
// (the process lives on: Pebble never sees ENOSPC), everything acknowledged
// is there, queries work, and writes resume once space is freed.
func TestDiskFullRefusesWrites(t *testing.T) {
	dir := smallfs.Mount(t, 64<<20)
	// Leave the store ~24 MiB, so a few hundred batches fill it.
	hog := smallfs.Fill(t, dir, 24<<20)
	s, err := Open(filepath.Join(dir, "store"), spaceOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(t, s, 30*time.Second)
	if st := s.SpaceStatus(); !st.ReserveHeld || st.Full != nil {
		t.Fatalf("fresh store: want the reserve held and writes accepted: %+v", st)
	}
	tb, err := s.Table(Config{Name: "blobs", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	refused := fillStore(t, tb, 0)
	t.Logf("batch %d refused with %d MiB free", refused, smallfs.Free(t, dir)>>20)
	checkBatches(t, tb, refused)
	// Pebble may free some space once its flush is done (an old WAL goes):
	// a second hog keeps the disk under the minimum.
	hog2 := smallfs.Fill(t, dir, 4<<20)
	if err := tb.Append(context.Background(), spaceBatch(refused)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("second try: want ErrDiskFull, got %v", err)
	}
	st := s.SpaceStatus()
	if st.Full == nil || st.Refused < 2 {
		t.Fatalf("status while full: %+v", st)
	}
	checkBatches(t, tb, refused)
	os.Remove(hog2)

	// Space freed: writes resume by themselves.
	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(context.Background(), spaceBatch(refused)); err != nil {
		t.Fatalf("after freeing space: %v", err)
	}
	checkBatches(t, tb, refused+1)
	if st := s.SpaceStatus(); st.Full != nil || !st.ReserveHeld {
		t.Fatalf("status after freeing space: %+v", st)
	}
}

// TestDiskFullFromOutside: something else fills the disk to the last byte
// while the store runs. Writes are refused, the background check releases
// the reserve (Pebble's flushes get room), and both come back once the
// space does.
func TestDiskFullFromOutside(t *testing.T) {
	dir := smallfs.Mount(t, 48<<20)
	s, err := Open(filepath.Join(dir, "store"), spaceOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(t, s, 30*time.Second)
	tb, err := s.Table(Config{Name: "blobs", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 20 {
		if err := tb.Append(context.Background(), spaceBatch(n)); err != nil {
			t.Fatal(err)
		}
	}
	hog := smallfs.Fill(t, dir, 0)
	if err := tb.Append(context.Background(), spaceBatch(20)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("on a full disk: want ErrDiskFull, got %v", err)
	}
	waitFor(t, "the reserve released", func() bool { return !s.SpaceStatus().ReserveHeld })
	checkBatches(t, tb, 20)
	os.Remove(hog)
	waitFor(t, "the reserve made again", func() bool { return s.SpaceStatus().ReserveHeld })
	if err := tb.Append(context.Background(), spaceBatch(20)); err != nil {
		t.Fatalf("after freeing space: %v", err)
	}
	checkBatches(t, tb, 21)
}

// TestDiskFullReserveCatchesENOSPC turns the admission off: Pebble itself
// meets ENOSPC on a disk filled from outside, and the reserve released by
// vfs.OnDiskFull lets the write through instead of a fatal commit error
// (which would end this test binary).
func TestDiskFullReserveCatchesENOSPC(t *testing.T) {
	dir := smallfs.Mount(t, 48<<20)
	opts := spaceOptions(t)
	opts.MinFreeBytes = -1
	opts.ReserveBytes = 8 << 20
	s, err := Open(filepath.Join(dir, "store"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(t, s, 30*time.Second)
	if !s.SpaceStatus().ReserveHeld {
		t.Fatal("no reserve")
	}
	tb, err := s.Table(Config{Name: "blobs", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	smallfs.Fill(t, dir, 0)
	// Batches until Pebble needs space (a flush, a new WAL: the memtable is
	// 2 MiB), then two more: the reserve's 8 MiB are room for those, not
	// for writing on without a guard.
	n, after := 0, 0
	for ; after < 2; n++ {
		if n == 40 {
			t.Fatal("Pebble never met the full disk: the test proves nothing")
		}
		if err := tb.Append(context.Background(), spaceBatch(n)); err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		if !s.SpaceStatus().ReserveHeld {
			after++
		}
	}
	checkBatches(t, tb, n)
}

// TestDiskFullRestart closes a store on a disk that is then filled to the
// last byte: Open succeeds (read-only, the WAL replayed in memory), every
// acknowledged row is queried back, writes get ErrDiskFull naming the
// read-only store, and once space is freed the store reopens read-write by
// itself and takes writes.
func TestDiskFullRestart(t *testing.T) {
	dir := smallfs.Mount(t, 48<<20)
	storeDir := filepath.Join(dir, "store")
	s, err := Open(storeDir, spaceOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := s.Table(Config{Name: "blobs", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 30 {
		if err := tb.Append(context.Background(), spaceBatch(n)); err != nil {
			t.Fatal(err)
		}
	}
	// Close without a flush (a crash): the WAL holds the last rows.
	s.closeMu.Lock()
	s.closed = true
	s.closeMu.Unlock()
	s.stopOnce.Do(func() { close(s.stopWatch); <-s.watchDone })
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	s.fsCloser.Close()
	if walBytes(storeDir) == 0 {
		t.Fatal("no WAL to replay: the test proves nothing")
	}
	// Take the reserve too: the disk is full to the last byte.
	os.Remove(filepath.Join(storeDir, reserveFile))
	hog := smallfs.Fill(t, dir, 0)

	s, err = Open(storeDir, spaceOptions(t))
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	defer closeWithin(t, s, 30*time.Second)
	tb, err = s.Table(Config{Name: "blobs", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	checkBatches(t, tb, 30)
	err = tb.Append(context.Background(), spaceBatch(30))
	var dfe *DiskFullError
	if !errors.As(err, &dfe) || !dfe.ReadOnly {
		t.Fatalf("write on a read-only store: want a read-only DiskFullError, got %v", err)
	}
	if st := s.SpaceStatus(); !st.ReadOnly || st.Full == nil {
		t.Fatalf("status: %+v", st)
	}
	os.Remove(hog)
	waitFor(t, "the store reopened read-write", func() bool { return s.SpaceStatus().Full == nil })
	if err := tb.Append(context.Background(), spaceBatch(30)); err != nil {
		t.Fatalf("after freeing space: %v", err)
	}
	checkBatches(t, tb, 31)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // loose: the machine may be busy
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
