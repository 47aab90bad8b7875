package rdbtool

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/sluicedb/sluice/rdb"
)

// Format is an export format.
type Format int

const (
	// JSON is one JSON array of key records, one record per line.
	JSON Format = iota
	// JSONLines is one key record per line (JSON Lines), no enclosing array.
	JSONLines
)

// Stats says what a verb read.
type Stats struct {
	Keys      int64 // keys written / counted (after every filter)
	InputSize int64 // bytes of the RDB file
}

// flushAt is the buffered size above which the exporter writes to its
// io.Writer: after a record, or in the middle of a huge value so that one
// value never sits in memory twice (unless the record is held, see build).
const flushAt = 256 << 10

// Export writes every selected key of the RDB file at path to w as JSON in
// the form docs/rdb.md documents: one object per key,
//
//	{"db":0,"key":"k","type":"hash","expire_at_ms":null,"value":[{"field":"f","value":"v"}]}
//
// with binary-safe strings (a JSON string when valid UTF-8, else
// {"base64":"..."}). Records are built by hand into one reused buffer
// written to w every flushAt bytes: no reflection, no per-key allocation.
// With two or more CPUs and no MinSize, parsing and JSON writing run on two
// goroutines (see parallel.go; Options.NoParallel turns it off).
func Export(ctx context.Context, path string, w io.Writer, format Format, opts Options) (Stats, error) {
	in, err := openInput(path, "export", opts)
	if err != nil {
		return Stats{}, err
	}
	growPipe(w)
	if opts.Filter.MinSize == 0 && !opts.NoParallel && runtime.GOMAXPROCS(0) >= 2 {
		keys, err := exportParallel(ctx, in, w, format, opts.StageCPU)
		return Stats{Keys: keys, InputSize: in.size}, err
	}
	ex := newExporter(w, format)
	var n int
	var visitErr error
	ex.open()
	for in.next(ctx, &n) {
		e := in.p.Entry()
		if visitErr = ex.record(in, e); visitErr != nil {
			break
		}
	}
	err = in.finish(ctx, visitErr)
	if err == nil {
		err = ex.close()
	} else {
		ex.abort()
	}
	return Stats{Keys: ex.keys, InputSize: in.size}, err
}

// exporter writes key records. Records are appended straight into buf (no
// second copy through a bufio.Writer) and buf is written to w once it holds
// flushAt bytes. buf[mark:] is the record being built, which can be dropped
// until it is committed.
type exporter struct {
	w      io.Writer
	err    error // first write error, sticky
	format Format
	buf    []byte
	mark   int
	keys   int64
	hold   bool // the record must stay droppable (MinSize, script): no mid-record flush
	in     *input

	n     int64 // elements written in the current value
	visit func(*rdb.Element) error
	str   streamWriter

	// Hooks the script runner sets to build the Lua value in the same pass.
	onString  func(v []byte)
	onElement func(el *rdb.Element)
}

func newExporter(w io.Writer, format Format) *exporter {
	ex := &exporter{w: w, format: format, buf: make([]byte, 0, flushAt+64<<10)}
	ex.visit = ex.element // bound once: passing ex.element to Visit would allocate per key
	return ex
}

func (ex *exporter) open() {
	if ex.format == JSON {
		ex.buf = append(ex.buf, "[\n"...)
	}
}

func (ex *exporter) close() error {
	if ex.format == JSON {
		if ex.keys > 0 {
			ex.buf = append(ex.buf, '\n')
		}
		ex.buf = append(ex.buf, "]\n"...)
	}
	ex.flush()
	if ex.err != nil {
		return fmt.Errorf("rdbtool: write: %w", ex.err)
	}
	return nil
}

// abort ends an export that failed: the records completed before the error
// are written, the one being built is dropped and a JSON array is left
// unterminated (no "]"), so no consumer can take a cut export for a whole one.
func (ex *exporter) abort() {
	ex.drop()
	ex.flush()
}

// flush writes buf out.
func (ex *exporter) flush() {
	if ex.err == nil && len(ex.buf) > 0 {
		_, ex.err = ex.w.Write(ex.buf)
	}
	ex.buf = ex.buf[:0]
	ex.mark = 0
}

// drop discards the record being built.
func (ex *exporter) drop() { ex.buf = ex.buf[:ex.mark] }

