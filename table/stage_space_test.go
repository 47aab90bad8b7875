//go:build linux

package table

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/smallfs"
)

// fillStage stages batches from 0 on until one is refused for lack of
// space, and returns the number of the refused one.
func fillStage(t *testing.T, st *Stage, tb *Table) int {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	// Without the guard the scratch database's flushes fail on ENOSPC and
	// its writes stall for good (or a MANIFEST write ends the process): a
	// bounded wait makes that a failure here.
	done := make(chan result, 1)
	go func() {
		for n := range 10000 {
			if err := st.Append(context.Background(), tb, spaceBatch(n)); err != nil {
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
		t.Fatal("a staged append hung for a minute on a filling disk (the scratch database's flushes fail)")
	}
	if r.n < 0 {
		t.Fatal("the disk never filled")
	}
	var dfe *DiskFullError
	if !errors.Is(r.err, ErrDiskFull) || !errors.As(r.err, &dfe) {
		t.Fatalf("staged batch %d: want a disk-full error, got %v", r.n, r.err)
	}
	return r.n
}

// TestStageDiskFull fills a 64 MiB tmpfs through a Stage (the atomic RDB
// ingest's): the append that would leave too little room for the minimum
// free space and for Publish's copy of the stage is refused with
// ErrDiskFull having staged nothing, and closing the Stage gives the space
// back. A Publish the disk has no room for is refused too, storing nothing;
// once the space is back the same rows are published. While a stage is open
// the room of its Publish is held from the store's other writes.
func TestStageDiskFull(t *testing.T) {
	ctx := context.Background()
	dir := smallfs.Mount(t, 64<<20)
	hog := smallfs.Fill(t, dir, 32<<20)
	s, err := Open(filepath.Join(dir, "store"), spaceOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	// A cleanup, not a defer: it runs after the stages' cleanups (Close
	// waits for every open Stage).
	t.Cleanup(func() { s.Close() })
	tb, err := s.Table(Config{Name: "blobs", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	before := smallfs.Free(t, dir)

	st, err := s.NewStage()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	refused := fillStage(t, st, tb)
	t.Logf("staged batch %d refused with %d MiB free", refused, smallfs.Free(t, dir)>>20)
	if refused < 5 {
		t.Fatalf("batch %d refused: the disk had room for more", refused)
	}
	if got := st.Rows(tb); got != refused*50 {
		t.Fatalf("%d rows staged, want %d (the refused batch staged something)", got, refused*50)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if len(countBatches(t, tb)) != 0 {
		t.Fatal("rows of a closed stage are visible")
	}
	if after := smallfs.Free(t, dir); after < before-(1<<20) {
		t.Fatalf("%d MiB free after closing the stage, %d MiB before it", after>>20, before>>20)
	}

	// Stage a few batches, then fill the disk from outside: Publish has no
	// room for its copy and stores nothing.
	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	stage := func() *Stage {
		t.Helper()
		st, err := s.NewStage()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		for n := range 30 {
			if err := st.Append(ctx, tb, spaceBatch(n)); err != nil {
				t.Fatalf("staged batch %d: %v", n, err)
			}
		}
		return st
	}
	st = stage()
	// Room for half of Publish's copy beyond the minimum free space: the
	// copy would fit, eating the minimum.
	hog = smallfs.Fill(t, dir, 8<<20+st.staged/2)
	err = st.Publish(ctx)
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("publish on a full disk: want ErrDiskFull, got %v", err)
	}
	t.Logf("publish refused: %v", err)
	st.Close()
	if len(countBatches(t, tb)) != 0 {
		t.Fatal("a refused publish stored rows")
	}
	os.Remove(hog)
	st = stage()
	if err := st.Publish(ctx); err != nil {
		t.Fatalf("publish after freeing space: %v", err)
	}
	st.Close()
	checkBatches(t, tb, 30)

	// An open stage holds the room of its Publish: the store's other
	// writes that would eat into it are refused, and admitted once the
	// stage is closed.
	st = stage()
	smallfs.Fill(t, dir, 8<<20+st.staged/2)
	if err := tb.Append(ctx, spaceBatch(30)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("an append into the room an open stage holds: want ErrDiskFull, got %v", err)
	}
	st.Close()
	if err := tb.Append(ctx, spaceBatch(30)); err != nil {
		t.Fatalf("the same append once the stage is closed: %v", err)
	}
	checkBatches(t, tb, 31)
}
