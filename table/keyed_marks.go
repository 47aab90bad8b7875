package table

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// A dead-row mark is stored in one of two forms (the value of 0x04 | the
// block key after its 0x02):
//
//	bitmap := block rows u32                | ceil(rows/8) bytes, bit r set: row r is dead
//	list   := block rows u32, top bit set   | uvarint first dead row | uvarint gap to each next one
//
// In memory a mark is always the bitmap (newMark, setDead, isDead): the
// form is chosen when it is stored and undone when it is read (markBits).
// A skewed change stream kills one row in most of the blocks it touches
// (a key of the long tail was last written long ago, one row of its
// block). In a block of 1000 rows (a table with one partition, or a
// merged block of up to 8k) that bitmap is 129 bytes of zeros around one
// bit, more than the key's index entry and row together; its list is 5 or
// 6 bytes. Every byte goes into the write-ahead log, the memtable and each
// compaction of the marks' keys. (Blocks of a few dozen rows, a batch
// spread over many partitions, have bitmaps of a dozen bytes: there the
// two forms differ little.)
const markListed = 1 << 31

// maxListedRows bounds the rows a list-form mark may claim, so that a
// corrupt one cannot make a reader allocate a huge bitmap: a block holds
// far fewer rows (flushRows, the merge of a rewrite).
const maxListedRows = 1 << 24

// storeMark appends to dst the stored form of the bitmap mark: the list
// when it is shorter, else the bitmap itself.
func storeMark(dst, mark []byte) []byte {
	if len(mark) < markHeader {
		return append(dst, mark...)
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, binary.BigEndian.Uint32(mark)|markListed)
	prev := 0
	for i, b := range mark[markHeader:] {
		for b != 0 {
			r := i*8 + bits.TrailingZeros8(b)
			b &= b - 1
			dst = binary.AppendUvarint(dst, uint64(r-prev))
			prev = r
			if len(dst)-start >= len(mark) {
				return append(dst[:start], mark...) // the bitmap is no longer
			}
		}
	}
	return dst
}

// listedMark reports whether a stored mark is in the list form.
func listedMark(stored []byte) bool {
	return len(stored) >= markHeader && binary.BigEndian.Uint32(stored)&markListed != 0
}

// markBits returns the bitmap of a stored mark: the stored bytes
// themselves when they are one, else the list decoded into dst (reused:
// the result is valid until dst is written again).
func markBits(dst, stored []byte) ([]byte, error) {
	if len(stored) < markHeader {
		return stored, nil
	}
	if !listedMark(stored) {
		return stored, nil
	}
	rows := int(binary.BigEndian.Uint32(stored) &^ markListed)
	if rows > maxListedRows {
		return nil, fmt.Errorf("dead-row list of %d rows", rows)
	}
	n := markHeader + (rows+7)/8
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	clear(dst)
	binary.BigEndian.PutUint32(dst, uint32(rows))
	b, r := stored[markHeader:], 0
	for first := true; len(b) > 0; first = false {
		gap, k := binary.Uvarint(b)
		if k <= 0 || (gap == 0 && !first) || gap >= uint64(rows) {
			return nil, fmt.Errorf("dead-row list: bad gap at byte %d", len(stored)-len(b))
		}
		r += int(gap)
		if r >= rows {
			return nil, fmt.Errorf("dead-row list: row %d of a block of %d", r, rows)
		}
		dst[markHeader+r/8] |= 1 << (r % 8)
		b = b[k:]
	}
	return dst, nil
}
