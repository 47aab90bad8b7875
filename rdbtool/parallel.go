package rdbtool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/rdb"
)

// Parallel export: the parse loop and the JSON writing run on two cores.
//
// The parser's bytes are borrowed (valid only until the next element), so
// the parsing goroutine copies what the JSON needs into a "tape" of ops,
// which a writer goroutine turns into JSON. The parsing side only copies
// bytes and writes a few fixed-size fields per element; everything that
// costs (string escaping, number formatting, punctuation) is the writer's:
//
//	opRaw     u32 n, n bytes                   copied as they are
//	opKey     u8 type, u32 db, i64 expiry, u32 n, key
//	                                           {"db":..,"key":..,"type":..,"expire_at_ms":..,"value":
//	opString  u32 n, n bytes                   a string value, then "}"
//	opOpen                                     "[" (a collection value starts)
//	opItem    u32 n, n bytes                   list item or set member
//	opZMember u32 n, f64 score, n bytes        {"member":..,"score":..}
//	opHField  u32 nf, u32 nv, i64 expiry, field, value
//	                                           {"field":..,"value":..(,"expire_at_ms":..)}
//	opClose                                    "]}" (the collection and the record end)
//	opRecord  u32 n, n bytes                   a whole record as JSON (unused: see opRecStart)
//	opRecStart                                 the separator before a record sent as raw JSON
//	opRecEnd                                   what ends a record sent as raw JSON ("\n" in JSON Lines)
//	opEnd                                      "}" and the record's end, after a string value sent raw
//	opElem                                     the separator before an element sent raw
//
// Values whose JSON could be large are built on the parsing side by a
// sequential exporter (seq) that writes its buffer onto the tape in opRaw
// pieces as it grows (tapeSink), never whole: streams and modules (rare,
// with a layout of their own) and any string or element longer than
// bigString (escaped in pieces, see appendStringPieces). So no tape, and no
// buffer of the writer, ever holds more than a piece of one value.
//
// The writer adds the separators: ",\n" between records of a JSON array,
// "\n" after each JSON Lines record, "," between elements.
//
// Tapes are cut at any op boundary once they hold tapeSize bytes and cycle
// between the two goroutines through channels (tapeCount of them), so
// memory stays bounded by tapeCount * tapeSize plus the largest value.
const (
	opRaw byte = iota + 1
	opKey
	opString
	opOpen
	opItem
	opZMember
	opHField
	opClose
	opRecord
	opRecStart
	opRecEnd
	opEnd
	opElem

	tapeSize  = 128 << 10
	tapeCount = 4
)

// tape is one buffer of ops.
type tape struct{ b []byte }

func (t *tape) u32(v int) { t.b = binary.LittleEndian.AppendUint32(t.b, uint32(v)) }

func (t *tape) bytesOp(op byte, s []byte) {
	t.b = append(t.b, op)
	t.u32(len(s))
	t.b = append(t.b, s...)
}

// tapeWriter is the writer goroutine's state: where it is in the JSON.
type tapeWriter struct {
	format Format
	keys   int64 // records written so far
	first  bool  // no element written yet in the current collection
}

