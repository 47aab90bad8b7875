package rdb

import (
	"encoding/binary"
	"errors"
	"io"
)

// reader is a window over the input: buf[pos:end] is read but not consumed.
// With a source (src != nil) it refills by compacting (moving the unconsumed
// tail to the front) before it grows, and grows only by doubling while bytes
// actually arrive, so a length field can never make it allocate more than
// twice the bytes the file really holds. Without a source, buf is the whole
// input (a memory map or a byte slice) and nothing is ever copied.
//
// Slices returned by read point into buf and are valid until the next call
// that may refill (read, skip, readByte... when the window is exhausted).
type reader struct {
	src  io.Reader // nil: buf is the whole input
	buf  []byte
	pos  int   // next byte to consume; invariant 0 <= pos <= end <= len(buf)
	end  int   // end of valid data in buf
	base int64 // file offset of buf[0]
	err  error // sticky error from src (io.EOF included)

	initSize int

	// CRC64 of every consumed byte is kept current lazily: crc covers the
	// file up to offset base+crcPos. Bytes are summed before they are
	// dropped by compaction or skipping. crcOff stops the summing.
	crcOn  bool
	crc    uint64
	crcPos int
	worker *crcWorker // sums in the background (crcworker.go); nil: inline

	// Streaming input with a helper: the window alternates between buf and
	// spare. pendSpare chunks handed to the helper from spare (or from
	// buffers dropped by growth) and pendBuf from buf are not yet
	// acknowledged; acks arrive in order, spare's first. REQUIRES before
	// refilling into spare: pendSpare == 0.
	spare              []byte
	pendSpare, pendBuf int
	onWorker           func(*crcWorker) // called when a streaming helper starts

	// A slice of buf that must outlive refills (the current key): while
	// pinLive, the first refill copies *pinned into *pinBuf and repoints it.
	// Keys are thus copied only when their value spans a refill.
	pinned, pinBuf *[]byte
	pinLive        bool
}

// savePin moves the pinned slice out of the window before it is reused.
func (r *reader) savePin() {
	*r.pinBuf = append((*r.pinBuf)[:0], *r.pinned...)
	*r.pinned = *r.pinBuf
	r.pinLive = false
}

func (r *reader) offset() int64 { return r.base + int64(r.pos) }

// static reports whether the input is entirely in memory (slices never move).
func (r *reader) static() bool { return r.src == nil }

// remaining returns how many bytes are left for a static input, or -1.
func (r *reader) remaining() int64 {
	if r.src == nil {
		return int64(r.end - r.pos)
	}
	return -1
}

// sumCRC brings the CRC up to buf[:i].
func (r *reader) sumCRC(i int) {
	if i <= r.crcPos {
		return
	}
	switch {
	case r.worker != nil:
		r.worker.add(r.buf[r.crcPos:i])
		if r.src != nil {
			r.pendBuf++
		}
	case r.crcOn:
		r.crc = crc64Update(r.crc, r.buf[r.crcPos:i])
	}
	r.crcPos = i
}

// crcProgress returns how much of a static input has been summed (the
// helper may lag behind crcPos).
func (r *reader) crcProgress() int {
	if r.worker != nil {
		return int(r.worker.progress.Load())
	}
	return r.crcPos
}

// finishCRC sums up to buf[:i], stops the helper and returns the CRC.
func (r *reader) finishCRC(i int) uint64 {
	r.sumCRC(i)
	if r.worker != nil {
		r.crc = r.worker.stop()
		r.worker = nil
	}
	r.crcOn = false
	return r.crc
}

// errTruncatedAt is what running out of input means; a real read error from
// the source is reported instead when there is one.
func (r *reader) eofErr() error {
	if r.err != nil && r.err != io.EOF {
		return r.err
	}
	return ErrTruncated
}

// drop discards everything consumed so far, keeping buf[pos:end].
func (r *reader) drop() {
	if r.pos == 0 {
		return
	}
	if r.pinLive {
		r.savePin()
	}
	if r.worker == nil && r.crcOn && r.onWorker != nil {
		// The input outgrew the first window: sum the rest in the background.
		r.worker = startCRCWorker(r.crc, true)
		r.onWorker(r.worker)
	}
	r.sumCRC(r.pos)
	if r.worker == nil {
		n := copy(r.buf, r.buf[r.pos:r.end])
		r.base += int64(r.pos)
		r.end, r.pos, r.crcPos = n, 0, 0
		return
	}
	// buf's consumed bytes are with the helper: move the unconsumed tail
	// to the other buffer once the helper is done with it.
	for ; r.pendSpare > 0; r.pendSpare-- {
		<-r.worker.acks
	}
	if cap(r.spare) < len(r.buf) {
		r.spare = make([]byte, len(r.buf))
	}
	next := r.spare[:len(r.buf)]
	n := copy(next, r.buf[r.pos:r.end])
	r.spare, r.buf = r.buf, next
	r.pendSpare, r.pendBuf = r.pendBuf, 0
	r.base += int64(r.pos)
	r.end, r.pos, r.crcPos = n, 0, 0
}

