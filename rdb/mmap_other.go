//go:build !linux

package rdb

import (
	"errors"
	"os"
)

type mapping struct{ data []byte }

func mapFile(*os.File, int64) (*mapping, error) {
	return nil, errors.New("mmap not used on this platform")
}
func (m *mapping) unmap() error { return nil }
func (m *mapping) release(int)  {}
