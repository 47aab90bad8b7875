package rdb

import (
	"bytes"
	"fmt"
)

// Options configures a Parser. The zero value (or a nil *Options) is the
// default: no filter, checksum verified, 512 MiB cap per string, mmap allowed.
type Options struct {
	// Filter, if set, is called for every key once its record header and key
	// are read and before any of its value is; a false return skips the value
	// without decoding it and Next moves on. The *Entry is only valid during
	// the call.
	Filter Filter

	// SkipChecksum turns off the CRC64 verification at the end of the file.
	SkipChecksum bool

	// MaxValueSize caps the length of any single string (or ziplist,
	// listpack, LZF payload) in bytes; longer lengths fail with ErrTooLarge.
	// 0 means 512 MiB, Redis's own proto-max-bulk-len default. Memory is only
	// ever grown as bytes actually arrive, whatever the cap.
	MaxValueSize int64

	// BufferSize is the initial read window for NewParser (default 128 KiB; a second one is made once the input outgrows the first).
	BufferSize int

	// NoMmap makes Open read the file through the window buffer instead of
	// mapping it.
	NoMmap bool
}

const (
	defaultMaxValueSize = 512 << 20
	defaultBufferSize   = 128 << 10
	// maxRetainedBuffer: after a value larger than this, the window shrinks
	// back to BufferSize at the next Next so one huge value does not keep
	// its buffer for the rest of the file.
	maxRetainedBuffer = 8 << 20
)

// normalized returns a copy of o with defaults filled in; it never mutates
// the caller's Options.
func (o *Options) normalized() Options {
	var n Options
	if o != nil {
		n = *o
	}
	if n.MaxValueSize <= 0 {
		n.MaxValueSize = defaultMaxValueSize
	}
	if n.BufferSize <= 0 {
		n.BufferSize = defaultBufferSize
	}
	if n.BufferSize < 64 {
		n.BufferSize = 64
	}
	return n
}

// Filter decides whether a key's value is wanted. It sees the Entry as Next
// fills it (DB, Key, Type, Encoding, ExpireAt, Idle, Freq, Slot, Offset);
// the Entry and its Key are only valid during the call.
type Filter func(e *Entry) bool

// KeyPrefix accepts keys starting with any of the prefixes.
func KeyPrefix(prefixes ...string) Filter {
	ps := make([][]byte, len(prefixes))
	for i, p := range prefixes {
		ps[i] = []byte(p)
	}
	return func(e *Entry) bool {
		for _, p := range ps {
			if bytes.HasPrefix(e.Key, p) {
				return true
			}
		}
		return false
	}
}

// KeyPattern accepts keys matching a Redis glob pattern (as KEYS and SCAN
// MATCH use: *, ?, [abc], [^a-z], \ escapes). It fails on a malformed pattern.
func KeyPattern(pattern string) (Filter, error) {
	if err := checkPattern(pattern); err != nil {
		return nil, fmt.Errorf("rdb: key pattern %q: %w", pattern, err)
	}
	p := []byte(pattern)
	return func(e *Entry) bool { return globMatch(p, e.Key) }, nil
}

// DBs accepts keys of the listed databases.
func DBs(dbs ...int) Filter {
	return func(e *Entry) bool {
		for _, d := range dbs {
			if e.DB == d {
				return true
			}
		}
		return false
	}
}

// Types accepts keys of the listed logical types.
func Types(types ...Type) Filter {
	var mask uint32
	for _, t := range types {
		mask |= 1 << t
	}
	return func(e *Entry) bool { return mask&(1<<e.Type) != 0 }
}

// All accepts a key when every filter does (nil filters are ignored).
func All(filters ...Filter) Filter {
	return func(e *Entry) bool {
		for _, f := range filters {
			if f != nil && !f(e) {
				return false
			}
		}
		return true
	}
}

// Any accepts a key when at least one filter does.
func Any(filters ...Filter) Filter {
	return func(e *Entry) bool {
		for _, f := range filters {
			if f != nil && f(e) {
				return true
			}
		}
		return false
	}
}
