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

	"golang.org/x/sys/unix"

	"github.com/sluicedb/sluice/rdb"
)

// Parallel export: the parse loop and the JSON writing run on two cores.
//
// The parser's bytes are borrowed (valid only until the next element), so
// the parsing goroutine copies what the JSON needs into a "tape" of ops,
// which a writer goroutine turns into JSON. The tape keeps the expensive
// parts (string escaping, float formatting) for the writer; the parsing
// side only copies bytes and fixed JSON punctuation:
//
//	opRaw   u32 n, n bytes      copied to the output as they are
//	opStr   u32 n, n bytes      a Redis string, written as JSON (appendString)
//	opFloat 8 bytes             a float64 (little endian), written by appendFloat
//
// Tapes are cut at any op boundary once they hold tapeSize bytes and cycle
// between the two goroutines through channels (tapeCount of them), so
// memory stays bounded by tapeCount * tapeSize plus the largest value.
const (
	opRaw byte = iota + 1
	opStr
	opFloat

	tapeSize  = 128 << 10
	tapeCount = 4
)

// tape is one buffer of ops. rawAt is the offset of the open opRaw's length
// field (raw bytes are appended to it until another op closes it), -1 if
// none is open.
type tape struct {
	b     []byte
	rawAt int
}

func (t *tape) reset() { t.b, t.rawAt = t.b[:0], -1 }

func (t *tape) openRaw() {
	if t.rawAt < 0 {
		t.b = append(t.b, opRaw, 0, 0, 0, 0)
		t.rawAt = len(t.b) - 4
	}
}

func (t *tape) closeRaw() {
	if t.rawAt >= 0 {
		binary.LittleEndian.PutUint32(t.b[t.rawAt:], uint32(len(t.b)-t.rawAt-4))
		t.rawAt = -1
	}
}

func (t *tape) raw(s string) {
	t.openRaw()
	t.b = append(t.b, s...)
}

func (t *tape) rawBytes(s []byte) {
	t.openRaw()
	t.b = append(t.b, s...)
}

func (t *tape) int(v int64) {
	t.openRaw()
	t.b = strconv.AppendInt(t.b, v, 10)
}

func (t *tape) str(s []byte) {
	t.closeRaw()
	t.b = append(t.b, opStr, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(t.b[len(t.b)-4:], uint32(len(s)))
	t.b = append(t.b, s...)
}

func (t *tape) float(f float64) {
	t.closeRaw()
	t.b = append(t.b, opFloat)
	t.b = binary.LittleEndian.AppendUint64(t.b, math.Float64bits(f))
}

// writeTape appends the JSON the tape's ops describe to out.
func writeTape(out, b []byte) []byte {
	for len(b) > 0 {
		op := b[0]
		if op == opFloat {
			out = appendFloat(out, math.Float64frombits(binary.LittleEndian.Uint64(b[1:9])))
			b = b[9:]
			continue
		}
		n := int(binary.LittleEndian.Uint32(b[1:5]))
		payload := b[5 : 5+n]
		if op == opRaw {
			out = append(out, payload...)
		} else {
			out = appendString(out, payload)
		}
		b = b[5+n:]
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
	n      int64 // elements of the current value
	visit  func(*rdb.Element) error
	// streams and modules (rare) are built as JSON by a sequential exporter
	// and go on the tape as raw bytes.
	seq *exporter
}

// stageCPU, when not nil (set by the benchmark child only), makes
// exportParallel pin each of its two goroutines to an OS thread and record
// the CPU time of that thread: [0] the parsing side, [1] the writer. With
// two idle cores the export could not run faster than the larger of the two.
var stageCPU *[2]time.Duration

// threadCPU is the CPU time of the calling OS thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

func exportParallel(ctx context.Context, in *input, w io.Writer, format Format) (int64, error) {
	if stageCPU != nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		defer func() { stageCPU[0] = threadCPU() - start }()
	}
	px := &parallelExporter{
		format: format,
		full:   make(chan *tape, tapeCount),
		free:   make(chan *tape, tapeCount),
		done:   make(chan struct{}),
		seq:    newExporter(io.Discard, JSON),
	}
	px.seq.hold = true
	for i := 0; i < tapeCount; i++ {
		px.free <- &tape{b: make([]byte, 0, tapeSize+64<<10), rawAt: -1}
	}
	px.visit = px.element
	go px.writer(w)

	px.t = <-px.free
	if format == JSON {
		px.t.raw("[\n")
	}
	var n int
	var err error
	for err == nil && in.next(ctx, &n) {
		err = px.record(in, in.p.Entry())
	}
	if format == JSON {
		if px.keys > 0 {
			px.t.raw("\n")
		}
		px.t.raw("]\n")
	}
	px.send()
	close(px.full)
	<-px.done
	if px.werr != nil {
		in.finish(ctx, nil)
		return px.keys, fmt.Errorf("rdbtool: write: %w", px.werr)
	}
	return px.keys, in.finish(ctx, err)
}

// writer turns tapes into JSON and writes it, until full is closed. After a
// write error it keeps draining (so the parser is never blocked) and the
// parsing side sees the error at its next tape.
func (px *parallelExporter) writer(w io.Writer) {
	defer close(px.done)
	if stageCPU != nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		defer func() { stageCPU[1] = threadCPU() - start }()
	}
	out := make([]byte, 0, flushAt+64<<10)
	for t := range px.full {
		if px.werr == nil {
			out = writeTape(out, t.b)
			if len(out) >= flushAt {
				_, px.werr = w.Write(out)
				out = out[:0]
				if px.werr != nil {
					px.failed.Store(true)
				}
			}
		}
		t.reset()
		px.free <- t
	}
	if px.werr == nil && len(out) > 0 {
		_, px.werr = w.Write(out)
	}
}

