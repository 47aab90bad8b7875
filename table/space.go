package table

// A full disk refuses writes; it does not end the process.
//
// Pebble treats a failed WAL or MANIFEST write as fatal ("pebble: fatal
// commit error", version_set.go's "MANIFEST sync failed"): the process
// exits, and a restart on the still-full disk fails replaying the WAL. So
// the store keeps Pebble away from ENOSPC in three layers:
//
//  1. Admission. Every synced write is admitted only while the filesystem
//     keeps MinFreeBytes free beyond it and the writes in flight (one
//     statfs per batch). A refused write returns a *DiskFullError
//     (errors.Is ErrDiskFull) having touched nothing: the caller retries
//     it later. MinFreeBytes is the room Pebble needs for what it writes on
//     its own for data already accepted: memtable flushes, the next WAL's
//     preallocation, compactions, the MANIFEST. Deletions (TTL, compacted
//     blocks) free space, so they only need half of it.
//  2. A reserve file (ReserveBytes, reserveFile in the store directory),
//     released when Pebble still meets ENOSPC (vfs.OnDiskFull retries the
//     failed write once after the release: something outside the store
//     filled the disk), when free space falls under half of MinFreeBytes,
//     and at Open on a full disk. Writes stay refused until the reserve can
//     be made again (MinFreeBytes+ReserveBytes free): the room it freed is
//     for Pebble, not for new rows.
//  3. Open on a disk too full to replay the WAL opens Pebble read-only:
//     queries work, writes get a *DiskFullError, and the store reopens
//     read-write by itself once the space is back (watchSpace).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

// ErrDiskFull is wrapped by every write the store refuses because its
// filesystem is (nearly) full. Nothing of such a write is stored; retry it
// once space is freed.
var ErrDiskFull = errors.New("disk full")

// Defaults of the space guard (see Options).
const (
	DefaultMinFreeBytes = 256 << 20
	DefaultReserveBytes = 64 << 20
	// defaultSpaceCheck is how often watchSpace looks at the free space.
	defaultSpaceCheck = time.Second
	// openSlack is what a read-write Open needs beyond the WAL it replays
	// (a MANIFEST, an OPTIONS file, a new WAL's first block).
	openSlack = 4 << 20
)

// reserveFile is the reserve's name in the store directory. Pebble ignores
// files it does not know. An operator may delete it by hand to free space
// at once; the store makes it again when the space allows.
const reserveFile = "sluice.reserve"

// DiskFullError is the error of a write refused for lack of space. It
// says how much is free and how much writes need.
type DiskFullError struct {
	Dir string
	// Free is the space available on the store's filesystem, Need what a
	// write needs available (the minimum free space, the writes in flight
	// and this one, and the reserve when it must be made again first).
	Free, Need uint64
	// ReserveReleased: the reserve file was released and is made again
	// before writes resume.
	ReserveReleased bool
	// ReadOnly: the store opened read-only (the disk was too full to
	// replay its write-ahead log); it reopens read-write by itself.
	ReadOnly bool
}

func (e *DiskFullError) Error() string {
	return e.Reason() + "; nothing of this write was stored, and writes resume by themselves once space is freed"
}

// Reason is the condition alone, without what it did to a write (for
// readiness checks).
func (e *DiskFullError) Reason() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table: disk full: store %s has %s free", e.Dir, formatBytes(e.Free))
	if e.ReadOnly {
		b.WriteString(", too little to replay its write-ahead log: opened read-only (queries work)")
	}
	fmt.Fprintf(&b, "; writes need %s free (the minimum free space, storage.min_free_bytes", formatBytes(e.Need))
	if e.ReserveReleased {
		b.WriteString(", and room to make the released reserve file again, storage.reserve_bytes")
	}
	b.WriteString(")")
	return b.String()
}

func (e *DiskFullError) Unwrap() error { return ErrDiskFull }

// formatBytes is n in the largest binary unit that keeps it ≥ 1.
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// SpaceStatus is the store's disk space as the guard sees it.
type SpaceStatus struct {
	Dir string
	// Free and Total are the filesystem's available and total bytes (0
	// when statfs is not supported).
	Free, Total uint64
	// MinFree and Reserve are the configured minimum free space and
	// reserve size (0: off).
	MinFree, Reserve uint64
	// ReserveHeld: the reserve file is in place.
	ReserveHeld bool
	ReadOnly    bool
	// Refused counts writes refused for lack of space since Open.
	Refused int64
	// Full is non-nil while new writes are refused: the error they get.
	Full *DiskFullError
}

