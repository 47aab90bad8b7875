package table

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/cockroachdb/pebble"
	"github.com/klauspost/compress/zstd"
)

// A block whose text values reach hugeBlockBytes (one RDB value of 200 MB,
// say) is written without the two copies encodeBlock and compressBlock
// make: its payload is never built, the values go from the columns
// straight into a streaming zstd encoder, and the compressed block is
// written straight into the Pebble batch. The encoder runs twice, once to
// learn the compressed size (the batch entry is sized before it is filled)
// and once into the batch: CPU traded for the payload (the value's size)
// and the compressed copy (up to it) that the batch would copy again.
// Smaller blocks keep the one-pass path, which is faster.
const hugeBlockBytes = 16 << 20

// textBytes is the size of the string and JSON values of rows idx of cols.
func textBytes(cols []colData, idx []int) int {
	n := 0
	for _, c := range cols {
		if c.typ != String && c.typ != JSON {
			continue
		}
		for _, r := range idx {
			if !c.null[r] {
				n += len(c.vals[r].s)
			}
		}
	}
	return n
}

// writePayload writes to w the payload encodeBlock would append, without
// building it: the bytes of string and JSON values of 4 KiB or more go
// from the columns to w as they are.
func writePayload(w io.Writer, cols []colData, idx []int) error {
	var buf, vals []byte
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	buf = binary.AppendUvarint(buf, uint64(len(idx)))
	buf = binary.AppendUvarint(buf, uint64(len(cols)))
	for _, c := range cols {
		buf = appendColumnHead(buf, c, idx)
		if c.typ != String && c.typ != JSON {
			vals = encodeValues(vals[:0], c, idx)
			buf = binary.AppendUvarint(buf, uint64(len(vals)))
			buf = append(buf, vals...)
			continue
		}
		size := 0
		for _, r := range idx {
			if !c.null[r] {
				l := len(c.vals[r].s)
				size += uvarintLen(uint64(l)) + l
			}
		}
		buf = binary.AppendUvarint(buf, uint64(size))
		for _, r := range idx {
			if !c.null[r] {
				buf = binary.AppendUvarint(buf, uint64(len(c.vals[r].s)))
			}
		}
		for _, r := range idx {
			if c.null[r] {
				continue
			}
			s := c.vals[r].s
			if len(s) < 4096 {
				buf = append(buf, s...)
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			// Read only: the encoder does not write to its input.
			if _, err := w.Write(unsafe.Slice(unsafe.StringData(s), len(s))); err != nil {
				return err
			}
		}
	}
	return flush()
}

// countWriter counts the bytes written to it.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// fixedWriter writes into buf, which it must fill exactly.
type fixedWriter struct {
	buf []byte
	n   int
}

var errBlockSize = errors.New("table: a huge block compressed to another size the second time")

func (w *fixedWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, errBlockSize
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}

// newBlockEncoder is the streaming encoder of huge blocks: blockEncoders'
// settings, but literals are entropy coded when a block has no matches
// (SpeedFastest skips that): text without repeats, such as a hex or base64
// value, then shrinks by about half (200 MiB of random hex: 209 MB →
// 105 MB) at about the same speed, and so does every copy Pebble makes
// of the block (its batch, the memtable flush's sstable block).
func newBlockEncoder() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithAllLitEntropyCompression(true), zstd.WithEncoderConcurrency(1))
}

// setHugeBlock sets key to the block value of rows idx of cols in b (the
// value compressBlock would make, zstd unless it does not shrink),
// compressing the payload from the columns straight into the batch. It
// returns the value's length.
func setHugeBlock(b *pebble.Batch, key []byte, cols []colData, idx []int) (int, error) {
	var size countWriter
	if err := writePayload(&size, cols, idx); err != nil {
		return 0, err
	}
	enc, err := newBlockEncoder()
	if err != nil {
		return 0, err
	}
	compress := func(w io.Writer) error {
		enc.ResetContentSize(w, size.n) // the decoder sizes its output once
		if err := writePayload(enc, cols, idx); err != nil {
			return err
		}
		return enc.Close()
	}
	var packed countWriter
	if err := compress(&packed); err != nil {
		return 0, fmt.Errorf("table: compress a block: %w", err)
	}
	codec, n := byte(codecZstd), packed.n
	if n >= size.n {
		codec, n = codecNone, size.n
	}
	op := b.SetDeferred(len(key), 2+int(n))
	copy(op.Key, key)
	op.Value[0], op.Value[1] = blockVersion, codec
	w := &fixedWriter{buf: op.Value[2:]}
	if codec == codecZstd {
		err = compress(w)
	} else {
		err = writePayload(w, cols, idx)
	}
	if err == nil && w.n != len(w.buf) {
		err = errBlockSize
	}
	if err != nil {
		// The entry is in the batch, unfilled: the caller drops the batch
		// (an error of writeBlocks stores nothing).
		return 0, fmt.Errorf("table: write a block: %w", err)
	}
	if err := op.Finish(); err != nil {
		return 0, err
	}
	return 2 + int(n), nil
}