func le32(b []byte) int    { return int(binary.LittleEndian.Uint32(b)) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// recordStart writes the separator before a record.
func (tw *tapeWriter) recordStart(out []byte) []byte {
	if tw.keys > 0 && tw.format == JSON {
		out = append(out, ",\n"...)
	}
	tw.keys++
	return out
}

func (tw *tapeWriter) recordEnd(out []byte) []byte {
	if tw.format == JSONLines {
		out = append(out, '\n')
	}
	return out
}

func (tw *tapeWriter) elementStart(out []byte) []byte {
	if !tw.first {
		out = append(out, ',')
	}
	tw.first = false
	return out
}

// write appends the JSON the tape's ops describe to out.
func (tw *tapeWriter) write(out, b []byte) []byte {
	for len(b) > 0 {
		switch b[0] {
		case opRaw:
			n := le32(b[1:])
			out = append(out, b[5:5+n]...)
			b = b[5+n:]
		case opKey:
			typ := rdb.Type(b[1])
			db := le32(b[2:])
			exp := int64(le64(b[6:]))
			n := le32(b[14:])
			out = tw.recordStart(out)
			out = append(out, `{"db":`...)
			out = strconv.AppendInt(out, int64(db), 10)
			out = append(out, `,"key":`...)
			out = appendString(out, b[18:18+n])
			out = append(out, `,"type":"`...)
			out = append(out, typ.String()...)
			out = append(out, `","expire_at_ms":`...)
			if exp != 0 {
				out = strconv.AppendInt(out, exp, 10)
			} else {
				out = append(out, "null"...)
			}
			out = append(out, `,"value":`...)
			b = b[18+n:]
		case opString:
			n := le32(b[1:])
			out = appendString(out, b[5:5+n])
			out = append(out, '}')
			out = tw.recordEnd(out)
			b = b[5+n:]
		case opOpen:
			out = append(out, '[')
			tw.first = true
			b = b[1:]
		case opItem:
			n := le32(b[1:])
			out = tw.elementStart(out)
			out = appendString(out, b[5:5+n])
			b = b[5+n:]
		case opZMember:
			n := le32(b[1:])
			score := math.Float64frombits(le64(b[5:]))
			out = tw.elementStart(out)
			out = append(out, `{"member":`...)
			out = appendString(out, b[13:13+n])
			out = append(out, `,"score":`...)
			out = appendFloat(out, score)
			out = append(out, '}')
			b = b[13+n:]
		case opHField:
			nf, nv := le32(b[1:]), le32(b[5:])
			exp := int64(le64(b[9:]))
			f := b[17 : 17+nf]
			v := b[17+nf : 17+nf+nv]
			out = tw.elementStart(out)
			out = append(out, `{"field":`...)
			out = appendString(out, f)
			out = append(out, `,"value":`...)
			out = appendString(out, v)
			if exp != 0 {
				out = append(out, `,"expire_at_ms":`...)
				out = strconv.AppendInt(out, exp, 10)
			}
			out = append(out, '}')
			b = b[17+nf+nv:]
		case opClose:
			out = append(out, "]}"...)
			out = tw.recordEnd(out)
			b = b[1:]
		case opRecord:
			n := le32(b[1:])
			out = tw.recordStart(out)
			out = append(out, b[5:5+n]...)
			out = tw.recordEnd(out)
			b = b[5+n:]
		case opRecStart:
			out = tw.recordStart(out)
			b = b[1:]
		case opRecEnd:
			out = tw.recordEnd(out)
			b = b[1:]
		case opEnd:
			out = append(out, '}')
			out = tw.recordEnd(out)
			b = b[1:]
		case opElem:
			out = tw.elementStart(out)
			b = b[1:]
		default:
			panic(fmt.Sprintf("rdbtool: bad tape op %d", b[0])) // a bug in this file, not bad input
		}
	}
	return out
}

// parallelExporter is the parsing side.
type parallelExporter struct {
	format Format
	t      *tape
	full   chan *tape // to the writer
	free   chan *tape // back from the writer
	done   chan struct{}
	werr   error       // the writer's error, valid once done is closed
	failed atomic.Bool // set by the writer when werr is set, read by the parsing side
	keys   int64
	visit  func(*rdb.Element) error
	// streams and modules (rare) are built as JSON by a sequential exporter
	// and go on the tape as raw bytes.
	seq  *exporter
	sent int64 // tapes handed to the writer so far
	// stageCPU is Options.StageCPU.
	stageCPU *[2]time.Duration
}

func exportParallel(ctx context.Context, in *input, w io.Writer, format Format, stageCPU *[2]time.Duration) (int64, error) {
	if stageCPU != nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		defer func() { stageCPU[0] = threadCPU() - start }()
	}
	px := &parallelExporter{
		format:   format,
		full:     make(chan *tape, tapeCount),
		free:     make(chan *tape, tapeCount),
		done:     make(chan struct{}),
		seq:      newExporter(io.Discard, JSON),
		stageCPU: stageCPU,
	}
	px.seq.w = tapeSink{px}
	for i := 0; i < tapeCount; i++ {
		px.free <- &tape{b: make([]byte, 0, tapeSize+64<<10)}
	}
	px.visit = px.element
	go px.writer(w)

	px.t = <-px.free
	if format == JSON {
		px.t.bytesOp(opRaw, []byte("[\n"))
	}
	var n int
	var err error
	// Where the current record starts: at mark on the tape current after
	// markSent hand-overs (Visit may hand over tapes mid-value).
	var mark int
	var markSent int64
	for err == nil && in.next(ctx, &n) {
		mark, markSent = len(px.t.b), px.sent
		err = px.record(in, in.p.Entry())
	}
	recordCut := err != nil // else next stopped: the last record is whole
	// The parse's outcome (a truncated or corrupt file, a cancelled ctx)
	// decides how the output ends: the tapes hold copies, so the parser
	// can be closed while the writer still works.
	err = in.finish(ctx, err)
	switch {
	case err != nil:
		// Records completed before the error are written; the one cut
		// by it is dropped when it is still on the current tape (a value
		// larger than a tape may be half written already, like a cut
		// line), and a JSON array is left without its "]".
		if recordCut {
			px.keys--
			if markSent == px.sent {
				px.t.b = px.t.b[:mark]
			}
		}
	case format == JSON:
		end := "]\n"
		if px.keys > 0 {
			end = "\n]\n"
		}
		px.t.bytesOp(opRaw, []byte(end))
	}
	px.send()
	close(px.full)
	<-px.done
	if px.werr != nil {
		return px.keys, fmt.Errorf("rdbtool: write: %w", px.werr)
	}
	return px.keys, err
}