// spaceGuard is the store's admission of writes by free space.
type spaceGuard struct {
	dir              string
	minFree, reserve uint64                        // 0: that layer is off
	largeBatch       int64                         // Pebble's large-batch threshold (half a memtable)
	log, info        func(msg string, args ...any) // at warning and info level

	inflight atomic.Int64 // bytes of admitted writes not yet committed
	refused  atomic.Int64
	held     atomic.Bool // the reserve file is in place
	readOnly atomic.Bool // Pebble is open read-only
	wasFull  atomic.Bool // for logging the transitions once

	reserveMu sync.Mutex // serializes making and releasing the reserve
}

func (g *spaceGuard) reservePath() string { return filepath.Join(g.dir, reserveFile) }

// free returns the bytes available to the store's filesystem; ok is false
// when the filesystem does not say (the guard then admits everything).
func (g *spaceGuard) free() (avail, total uint64, ok bool) {
	du, err := vfs.Default.GetDiskUsage(g.dir)
	if err != nil {
		return 0, 0, false
	}
	return du.AvailBytes, du.TotalBytes, true
}

// admit reserves n bytes of free space for a write about to be committed,
// or refuses it with a *DiskFullError. freeing marks a write that frees
// space (deletions) or is tiny and needed to finish one (a compaction's
// watermark): it needs only half the minimum free space. Call done once
// the write committed or failed.
func (g *spaceGuard) admit(n int64, freeing bool) (done func(), err error) {
	if n >= g.largeBatch && g.largeBatch > 0 {
		// Pebble writes a large batch to the WAL and then flushes it as a
		// table of its own: it takes its size twice until the WAL goes.
		n *= 2
	}
	return g.admitBytes(n, freeing)
}

// admitBytes is admit for a write that takes exactly n bytes (files
// written directly, as a Stage's: no WAL copy).
func (g *spaceGuard) admitBytes(n int64, freeing bool) (done func(), err error) {
	if g.readOnly.Load() {
		g.refused.Add(1)
		avail, _, _ := g.free()
		return nil, &DiskFullError{Dir: g.dir, Free: avail, Need: g.minFree + g.reserve + openSlack, ReadOnly: true}
	}
	if g.minFree == 0 {
		return func() {}, nil
	}
	if g.reserve > 0 && !g.held.Load() && !freeing {
		g.makeReserve() // when the space allows; writes wait for it
	}
	cur := g.inflight.Add(n)
	done = func() { g.inflight.Add(-n) }
	avail, _, ok := g.free()
	if !ok {
		return done, nil
	}
	need, released := g.need(uint64(max(cur, 0)), freeing)
	if avail < need {
		done()
		g.refused.Add(1)
		return nil, &DiskFullError{Dir: g.dir, Free: avail, Need: need, ReserveReleased: released}
	}
	return done, nil
}

// need is the free space a write needs with pending bytes in flight
// (itself included); released says the reserve's room is part of it.
func (g *spaceGuard) need(pending uint64, freeing bool) (need uint64, released bool) {
	if freeing {
		return g.minFree / 2, false
	}
	need = g.minFree + pending
	if g.reserve > 0 && !g.held.Load() {
		need += g.reserve
		released = true
	}
	return need, released
}

// makeReserve creates the reserve file when it is missing and the space
// allows (the minimum free space stays free beside it), allocating its
// blocks for real (fallocate where the filesystem has it).
func (g *spaceGuard) makeReserve() {
	g.reserveMu.Lock()
	defer g.reserveMu.Unlock()
	if g.reserve == 0 || g.held.Load() {
		return
	}
	path := g.reservePath()
	if fi, err := os.Stat(path); err == nil && uint64(fi.Size()) >= g.reserve {
		g.held.Store(true)
		return
	}
	avail, _, ok := g.free()
	if ok && avail < g.minFree+g.reserve {
		return
	}
	if err := allocateFile(path, int64(g.reserve)); err != nil {
		os.Remove(path)
		g.log("could not make the disk space reserve file", "path", path, "bytes", g.reserve, "error", err)
		return
	}
	g.held.Store(true)
	g.info("disk space reserve file in place", "path", path, "bytes", g.reserve)
}

// releaseReserve deletes the reserve file (why says what prompted it).
func (g *spaceGuard) releaseReserve(why string) {
	g.reserveMu.Lock()
	defer g.reserveMu.Unlock()
	path := g.reservePath()
	err := os.Remove(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		g.log("could not release the disk space reserve file", "path", path, "error", err)
		return
	}
	wasHeld := g.held.Swap(false)
	if err == nil || wasHeld {
		g.log("disk space reserve file released: "+why+"; writes are refused until it can be made again", "path", path, "bytes", g.reserve)
	}
}