// appendHeader appends the record's fields before the value.
func appendHeader(b []byte, e *rdb.Entry) []byte {
	b = append(b, `{"db":`...)
	b = strconv.AppendInt(b, int64(e.DB), 10)
	b = append(b, `,"key":`...)
	b = appendString(b, e.Key)
	b = append(b, `,"type":"`...)
	b = append(b, e.Type.String()...)
	b = append(b, `","expire_at_ms":`...)
	if e.ExpireAt != 0 {
		b = strconv.AppendInt(b, e.ExpireAt, 10)
	} else {
		b = append(b, "null"...)
	}
	return append(b, `,"value":`...)
}

// record writes the current key's record (unless MinSize drops it).
func (ex *exporter) record(in *input, e *rdb.Entry) error {
	if err := ex.build(in, e, in.minSize > 0); err != nil {
		return err
	}
	if ex.hold {
		if size, _ := in.est.finish(); size < in.minSize {
			ex.drop()
			return nil
		}
	}
	return ex.commit()
}

// build builds the current key's record into ex.buf. With hold, the whole
// record stays in the buffer (and is estimated) until commit; without, a
// big value is written out as it grows past flushAt.
func (ex *exporter) build(in *input, e *rdb.Entry, hold bool) error {
	ex.in = in
	ex.hold = hold
	// The separator goes at the front of the record, so a record dropped
	// by MinSize takes its separator with it.
	ex.mark = len(ex.buf)
	if ex.keys > 0 && ex.format == JSON {
		ex.buf = append(ex.buf, ",\n"...)
	}
	ex.buf = appendHeader(ex.buf, e)
	if err := ex.value(in, e); err != nil {
		return err
	}
	ex.buf = append(ex.buf, '}')
	if ex.format == JSONLines {
		ex.buf = append(ex.buf, '\n')
	}
	return nil
}

// value appends the current key's value as JSON (the "value" of its
// record) and, when in is estimating, estimates its memory in the same pass.
func (ex *exporter) value(in *input, e *rdb.Entry) error {
	if in.estimating() {
		in.est.start(memKindOf(e.Type), e.Key, e.ExpireAt != 0)
	}
	var err error
	switch e.Type {
	case rdb.String:
		var v []byte
		v, err = in.p.Value()
		if err == nil {
			ex.appendString(v)
			if in.estimating() {
				in.est.stringValue(v)
			}
			if ex.onString != nil {
				ex.onString(v)
			}
		}
	case rdb.Stream:
		ex.str.reset(e.Encoding)
		ex.buf = append(ex.buf, `{"entries":[`...)
		ex.n = 0
		err = in.p.Visit(ex.visit)
		if err == nil {
			ex.buf = ex.str.finish(ex.buf)
		}
	case rdb.Module:
		ex.buf = append(ex.buf, `{"module":`...)
		ex.buf = appendString(ex.buf, []byte(e.Module))
		ex.buf = append(ex.buf, `,"items":[`...)
		ex.n = 0
		err = in.p.Visit(ex.visit)
		ex.buf = append(ex.buf, "]}"...)
	default:
		ex.buf = append(ex.buf, '[')
		ex.n = 0
		err = in.p.Visit(ex.visit)
		ex.buf = append(ex.buf, ']')
	}
	return err
}

// commit keeps the record built by build.
func (ex *exporter) commit() error {
	ex.keys++
	ex.mark = len(ex.buf)
	if len(ex.buf) >= flushAt {
		ex.flush()
	}
	return ex.err
}

// element appends one element of a list, set, zset, hash, module or stream.
func (ex *exporter) element(el *rdb.Element) error {
	b := ex.buf
	if el.Kind >= rdb.StreamEntry && el.Kind != rdb.ModuleItem {
		ex.buf = ex.str.element(b, el, &ex.n)
		ex.observe(el)
		return ex.maybeFlush()
	}
	if ex.n > 0 {
		b = append(b, ',')
	}
	ex.n++
	if len(el.Member)+len(el.Value) > bigString {
		ex.buf = b
		ex.bigElement(el)
		ex.observe(el)
		return ex.maybeFlush()
	}
	switch el.Kind {
	case rdb.ListItem, rdb.SetMember:
		b = appendString(b, el.Member)
	case rdb.ZSetMember:
		b = append(b, `{"member":`...)
		b = appendString(b, el.Member)
		b = append(b, `,"score":`...)
		b = appendFloat(b, el.Score)
		b = append(b, '}')
	case rdb.HashField:
		b = append(b, `{"field":`...)
		b = appendString(b, el.Member)
		b = append(b, `,"value":`...)
		b = appendString(b, el.Value)
		if el.ExpireAt != 0 {
			b = append(b, `,"expire_at_ms":`...)
			b = strconv.AppendInt(b, el.ExpireAt, 10)
		}
		b = append(b, '}')
	case rdb.ModuleItem:
		switch el.ModuleOpcode {
		case rdb.ModuleSint:
			b = strconv.AppendInt(b, el.Int, 10)
		case rdb.ModuleUint:
			b = strconv.AppendUint(b, uint64(el.Int), 10)
		case rdb.ModuleFloat, rdb.ModuleDouble:
			b = appendFloat(b, el.Score)
		default:
			b = appendString(b, el.Member)
		}
	}
	ex.buf = b
	ex.observe(el)
	return ex.maybeFlush()
}

