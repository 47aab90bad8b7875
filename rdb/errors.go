package rdb

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Sentinel errors. A parse failure is a *CorruptionError wrapping one of
// these; test with errors.Is.
var (
	ErrBadMagic           = errors.New("rdb: not an RDB file (bad magic)")
	ErrUnsupportedVersion = errors.New("rdb: unsupported RDB version")
	ErrUnknownType        = errors.New("rdb: unknown value type or opcode")
	ErrChecksum           = errors.New("rdb: checksum mismatch")
	// ErrTruncated wraps io.ErrUnexpectedEOF, so errors.Is(err,
	// io.ErrUnexpectedEOF) holds too.
	ErrTruncated = fmt.Errorf("rdb: file truncated: %w", io.ErrUnexpectedEOF)
	// ErrTooLarge reports a length beyond Options.MaxValueSize or beyond what
	// the rest of the file can hold.
	ErrTooLarge = errors.New("rdb: length too large")
	// ErrModulePreGA reports a module value of type 6, written by Redis 4.0
	// release candidates: unlike type 7 it carries no type annotations and
	// no end mark, so only the module that wrote it can read or skip it.
	// It wraps ErrUnknownType.
	ErrModulePreGA = fmt.Errorf("rdb: pre-GA module value (type 6, Redis 4.0 release candidates) is not self-describing, only its module can read it: %w", ErrUnknownType)
	// ErrMalformed reports an inconsistent encoding: a bad length prefix,
	// corrupt LZF data, a ziplist/listpack whose structure does not add up.
	ErrMalformed = errors.New("rdb: malformed value")

	// ErrWrongAccessor is returned by Value on a non-string entry and by
	// Visit on a string entry (not a corruption; the parser is unaffected).
	ErrWrongAccessor = errors.New("rdb: value accessor does not match the entry type")
	// ErrValueConsumed is returned when the value was already visited, or
	// when Value/Visit is called without a current entry.
	ErrValueConsumed = errors.New("rdb: value already consumed or no current entry")
	// SkipRest may be returned by a Visit callback to stop visiting the
	// current value; Visit then returns nil and the rest is skipped.
	//lint:ignore ST1012 a request to stop, not a failure, named like fs.SkipDir
	SkipRest = errors.New("rdb: skip the rest of this value")
)

// CorruptionError is the error for any input the parser cannot read: it says
// where (byte offset into the file) and, once a key has been read, which key.
type CorruptionError struct {
	Path   string // the file, when the Parser came from Open
	Offset int64  // byte offset where the problem was found
	Key    []byte // the key being read (a copy), nil before a key was read
	Err    error  // the cause: a sentinel above, possibly with detail
}

func (e *CorruptionError) Error() string {
	s := "rdb: "
	if e.Path != "" {
		s += e.Path + ": "
	}
	if e.Key != nil {
		s += "key " + strconv.Quote(string(e.Key)) + " "
	}
	return s + "at offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.Err.Error()
}

func (e *CorruptionError) Unwrap() error { return e.Err }