// status reports the guard's state; Full is what a write of 0 bytes would
// get now.
func (g *spaceGuard) status() SpaceStatus {
	st := SpaceStatus{Dir: g.dir, MinFree: g.minFree, Reserve: g.reserve, ReserveHeld: g.held.Load(), ReadOnly: g.readOnly.Load(), Refused: g.refused.Load()}
	avail, total, ok := g.free()
	st.Free, st.Total = avail, total
	switch {
	case st.ReadOnly:
		st.Full = &DiskFullError{Dir: g.dir, Free: avail, Need: g.minFree + g.reserve + openSlack, ReadOnly: true}
	case ok && g.minFree > 0:
		need, released := g.need(uint64(max(g.inflight.Load(), 0)), false)
		if avail < need {
			st.Full = &DiskFullError{Dir: g.dir, Free: avail, Need: need, ReserveReleased: released}
		}
	}
	return st
}

// walBytes is the size of the write-ahead logs in dir: what a read-write
// Open flushes into tables before it returns.
func walBytes(dir string) uint64 {
	var n uint64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			if fi, err := e.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
	}
	return n
}

// SpaceStatus reports the store's disk space and whether writes are
// refused for lack of it (for /readyz and /metrics).
func (s *Store) SpaceStatus() SpaceStatus { return s.space.status() }

// commitSync commits pb synced once the guard admits it (see admit for
// freeing).
func (s *Store) commitSync(pb *pebble.Batch, freeing bool) error {
	done, err := s.space.admit(int64(pb.Len()), freeing)
	if err != nil {
		return err
	}
	defer done()
	return pb.Commit(pebble.Sync)
}

// setSync sets key to value, synced, once the guard admits it.
func (s *Store) setSync(key, value []byte, freeing bool) error {
	done, err := s.space.admit(int64(len(key)+len(value)+64), freeing)
	if err != nil {
		return err
	}
	defer done()
	return s.db.Set(key, value, pebble.Sync)
}

// watchSpace looks at the free space every interval until stop is closed:
// it releases the reserve when the space falls under half the minimum,
// makes it again when the space is back, reopens a read-only store
// read-write, and logs when writes start and stop being refused.
func (s *Store) watchSpace(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.checkSpace()
		}
	}
}

func (s *Store) checkSpace() {
	g := s.space
	if g.readOnly.Load() {
		if avail, _, ok := g.free(); ok && avail >= g.minFree+g.reserve+walBytes(s.dir)+openSlack {
			if err := s.reopenWritable(); err != nil {
				g.log("reopening the store read-write failed; it stays read-only", "error", err)
			}
		}
	} else if g.minFree > 0 {
		if avail, _, ok := g.free(); ok && g.held.Load() && avail < g.minFree/2 {
			g.releaseReserve(fmt.Sprintf("free space (%s) fell under half the minimum (%s)", formatBytes(avail), formatBytes(g.minFree)))
		}
		if !g.held.Load() {
			g.makeReserve()
		}
	}
	st := g.status()
	if full := st.Full != nil; full != g.wasFull.Swap(full) {
		if full {
			g.log("writes refused: "+st.Full.Error(), "free", st.Free)
		} else {
			g.log("disk space is back: writes accepted again", "free", st.Free)
		}
	}
}

// reopenWritable closes the read-only Pebble and opens it read-write (once
// the space to replay its WAL is back). It waits for every operation in
// flight, as Close does.
func (s *Store) reopenWritable() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed || !s.space.readOnly.Load() {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return s.fail(fmt.Errorf("table: close read-only store %s: %w", s.dir, err))
	}
	popts := s.popts.Clone()
	popts.ReadOnly = false
	db, err := pebble.Open(s.dir, popts)
	if err != nil {
		// Back to read-only: the space went again, or something else.
		popts.ReadOnly = true
		ro, rerr := pebble.Open(s.dir, popts)
		if rerr != nil {
			return s.fail(fmt.Errorf("table: reopen store %s: %w (read-only: %v)", s.dir, err, rerr))
		}
		s.db = ro
		return fmt.Errorf("table: reopen store %s read-write: %w", s.dir, err)
	}
	s.db = db
	s.space.readOnly.Store(false)
	s.space.log("store reopened read-write: disk space is back")
	return nil
}

// fail marks the store closed after its database could not be reopened
// (REQUIRES: closeMu held exclusively): every operation then gets
// ErrClosed instead of using a closed database.
func (s *Store) fail(err error) error {
	s.closed = true
	s.failed = err
	s.space.log("store unusable", "error", err)
	return err
}

// writeZeros writes size zero bytes to f.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, min(size, 1<<20))
	for size > 0 {
		n, err := f.Write(buf[:min(size, int64(len(buf)))])
		if err != nil {
			return err
		}
		size -= int64(n)
	}
	return nil
}