// abandonBuf is called when buf is replaced by a new array: its chunks in
// flight are counted with spare's, so spare is reused only after them.
func (r *reader) abandonBuf() {
	r.pendSpare += r.pendBuf
	r.pendBuf = 0
}

// growTo replaces buf by an array of n bytes holding buf[:end].
func (r *reader) growTo(n int) {
	nb := make([]byte, n)
	copy(nb, r.buf[:r.end])
	r.buf = nb
	r.abandonBuf()
}

// readMore reads once from src into buf[end:], growing buf if it is full:
// doubled (only data that arrived grows it, never a length the input
// declares), but to no more than need bytes when need is larger than buf:
// a window doubled past need made a 158 MB compressed value take 256 MiB.
func (r *reader) readMore(need int) error {
	if r.err != nil {
		return r.eofErr()
	}
	if r.end == len(r.buf) {
		size := max(2*len(r.buf), r.initSize)
		if need > len(r.buf) && size > need && need > maxRetainedBuffer {
			size = need
		}
		r.growTo(size)
	}
	for tries := 0; ; tries++ {
		m, err := r.src.Read(r.buf[r.end:])
		if m < 0 || m > len(r.buf)-r.end {
			r.err = errors.New("rdb: source returned an invalid count")
			return r.err
		}
		r.end += m
		if err != nil {
			r.err = err
			if m > 0 {
				return nil
			}
			return r.eofErr()
		}
		if m > 0 {
			return nil
		}
		if tries >= 100 {
			r.err = io.ErrNoProgress
			return r.err
		}
	}
}

// fill makes at least n bytes available at buf[pos:].
func (r *reader) fill(n int) error {
	if r.end-r.pos >= n {
		return nil
	}
	if r.src == nil {
		return ErrTruncated
	}
	r.drop()
	for r.end < n {
		if err := r.readMore(n); err != nil {
			return err
		}
	}
	return nil
}

func (r *reader) readByte() (byte, error) {
	if p := r.pos; p < r.end { // fast path, kept small enough to inline
		r.pos = p + 1
		return r.buf[p], nil
	}
	return r.readByteSlow()
}

func (r *reader) readByteSlow() (byte, error) {
	if err := r.fill(1); err != nil {
		return 0, err
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

// read consumes n bytes and returns them as a window slice.
func (r *reader) read(n int) ([]byte, error) {
	p := r.pos
	if r.end-p < n {
		return r.readSlow(n)
	}
	r.pos = p + n
	return r.buf[p : p+n : p+n], nil
}

func (r *reader) readSlow(n int) ([]byte, error) {
	if err := r.fill(n); err != nil {
		return nil, err
	}
	b := r.buf[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return b, nil
}

func (r *reader) uint32LE() (uint32, error) {
	b, err := r.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) uint64LE() (uint64, error) {
	b, err := r.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// skip consumes n bytes without keeping them: the window never grows for a
// skipped value, whatever its size.
func (r *reader) skip(n int64) error {
	if n < 0 {
		return ErrMalformed
	}
	for {
		avail := int64(r.end - r.pos)
		if n <= avail {
			r.pos += int(n)
			return nil
		}
		if r.src == nil {
			r.pos = r.end
			return ErrTruncated
		}
		n -= avail
		r.pos = r.end
		r.drop()
		if err := r.readMore(0); err != nil {
			return err
		}
	}
}

// shrink releases an oversized window once a large value has been consumed.
func (r *reader) shrink() {
	if len(r.buf) > maxRetainedBuffer && r.src != nil {
		r.shrinkSlow()
	}
}

func (r *reader) shrinkSlow() {
	if r.end-r.pos > r.initSize {
		return
	}
	r.sumCRC(r.pos)
	nb := make([]byte, r.initSize)
	n := copy(nb, r.buf[r.pos:r.end])
	r.base += int64(r.pos)
	r.buf, r.pos, r.end, r.crcPos = nb, 0, n, 0
	r.abandonBuf()
	if len(r.spare) > maxRetainedBuffer {
		r.spare = nil // a new one is made at the next refill; in-flight chunks keep theirs alive
	}
}
