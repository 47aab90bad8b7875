//go:build linux

package rdbtool

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGrowPipe: an export into a pipe raises the pipe's buffer (fewer
// hand-overs between sluice and the reading program), and leaves what is
// not a pipe alone.
func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	before, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	growPipe(w)
	after, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	if after < pipeSize || after <= before {
		t.Errorf("pipe buffer %d -> %d, want %d", before, after, pipeSize)
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	growPipe(f) // a regular file: nothing to do, no panic
}
