//go:build !linux

package table

import (
	"fmt"
	"os"
)

// allocateFile creates path with size bytes of zeros.
func allocateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = writeZeros(f, size)
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