// writer turns tapes into JSON and writes it, until full is closed. After a
// write error it keeps draining (so the parser is never blocked) and the
// parsing side sees the error at its next tape.
func (px *parallelExporter) writer(w io.Writer) {
	defer close(px.done)
	if stageCPU := px.stageCPU; stageCPU != nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		defer func() { stageCPU[1] = threadCPU() - start }()
	}
	out := make([]byte, 0, flushAt+64<<10)
	tw := tapeWriter{format: px.format}
	for t := range px.full {
		if px.werr == nil {
			out = tw.write(out, t.b)
			if len(out) >= flushAt {
				_, px.werr = w.Write(out)
				out = out[:0]
				if px.werr != nil {
					px.failed.Store(true)
				}
			}
		}
		t.b = t.b[:0]
		px.free <- t
	}
	if px.werr == nil && len(out) > 0 {
		_, px.werr = w.Write(out)
	}
}

// send hands the current tape to the writer.
func (px *parallelExporter) send() {
	px.sent++
	px.full <- px.t
	px.t = nil
}

// maybeSend hands the tape over once it is big enough and takes a free one.
func (px *parallelExporter) maybeSend() error {
	if len(px.t.b) < tapeSize {
		return nil
	}
	px.send()
	px.t = <-px.free // the writer always hands tapes back, even after an error
	if px.failed.Load() {
		return errWriterFailed
	}
	return nil
}

// errWriterFailed stops the parse when the writer could not write; the
// writer's own error is what Export returns.
var errWriterFailed = errors.New("rdbtool: output failed")

// tapeSink is the io.Writer of the parsing side's sequential exporter: what
// it writes goes onto the tape as opRaw, handed over as tapes fill.
type tapeSink struct{ px *parallelExporter }

func (s tapeSink) Write(b []byte) (int, error) {
	s.px.t.bytesOp(opRaw, b)
	if err := s.px.maybeSend(); err != nil {
		return 0, err
	}
	return len(b), nil
}

// seqDone writes out what the sequential exporter still buffers and returns
// its error (a write error from tapeSink is sticky there).
func (px *parallelExporter) seqDone() error {
	px.seq.flush()
	return px.seq.err
}

func (px *parallelExporter) record(in *input, e *rdb.Entry) error {
	t := px.t
	px.keys++
	if e.Type == rdb.Stream || e.Type == rdb.Module {
		t.b = append(t.b, opRecStart)
		px.seq.buf, px.seq.keys = px.seq.buf[:0], 0
		if err := px.seq.build(in, e, false); err != nil {
			return err
		}
		if err := px.seqDone(); err != nil {
			return err
		}
		px.t.b = append(px.t.b, opRecEnd)
		return px.maybeSend()
	}
	t.b = append(t.b, opKey, byte(e.Type))
	t.u32(e.DB)
	t.b = binary.LittleEndian.AppendUint64(t.b, uint64(e.ExpireAt))
	t.u32(len(e.Key))
	t.b = append(t.b, e.Key...)
	if e.Type == rdb.String {
		v, err := in.p.Value()
		if err != nil {
			return err
		}
		if len(v) > bigString {
			px.seq.appendString(v)
			if err := px.seqDone(); err != nil {
				return err
			}
			px.t.b = append(px.t.b, opEnd)
			return px.maybeSend()
		}
		t.bytesOp(opString, v)
		return px.maybeSend()
	}
	t.b = append(t.b, opOpen)
	if err := in.p.Visit(px.visit); err != nil {
		return err
	}
	px.t.b = append(px.t.b, opClose) // px.t: Visit may have swapped tapes
	return px.maybeSend()
}

// element puts one list, set, zset or hash element on the tape.
func (px *parallelExporter) element(el *rdb.Element) error {
	t := px.t
	if len(el.Member)+len(el.Value) > bigString {
		t.b = append(t.b, opElem)
		px.seq.bigElement(el)
		return px.seqDone()
	}
	switch el.Kind {
	case rdb.ListItem, rdb.SetMember:
		t.bytesOp(opItem, el.Member)
	case rdb.ZSetMember:
		t.b = append(t.b, opZMember)
		t.u32(len(el.Member))
		t.b = binary.LittleEndian.AppendUint64(t.b, math.Float64bits(el.Score))
		t.b = append(t.b, el.Member...)
	case rdb.HashField:
		t.b = append(t.b, opHField)
		t.u32(len(el.Member))
		t.u32(len(el.Value))
		t.b = binary.LittleEndian.AppendUint64(t.b, uint64(el.ExpireAt))
		t.b = append(t.b, el.Member...)
		t.b = append(t.b, el.Value...)
	}
	// A huge value is handed over in pieces: the writer does not care
	// where a tape ends.
	return px.maybeSend()
}
