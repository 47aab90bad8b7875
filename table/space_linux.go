package table

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// allocateFile creates path with size bytes whose blocks are allocated
// (fallocate: no data written, and a filesystem that compresses zeros still
// reserves them); it writes zeros where the filesystem lacks fallocate.
func allocateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		err = writeZeros(f, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("allocate %d bytes: %w", size, err)
	}
	return nil
}
