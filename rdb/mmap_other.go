//go:build !linux

package rdb

import (
	"errors"
	"os"
)

// mapping is never made on this platform (mapFile fails and the parser
// reads the file instead); its fields keep the shared code compiling.
type mapping struct {
	data     []byte
	released int
}

func mapFile(*os.File, int64) (*mapping, error) {
	return nil, errors.New("mmap not used on this platform")
}
func (m *mapping) unmap() error { return nil }
func (m *mapping) release(int)  {}
