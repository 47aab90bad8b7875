//go:build linux

package rdb

import (
	"os"
	"syscall"
)

type mapping struct {
	data     []byte
	released int // data[:released] has been handed back with MADV_DONTNEED
}

func mapFile(f *os.File, size int64) (*mapping, error) {
	if int64(int(size)) != size {
		return nil, syscall.EFBIG
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL) // a hint; failure changes nothing
	return &mapping{data: data}, nil
}

func (m *mapping) unmap() error {
	if m.data == nil {
		return nil
	}
	err := syscall.Munmap(m.data)
	m.data = nil
	return err
}

// release drops the pages of data[:upTo] from the resident set once at least
// releaseChunk bytes are done with. The pages stay mapped; touching them
// again would fault them back in from the page cache.
func (m *mapping) release(upTo int) {
	const page = 4096
	upTo &^= page - 1
	if upTo-m.released < releaseChunk {
		return
	}
	_ = syscall.Madvise(m.data[m.released:upTo], syscall.MADV_DONTNEED) // advisory
	m.released = upTo
}
