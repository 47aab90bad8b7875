package rdbtool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/sluicedb/sluice/rdb"
)

// KeyRecord is one key of a snapshot with its value as JSON and its
// estimated memory, read in one pass: what `sluice ingest --format rdb`
// stores as a row. Key and Value are borrowed from the KeyReader and valid
// until its next Next.
type KeyRecord struct {
	DB          int
	Key         []byte
	Type        rdb.Type
	RDBEncoding rdb.Encoding // the encoding in the file
	// Encoding is the in-memory encoding Redis 7 would use on load, as the
	// memory report's encoding column (listpack, quicklist, intset,
	// hashtable, skiplist, embstr, int, raw, stream, module).
	Encoding   string
	ExpireAt   int64 // unix ms, 0 = none
	Memory     int64 // estimated bytes, as the memory report's size_in_bytes
	Elements   int64 // elements (a string's length in bytes), as num_elements
	LenLargest int64 // the largest element's length in bytes
	// Value is the value as JSON, in the form of the "value" field of
	// `sluice rdb json` (docs/rdb.md).
	Value  []byte
	Offset int64 // byte offset of the key's record in the snapshot
}

// KeyReader reads an RDB snapshot from any io.Reader as it arrives (a
// file, an HTTP request body: nothing is read whole, the parser keeps a
// 1 MiB window) and returns its selected keys as KeyRecords. The filters of
// Options.Filter apply as for every verb: DB, type, prefix, pattern and
// regex in the parser (rejected values skipped undecoded), MinSize on the
// estimate.
//
//	kr, err := rdbtool.NewKeyReader(body, "dump.rdb", opts)
//	for kr.Next(ctx) {
//		rec := kr.Record()
//	}
//	err = kr.Err() // names the input, the offset and the key
type KeyReader struct {
	name string
	in   *input
	ex   *exporter
	rec  KeyRecord
	n    int
	err  error
	done bool
}

// NewKeyReader returns a KeyReader of the snapshot r; name names it in
// errors. Options.Progress, NoMmap and NoParallel do not apply (the caller
// sees the bytes go by and can draw its own progress).
func NewKeyReader(r io.Reader, name string, opts Options) (*KeyReader, error) {
	filter, err := opts.Filter.parserFilter()
	if err != nil {
		return nil, err
	}
	in := &input{path: name, minSize: opts.Filter.MinSize, estimateAll: true}
	in.estimateFn = in.estimateElement
	in.p = rdb.NewParser(r, &rdb.Options{Filter: filter, SkipChecksum: opts.SkipChecksum, BufferSize: 1 << 20})
	ex := newExporter(io.Discard, JSONLines)
	ex.in, ex.hold = in, true // a value is kept whole: nothing is written out mid-value
	return &KeyReader{name: name, in: in, ex: ex}, nil
}

// Next reads the next selected key; false at the end of the snapshot, on
// an error (see Err) or when ctx is done (checked every 4096 keys).
func (kr *KeyReader) Next(ctx context.Context) bool {
	if kr.done {
		return false
	}
	in := kr.in
	for in.next(ctx, &kr.n) {
		e := in.p.Entry()
		kr.ex.buf = kr.ex.buf[:0]
		if err := kr.ex.value(in, e); err != nil {
			kr.finish(ctx, err)
			return false
		}
		size, enc := in.est.finish()
		if size < in.minSize {
			continue
		}
		kr.rec = KeyRecord{DB: e.DB, Key: e.Key, Type: e.Type, RDBEncoding: e.Encoding, Encoding: enc,
			ExpireAt: e.ExpireAt, Memory: size, Elements: in.est.elements, LenLargest: in.est.largest,
			Value: kr.ex.buf, Offset: e.Offset}
		return true
	}
	kr.finish(ctx, nil)
	return false
}

func (kr *KeyReader) finish(ctx context.Context, err error) {
	kr.done = true
	err = kr.in.finish(ctx, err)
	var ce *rdb.CorruptionError
	if errors.As(err, &ce) && ce.Path == "" {
		// A parser over a reader does not know the file's name.
		err = fmt.Errorf("%s: %w", kr.name, err)
	}
	kr.err = err
}

// Record is the current key (valid until the next Next).
func (kr *KeyReader) Record() *KeyRecord { return &kr.rec }

// TakeValue hands the current record's Value over to the caller, who may
// keep it: the KeyReader writes the next value into a new buffer. For a
// large value this saves the copy a caller keeping it would make (and the
// reader does not hold on to a buffer of that size).
func (kr *KeyReader) TakeValue() []byte {
	v := kr.rec.Value
	kr.rec.Value, kr.ex.buf = nil, nil
	return v
}

// Offset is the number of snapshot bytes parsed so far.
func (kr *KeyReader) Offset() int64 { return kr.in.p.Offset() }

// SnapshotTime is the snapshot's creation time (its "ctime" AUX field) in
// unix seconds, and whether the file has one. AUX fields come before the
// keys, so it is known once Next returned the first key.
func (kr *KeyReader) SnapshotTime() (int64, bool) {
	for _, a := range kr.in.p.Header().Aux {
		if a.Key == "ctime" {
			if s, err := strconv.ParseInt(a.Value, 10, 64); err == nil {
				return s, true
			}
		}
	}
	return 0, false
}

// Checksum is the CRC64 stored at the end of the snapshot, known once Next
// returned false without an error; 0 before, or when the file stores none
// (Redis with rdbchecksum no).
func (kr *KeyReader) Checksum() uint64 { return kr.in.p.Header().Checksum }

// Err is the error that ended Next: a parse error naming the input, byte
// offset and key (a *rdb.CorruptionError inside, errors.Is the rdb
// sentinels), or ctx's error; nil at a clean end.
func (kr *KeyReader) Err() error { return kr.err }

// Close releases the parser; safe after Next returned false, and before.
func (kr *KeyReader) Close() error {
	if !kr.done {
		kr.finish(context.Background(), nil)
	}
	return nil
}