// appendString appends s to buf as a JSON string (see appendString); a long
// one is escaped in pieces with buf flushed in between (unless the record is
// held), so one huge value is never in the buffer whole as JSON.
func (ex *exporter) appendString(s []byte) {
	if len(s) <= bigString {
		ex.buf = appendString(ex.buf, s)
		return
	}
	if ex.hold {
		// Held whole (KeyReader): room for all of it at once, or the pieces
		// would grow the buffer step by step (1 GB allocated for a 200 MB
		// value). Escapes may still grow it.
		n := len(s) + 2
		if !utf8.Valid(s) {
			n = base64.StdEncoding.EncodedLen(len(s)) + len(`{"base64":""}`)
		}
		ex.buf = slices.Grow(ex.buf, n)
	}
	ex.buf = appendStringPieces(ex.buf, s, ex.flushPiece)
}

// flushPiece is appendStringPieces' flush: b is the buffer so far.
func (ex *exporter) flushPiece(b []byte) []byte {
	ex.buf = b
	_ = ex.maybeFlush() // a write error is sticky in ex.err
	return ex.buf
}

// bigElement appends a list, set, zset or hash element too big to escape
// whole (element's layout, the strings in pieces), without the separator.
func (ex *exporter) bigElement(el *rdb.Element) {
	switch el.Kind {
	case rdb.ZSetMember:
		ex.buf = append(ex.buf, `{"member":`...)
		ex.appendString(el.Member)
		ex.buf = append(ex.buf, `,"score":`...)
		ex.buf = appendFloat(ex.buf, el.Score)
		ex.buf = append(ex.buf, '}')
	case rdb.HashField:
		ex.buf = append(ex.buf, `{"field":`...)
		ex.appendString(el.Member)
		ex.buf = append(ex.buf, `,"value":`...)
		ex.appendString(el.Value)
		if el.ExpireAt != 0 {
			ex.buf = append(ex.buf, `,"expire_at_ms":`...)
			ex.buf = strconv.AppendInt(ex.buf, el.ExpireAt, 10)
		}
		ex.buf = append(ex.buf, '}')
	default: // list item, set member, module string
		ex.appendString(el.Member)
	}
}

// observe passes el to the estimator (MinSize) and the script hook.
func (ex *exporter) observe(el *rdb.Element) {
	if ex.in.estimating() {
		ex.in.estimateElement(el)
	}
	if ex.onElement != nil {
		ex.onElement(el)
	}
}

func (ex *exporter) maybeFlush() error {
	if len(ex.buf) < flushAt || ex.hold {
		return nil
	}
	ex.flush()
	return ex.err
}

// streamWriter writes a stream value. Entries are written as they come;
// consumer groups are gathered (copied) because a pending entry's owner is
// only known once the group's consumers have been read. Streams are rare
// in a snapshot, so these copies do not matter.
type streamWriter struct {
	enc      rdb.Encoding
	infoDone bool
	group    *streamGroup
	groups   int
}

type streamGroup struct {
	name        []byte
	lastID      rdb.StreamID
	entriesRead int64
	pending     []streamPending
	byID        map[rdb.StreamID]int
	consumers   []streamConsumer
}

type streamPending struct {
	id       rdb.StreamID
	time     int64
	count    uint64
	consumer []byte
}

type streamConsumer struct {
	name         []byte
	seen, active int64
	pending      []rdb.StreamID
}

func (s *streamWriter) reset(enc rdb.Encoding) {
	*s = streamWriter{enc: enc}
}

func appendID(b []byte, id rdb.StreamID) []byte {
	b = append(b, '"')
	b = id.AppendTo(b)
	return append(b, '"')
}

