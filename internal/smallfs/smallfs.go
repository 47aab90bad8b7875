//go:build linux

// Package smallfs gives tests a small real filesystem to fill: a tmpfs
// mounted on a temporary directory (tests run as root here and in CI).
package smallfs

import (
	"errors"
	"github.com/sluicedb/sluice/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a new temporary directory and
// unmounts it when the test ends. Where mounting is impossible (not root,
// no mount) the test fails under CI=true and is skipped otherwise.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := "cannot mount a tmpfs for a disk-full test (run as root): " + err.Error() + ": " + string(out)
		testenv.Missing(t, "%s", msg)
	}
	// Registered after TempDir's cleanup, so it runs before it.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Free returns the bytes available on dir's filesystem.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Frsize
}

// Fill adds a file to dir that leaves at most leave bytes available on its
// filesystem (0: the filesystem is full to the last block), and returns
// its path; removing it frees the space again.
func Fill(t testing.TB, dir string, leave int64) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "hog-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var size int64
	for attempt := 0; ; attempt++ {
		n := Free(t, dir) - leave
		if n <= 0 {
			break
		}
		err := syscall.Fallocate(int(f.Fd()), 0, size, n)
		if err == nil {
			size += n
			break
		}
		// A store writing in the background took some of the space since
		// Free: try again with what is free now.
		if !errors.Is(err, syscall.ENOSPC) || attempt == 100 {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	if leave == 0 {
		// Whatever fallocate left (metadata rounding), written to ENOSPC.
		buf := make([]byte, 4096)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", dir, err)
				}
				break
			}
		}
	}
	return filepath.Clean(f.Name())
}
