package rdb

import (
	"os"
)

// mmapMinSize: smaller files are read through the window buffer; mapping
// costs more in syscalls and page faults than it saves below this size.
const mmapMinSize = 1 << 20

// releaseChunk: with a mapped file, consumed pages are handed back to the
// kernel in chunks of this size, so the resident set does not grow with the
// file (mapped file pages count towards RSS).
const releaseChunk = 16 << 20

// Open returns a Parser reading the file at path. Large files are memory
// mapped (on Linux, unless Options.NoMmap): keys and values are then slices
// of the mapping and nothing is copied; pages already parsed are released as
// the parse moves on, keeping the resident set bounded. Close the Parser to
// release the file.
func Open(path string, opts *Options) (*Parser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	o := opts.normalized()
	if !o.NoMmap {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() >= mmapMinSize {
			if m, err := mapFile(f, fi.Size()); err == nil {
				p := NewBytesParser(m.data, opts)
				p.path = path
				p.mapping = m
				p.closer = func() error {
					err := m.unmap()
					if cerr := f.Close(); err == nil {
						err = cerr
					}
					return err
				}
				return p, nil
			}
		}
	}
	p := NewParser(f, opts)
	p.path = path
	p.closer = f.Close
	return p, nil
}