func (s *streamWriter) element(b []byte, el *rdb.Element, n *int64) []byte {
	switch el.Kind {
	case rdb.StreamEntry:
		if *n > 0 {
			b = append(b, ',')
		}
		*n++
		b = append(b, `{"id":`...)
		b = appendID(b, el.ID)
		b = append(b, `,"fields":[`...)
		for i := 0; i+1 < len(el.Fields); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = appendString(b, el.Fields[i])
			b = append(b, ',')
			b = appendString(b, el.Fields[i+1])
			b = append(b, ']')
		}
		b = append(b, "]}"...)
	case rdb.StreamInfo:
		b = s.info(b, &el.Stream)
	case rdb.StreamGroup:
		b = s.flushGroup(b)
		s.group = &streamGroup{name: bytes.Clone(el.Member), lastID: el.ID, entriesRead: el.Stream.EntriesRead, byID: map[rdb.StreamID]int{}}
	case rdb.StreamPending:
		if g := s.group; g != nil {
			g.byID[el.ID] = len(g.pending)
			g.pending = append(g.pending, streamPending{id: el.ID, time: el.DeliveryTime, count: el.DeliveryCount})
		}
	case rdb.StreamConsumer:
		if g := s.group; g != nil {
			g.consumers = append(g.consumers, streamConsumer{name: bytes.Clone(el.Member), seen: el.SeenTime, active: el.ActiveTime})
		}
	case rdb.StreamConsumerPending:
		if g := s.group; g != nil && len(g.consumers) > 0 {
			c := &g.consumers[len(g.consumers)-1]
			c.pending = append(c.pending, el.ID)
			if i, ok := g.byID[el.ID]; ok {
				g.pending[i].consumer = c.name
			}
		}
	}
	return b
}

// info closes the entries array and writes the stream-wide fields.
func (s *streamWriter) info(b []byte, m *rdb.StreamMeta) []byte {
	if s.infoDone {
		return b
	}
	s.infoDone = true
	b = append(b, `],"length":`...)
	b = strconv.AppendUint(b, m.Length, 10)
	b = append(b, `,"last_id":`...)
	b = appendID(b, m.LastID)
	if s.enc != rdb.EncStreamListpacks { // fields RDB 10+ records
		b = append(b, `,"entries_added":`...)
		b = strconv.AppendUint(b, m.EntriesAdded, 10)
		b = append(b, `,"max_deleted_entry_id":`...)
		b = appendID(b, m.MaxDeletedID)
		b = append(b, `,"first_id":`...)
		b = appendID(b, m.FirstID)
	}
	return append(b, `,"groups":[`...)
}

func (s *streamWriter) flushGroup(b []byte) []byte {
	g := s.group
	if g == nil {
		return b
	}
	s.group = nil
	if s.groups > 0 {
		b = append(b, ',')
	}
	s.groups++
	b = append(b, `{"name":`...)
	b = appendString(b, g.name)
	b = append(b, `,"last_delivered_id":`...)
	b = appendID(b, g.lastID)
	if s.enc != rdb.EncStreamListpacks {
		b = append(b, `,"entries_read":`...)
		if g.entriesRead >= 0 {
			b = strconv.AppendInt(b, g.entriesRead, 10)
		} else {
			b = append(b, "null"...)
		}
	}
	b = append(b, `,"pending":[`...)
	for i, p := range g.pending {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendID(b, p.id)
		b = append(b, `,"consumer":`...)
		b = appendString(b, p.consumer)
		b = append(b, `,"delivery_time_ms":`...)
		b = strconv.AppendInt(b, p.time, 10)
		b = append(b, `,"delivery_count":`...)
		b = strconv.AppendUint(b, p.count, 10)
		b = append(b, '}')
	}
	b = append(b, `],"consumers":[`...)
	for i, c := range g.consumers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, c.name)
		b = append(b, `,"seen_time_ms":`...)
		b = strconv.AppendInt(b, c.seen, 10)
		// Streams 3+ store the active time (-1 = never active); older
		// encodings do not, and the parser reports -1 for those too.
		if s.enc == rdb.EncStreamListpacks3 || s.enc == rdb.EncStreamListpacks4 {
			b = append(b, `,"active_time_ms":`...)
			b = strconv.AppendInt(b, c.active, 10)
		}
		b = append(b, `,"pending":[`...)
		for j, id := range c.pending {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendID(b, id)
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

// finish closes the stream value after the last element.
func (s *streamWriter) finish(b []byte) []byte {
	if !s.infoDone {
		b = s.info(b, &rdb.StreamMeta{})
	}
	b = s.flushGroup(b)
	return append(b, "]}"...)
}