// send hands the current tape to the writer.
func (px *parallelExporter) send() {
	px.t.closeRaw()
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

func (px *parallelExporter) record(in *input, e *rdb.Entry) error {
	t := px.t
	if px.keys > 0 && px.format == JSON {
		t.raw(",\n")
	}
	px.keys++
	if e.Type == rdb.Stream || e.Type == rdb.Module {
		px.seq.buf, px.seq.keys = px.seq.buf[:0], 0
		if err := px.seq.build(in, e, true); err != nil {
			return err
		}
		t.rawBytes(px.seq.buf)
	} else {
		t.raw(`{"db":`)
		t.int(int64(e.DB))
		t.raw(`,"key":`)
		t.str(e.Key)
		t.raw(`,"type":"`)
		t.raw(e.Type.String())
		t.raw(`","expire_at_ms":`)
		if e.ExpireAt != 0 {
			t.int(e.ExpireAt)
		} else {
			t.raw("null")
		}
		t.raw(`,"value":`)
		if e.Type == rdb.String {
			v, err := in.p.Value()
			if err != nil {
				return err
			}
			t.str(v)
		} else {
			t.raw("[")
			px.n = 0
			if err := in.p.Visit(px.visit); err != nil {
				return err
			}
			px.t.raw("]")
		}
		px.t.raw("}")
	}
	if px.format == JSONLines {
		px.t.raw("\n")
	}
	return px.maybeSend()
}

// element puts one list, set, zset or hash element on the tape.
func (px *parallelExporter) element(el *rdb.Element) error {
	t := px.t
	if px.n > 0 {
		t.raw(",")
	}
	px.n++
	switch el.Kind {
	case rdb.ListItem, rdb.SetMember:
		t.str(el.Member)
	case rdb.ZSetMember:
		t.raw(`{"member":`)
		t.str(el.Member)
		t.raw(`,"score":`)
		t.float(el.Score)
		t.raw("}")
	case rdb.HashField:
		t.raw(`{"field":`)
		t.str(el.Member)
		t.raw(`,"value":`)
		t.str(el.Value)
		if el.ExpireAt != 0 {
			t.raw(`,"expire_at_ms":`)
			t.int(el.ExpireAt)
		}
		t.raw("}")
	}
	// A huge value is handed over in pieces: the writer does not care
	// where a tape ends.
	return px.maybeSend()
}
