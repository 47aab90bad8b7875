package ingest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicedb/sluice/rdb"
	"github.com/sluicedb/sluice/rdbtool"
)

// RDBContentType is the media type of a Redis RDB snapshot body.
const RDBContentType = "application/x-redis-rdb"

// RDBColumns are the columns of the rows DecodeRDB makes, one row per key,
// with their table types: a table fed snapshots can declare them as its
// static schema (its computed columns come on top).
//
//   - time: when the snapshot was made (its "ctime" AUX field); absent when
//     the file has none, and the row then gets the ingestion time
//   - db, key, type (string, list, set, zset, hash, stream, module)
//   - key_base64: the key in standard base64 when it is not valid UTF-8
//     (key holds its bytes all the same, but JSON and CSV answers cannot
//     carry them); absent otherwise
//   - encoding: the in-memory encoding Redis 7 would use on load (as `sluice
//     rdb memory` reports it); rdb_encoding: the encoding in the file
//   - expire_at: the key's expiry; absent (null) when it has none
//   - memory_bytes, elements, len_largest: the memory estimate, the element
//     count (a string's length) and the largest element's length, as
//     `sluice rdb memory` reports them
//   - value: the value as JSON, in the form of `sluice rdb json`
//     (docs/rdb.md)
var RDBColumns = []struct{ Name, Type string }{
	{"time", "timestamp"}, {"db", "int64"}, {"key", "string"}, {"key_base64", "string"}, {"type", "string"},
	{"encoding", "string"}, {"rdb_encoding", "string"}, {"expire_at", "timestamp"},
	{"memory_bytes", "int64"}, {"elements", "int64"}, {"len_largest", "int64"}, {"value", "json"},
}

// RDBOptions configure DecodeRDB.
type RDBOptions struct {
	// Filter selects keys: DBs, Types, Prefixes, Pattern and Regex are
	// checked by the parser on the key (rejected values are skipped
	// undecoded), MinSize on the memory estimate.
	Filter       rdbtool.Filter
	SkipChecksum bool
	// BatchRows is the most rows passed to one emit call (0 = 1000).
	BatchRows int
	// BatchBytes bounds the value JSON held by one batch (0 = 32 MiB): a
	// batch is emitted early when its values reach it, so a snapshot of big
	// values does not hold BatchRows of them.
	BatchBytes int
	// Name names the input in errors (a file name, "request body").
	Name string
	// Stream asks for the rows of a snapshot to be stored batch by batch as
	// it is read, each batch durable on its own (a snapshot that fails half
	// way keeps the batches before the failure), instead of all or nothing
	// (the default of server.IngestRDB). DecodeRDB itself emits batches
	// either way: the caller stores or stages them.
	Stream bool
	// State asks for the snapshot to become the state of a keyed table: its
	// rows upsert their keys batch by batch (as Stream) with a source
	// position, and the keys the snapshot does not hold are deleted once it
	// was read whole (server.IngestRDB). DecodeRDB itself does not read it.
	State bool
	// Generation orders the snapshots of a State ingest: a later snapshot
	// has a larger one. 0 takes the snapshot's ctime (unix seconds).
	Generation int64
	// Header, when set, is called once the snapshot's header was read:
	// before the first batch is emitted, or at the end of a snapshot
	// without a selected key. ctime is the snapshot's "ctime" AUX field
	// (ok false: the file has none). An error stops decoding and is
	// returned as it is.
	Header func(ctime int64, ok bool) error
	// Overlap calls emit on a second goroutine, one batch behind: the next
	// batch is decoded while emit stores this one (two batches in memory
	// instead of one). emit is still called for one batch at a time, in
	// order, and errors and counts are the same.
	Overlap bool
}

// RDBDecoded counts what DecodeRDB read.
type RDBDecoded struct {
	Rows    int64 // keys selected (rows made)
	Pending int   // rows of the unfinished batch an error dropped (not emitted)
	Batches int   // emit calls
	Bytes   int64 // snapshot bytes parsed
	// Checksum is the CRC64 stored at the snapshot's end, once it was read
	// to its end (0: not reached, or the file stores none).
	Checksum uint64
}

// DecodeRDB reads a Redis RDB snapshot from r as it arrives and passes one
// row per selected key (columns: RDBColumns), BatchRows at a time, to emit,
// which owns the rows. Memory stays bounded by one batch and the parser's
// window whatever the snapshot's size.
//
// A snapshot that cannot be read (corrupt, truncated, bad checksum) stops
// decoding with an error wrapping ErrBadInput that names the input, the
// byte offset and the key being read (a *rdb.CorruptionError inside; a
// failure of r itself is returned without ErrBadInput);
// the batches emitted before it are not taken back, and the rows of the
// unfinished batch are not emitted. An error from emit stops decoding; one
// about a row (*RowError) is returned naming that row's key and offset.
func DecodeRDB(ctx context.Context, r io.Reader, opts RDBOptions, emit func(rows []Row) error) (RDBDecoded, error) {
	var d RDBDecoded
	if opts.BatchRows <= 0 {
		opts.BatchRows = 1000
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 32 << 20
	}
	if opts.Name == "" {
		opts.Name = "rdb"
	}
	kr, err := rdbtool.NewKeyReader(r, opts.Name, rdbtool.Options{Filter: opts.Filter, SkipChecksum: opts.SkipChecksum})
	if err != nil {
		return d, err
	}
	defer kr.Close()
	type where struct {
		db     int
		key    string
		offset int64
	}
	// handed is a batch given to emit, with where its rows come from.
	type handed struct {
		rows []Row
		at   []where // at[i] locates rows[i]
	}
	locate := func(h handed, err error) error {
		var re *RowError
		if errors.As(err, &re) && re.Row >= 0 && re.Row < len(h.at) {
			w := h.at[re.Row]
			return fmt.Errorf("%s: key %q (db %d) at offset %d: %w", opts.Name, w.key, w.db, w.offset, err)
		}
		return fmt.Errorf("%s: batch of %d keys from offset %d: %w", opts.Name, len(h.at), h.at[0].offset, err)
	}
	var (
		batch      []Row
		at         []where // at[i] locates batch[i]
		batchBytes int
		snapshot   any // the row's time: the snapshot's ctime, when known
		timeKnown  bool

		// With Overlap: the storer goroutine's input, its end, whether an
		// emit failed, and (read once it ended) its error and the rows it
		// was handed after the failure and dropped.
		work      chan handed
		stored    chan struct{}
		failed    atomic.Bool
		storerErr error
		dropped   int
	)
	if opts.Overlap {
		work, stored = make(chan handed), make(chan struct{})
		go func() {
			defer close(stored)
			for h := range work {
				if failed.Load() {
					dropped += len(h.rows)
					continue
				}
				if err := emit(h.rows); err != nil {
					storerErr = locate(h, err)
					failed.Store(true)
				}
			}
		}()
	}
	// stop ends the storer (once; no-op without Overlap) and returns its error.
	stop := func() error {
		if work == nil {
			return nil
		}
		close(work)
		<-stored
		work = nil
		d.Pending += dropped
		return storerErr
	}
	defer stop()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		d.Batches++
		h := handed{batch, at}
		batch, at, batchBytes = nil, nil, 0
		if work == nil {
			if err := emit(h.rows); err != nil {
				return locate(h, err)
			}
			return nil
		}
		if failed.Load() {
			d.Pending += len(h.rows)
			return stop()
		}
		work <- h
		return nil
	}
	for kr.Next(ctx) {
		rec := kr.Record()
		if !timeKnown {
			timeKnown = true
			s, ok := kr.SnapshotTime()
			if ok {
				snapshot = time.Unix(s, 0).UTC()
			}
			if opts.Header != nil {
				if err := opts.Header(s, ok); err != nil {
					d.Bytes = kr.Offset()
					return d, err
				}
			}
		}
		key := string(rec.Key)
		// The reader reuses its buffer: the row keeps a copy of a small
		// value, and takes a large one over (no copy of it is made).
		value := rec.Value
		if len(value) >= takeValueBytes {
			value = kr.TakeValue()
		} else {
			value = bytes.Clone(value)
		}
		row := Row{
			"db": int64(rec.DB), "key": key, "type": rec.Type.String(), "encoding": rec.Encoding,
			"rdb_encoding": rec.RDBEncoding.String(), "memory_bytes": rec.Memory, "elements": rec.Elements,
			"len_largest": rec.LenLargest, "value": json.RawMessage(value),
		}
		if snapshot != nil {
			row["time"] = snapshot
		}
		if rec.ExpireAt != 0 {
			row["expire_at"] = time.UnixMilli(rec.ExpireAt).UTC()
		}
		if !utf8.Valid(rec.Key) {
			row["key_base64"] = base64.StdEncoding.EncodeToString(rec.Key)
		}
		batch = append(batch, row)
		at = append(at, where{db: rec.DB, key: key, offset: rec.Offset})
		batchBytes += len(value)
		d.Rows++
		if len(batch) >= opts.BatchRows || batchBytes >= opts.BatchBytes {
			if err := flush(); err != nil {
				d.Bytes = kr.Offset()
				return d, err
			}
		}
	}
	d.Bytes = kr.Offset()
	if err := kr.Err(); err != nil {
		d.Pending += len(batch)
		// A batch stored before the failure that itself failed is the
		// earlier error in the file.
		if serr := stop(); serr != nil {
			return d, serr
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return d, err
		}
		if !snapshotFault(err) {
			return d, err // reading failed (a body cut off, a timeout): not the snapshot's fault
		}
		return d, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	d.Checksum = kr.Checksum()
	if !timeKnown && opts.Header != nil {
		// No key selected: the header is known all the same.
		if err := opts.Header(kr.SnapshotTime()); err != nil {
			return d, err
		}
	}
	if err := flush(); err != nil {
		return d, err
	}
	return d, stop()
}

// takeValueBytes is the size from which a row takes its value's buffer
// over from the KeyReader instead of copying it.
const takeValueBytes = 1 << 20

// snapshotFault reports whether err says the snapshot itself is bad (as
// opposed to the reader failing).
func snapshotFault(err error) bool {
	for _, e := range []error{rdb.ErrBadMagic, rdb.ErrUnsupportedVersion, rdb.ErrUnknownType, rdb.ErrChecksum,
		rdb.ErrTruncated, rdb.ErrTooLarge, rdb.ErrMalformed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
