package rdb

import (
	"encoding/binary"
	"errors"
)

// In-memory walkers for the packed encodings that Redis stores as one RDB
// string: ziplist, listpack, intset, zipmap. They work on a byte slice that
// is already fully read, check every length against it, and never allocate.

var (
	errZiplist = errors.New("malformed ziplist")
	errListpck = errors.New("malformed listpack")
	errIntset  = errors.New("malformed intset")
	errZipmap  = errors.New("malformed zipmap")
)

// packedIter yields the entries of a ziplist or listpack: either a string
// (isInt false, s set) or an integer (isInt true, v set).
type packedIter struct {
	b     []byte
	pos   int
	lp    bool // listpack rather than ziplist
	s     []byte
	v     int64
	isInt bool
}

func newZiplistIter(b []byte) (packedIter, error) {
	// zlbytes(4) zltail(4) zllen(2) entries... 0xFF
	if len(b) < 11 || int(binary.LittleEndian.Uint32(b)) != len(b) || b[len(b)-1] != 0xFF {
		return packedIter{}, errZiplist
	}
	return packedIter{b: b, pos: 10}, nil
}

func newListpackIter(b []byte) (packedIter, error) {
	// total(4) count(2) entries... 0xFF
	if len(b) < 7 || int(binary.LittleEndian.Uint32(b)) != len(b) || b[len(b)-1] != 0xFF {
		return packedIter{}, errListpck
	}
	return packedIter{b: b, pos: 6, lp: true}, nil
}

// next advances to the next entry; it returns false at the end marker.
func (it *packedIter) next() (bool, error) {
	// Fast path for the two commonest listpack entries: a 7-bit integer and
	// a string under 64 bytes, both with a 1-byte backlen, ending before the
	// end marker.
	if b, pos := it.b, it.pos; it.lp && pos+2 < len(b) {
		switch enc := b[pos]; {
		case enc < 0x80:
			it.isInt, it.v, it.pos = true, int64(enc), pos+2
			return true, nil
		case enc&0xC0 == 0x80:
			if n := int(enc & 0x3f); pos+2+n < len(b) {
				it.isInt, it.s, it.pos = false, b[pos+1:pos+1+n:pos+1+n], pos+2+n
				return true, nil
			}
		}
	}
	if it.pos >= len(it.b) {
		return false, it.malformed()
	}
	if it.b[it.pos] == 0xFF {
		if it.pos != len(it.b)-1 {
			return false, it.malformed()
		}
		return false, nil
	}
	if it.lp {
		return true, it.nextListpack()
	}
	return true, it.nextZiplist()
}

func (it *packedIter) malformed() error {
	if it.lp {
		return errListpck
	}
	return errZiplist
}

// take returns n bytes at pos, or nil if they run past the end marker.
func (it *packedIter) take(n int) []byte {
	// The last byte is the end marker, which no entry may overlap.
	if n < 0 || n > len(it.b)-1-it.pos {
		return nil
	}
	s := it.b[it.pos : it.pos+n]
	it.pos += n
	return s
}

func (it *packedIter) nextZiplist() error {
	b := it.b
	// prevlen: 1 byte, or 0xFE and 4 bytes.
	if b[it.pos] == 0xFE {
		if it.take(5) == nil {
			return errZiplist
		}
	} else {
		it.pos++
	}
	h := it.take(1)
	if h == nil {
		return errZiplist
	}
	enc := h[0]
	it.isInt = false
	var n int
	switch enc >> 6 {
	case 0:
		n = int(enc & 0x3f)
	case 1:
		c := it.take(1)
		if c == nil {
			return errZiplist
		}
		n = int(enc&0x3f)<<8 | int(c[0])
	case 2:
		if enc != 0x80 {
			return errZiplist
		}
		c := it.take(4)
		if c == nil {
			return errZiplist
		}
		n = int(binary.BigEndian.Uint32(c))
	default:
		it.isInt = true
		var d []byte
		switch enc {
		case 0xC0:
			if d = it.take(2); d != nil {
				it.v = int64(int16(binary.LittleEndian.Uint16(d)))
			}
		case 0xD0:
			if d = it.take(4); d != nil {
				it.v = int64(int32(binary.LittleEndian.Uint32(d)))
			}
		case 0xE0:
			if d = it.take(8); d != nil {
				it.v = int64(binary.LittleEndian.Uint64(d))
			}
		case 0xF0:
			if d = it.take(3); d != nil {
				it.v = int64(int32(uint32(d[0])<<8|uint32(d[1])<<16|uint32(d[2])<<24) >> 8)
			}
		case 0xFE:
			if d = it.take(1); d != nil {
				it.v = int64(int8(d[0]))
			}
		default:
			if enc&0xF0 != 0xF0 {
				return errZiplist
			}
			imm := int64(enc & 0x0f)
			if imm < 1 || imm > 13 {
				return errZiplist
			}
			it.v = imm - 1
			return nil
		}
		if d == nil {
			return errZiplist
		}
		return nil
	}
	if it.s = it.take(n); it.s == nil {
		return errZiplist
	}
	return nil
}

func (it *packedIter) nextListpack() error {
	start := it.pos
	enc := it.b[it.pos]
	it.pos++
	it.isInt = true
	var d []byte
	switch {
	case enc&0x80 == 0: // 0xxxxxxx: 7-bit unsigned
		it.v = int64(enc)
	case enc&0xC0 == 0x80: // 10xxxxxx: string up to 63 bytes
		it.isInt = false
		if it.s = it.take(int(enc & 0x3f)); it.s == nil {
			return errListpck
		}
	case enc&0xE0 == 0xC0: // 110xxxxx yyyyyyyy: 13-bit signed
		if d = it.take(1); d == nil {
			return errListpck
		}
		u := uint16(enc&0x1f)<<8 | uint16(d[0])
		it.v = int64(int16(u<<3) >> 3)
	case enc&0xF0 == 0xE0: // 1110xxxx yyyyyyyy: string up to 4095 bytes
		if d = it.take(1); d == nil {
			return errListpck
		}
		it.isInt = false
		if it.s = it.take(int(enc&0x0f)<<8 | int(d[0])); it.s == nil {
			return errListpck
		}
	case enc == 0xF0: // 32-bit string length
		if d = it.take(4); d == nil {
			return errListpck
		}
		it.isInt = false
		n := binary.LittleEndian.Uint32(d)
		if n > uint32(len(it.b)) {
			return errListpck
		}
		if it.s = it.take(int(n)); it.s == nil {
			return errListpck
		}
	case enc == 0xF1:
		if d = it.take(2); d == nil {
			return errListpck
		}
		it.v = int64(int16(binary.LittleEndian.Uint16(d)))
	case enc == 0xF2:
		if d = it.take(3); d == nil {
			return errListpck
		}
		it.v = int64(int32(uint32(d[0])<<8|uint32(d[1])<<16|uint32(d[2])<<24) >> 8)
	case enc == 0xF3:
		if d = it.take(4); d == nil {
			return errListpck
		}
		it.v = int64(int32(binary.LittleEndian.Uint32(d)))
	case enc == 0xF4:
		if d = it.take(8); d == nil {
			return errListpck
		}
		it.v = int64(binary.LittleEndian.Uint64(d))
	default:
		return errListpck
	}
	// backlen: the entry's length (encoding + data) in 1..5 bytes.
	l := it.pos - start
	bl := 1
	switch {
	case l >= 268435455:
		bl = 5
	case l >= 2097151:
		bl = 4
	case l >= 16383:
		bl = 3
	case l > 127:
		bl = 2
	}
	if it.take(bl) == nil {
		return errListpck
	}
	return nil
}

// intsetIter yields the integers of an intset.
type intsetIter struct {
	b     []byte
	width int
	n, i  int
}

func newIntsetIter(b []byte) (intsetIter, error) {
	if len(b) < 8 {
		return intsetIter{}, errIntset
	}
	w := int(binary.LittleEndian.Uint32(b))
	n := binary.LittleEndian.Uint32(b[4:])
	if (w != 2 && w != 4 && w != 8) || uint64(n)*uint64(w) != uint64(len(b)-8) {
		return intsetIter{}, errIntset
	}
	return intsetIter{b: b[8:], width: w, n: int(n)}, nil
}

func (it *intsetIter) next() (int64, bool) {
	if it.i >= it.n {
		return 0, false
	}
	o := it.i * it.width
	it.i++
	switch it.width {
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(it.b[o:]))), true
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(it.b[o:]))), true
	default:
		return int64(binary.LittleEndian.Uint64(it.b[o:])), true
	}
}

// zipmapIter yields the field/value pairs of a zipmap (Redis < 2.6 hashes):
// zmlen(1), then [len field][len free value pad]... 0xFF.
type zipmapIter struct {
	b   []byte
	pos int
}

func newZipmapIter(b []byte) (zipmapIter, error) {
	if len(b) < 2 || b[len(b)-1] != 0xFF {
		return zipmapIter{}, errZipmap
	}
	return zipmapIter{b: b, pos: 1}, nil
}

func (it *zipmapIter) len() (int, bool) {
	if it.pos >= len(it.b) {
		return 0, false
	}
	c := it.b[it.pos]
	it.pos++
	switch {
	case c < 254:
		return int(c), true
	case c == 254:
		if len(it.b)-it.pos < 4 {
			return 0, false
		}
		n := binary.LittleEndian.Uint32(it.b[it.pos:])
		it.pos += 4
		if n > uint32(len(it.b)) {
			return 0, false
		}
		return int(n), true
	}
	return 0, false
}

func (it *zipmapIter) bytes(n int) ([]byte, bool) {
	if n > len(it.b)-1-it.pos {
		return nil, false
	}
	s := it.b[it.pos : it.pos+n]
	it.pos += n
	return s, true
}

// next returns the next pair; ok is false at the end, err on corruption.
func (it *zipmapIter) next() (field, value []byte, ok bool, err error) {
	if it.pos >= len(it.b) {
		return nil, nil, false, errZipmap
	}
	if it.b[it.pos] == 0xFF {
		if it.pos != len(it.b)-1 {
			return nil, nil, false, errZipmap
		}
		return nil, nil, false, nil
	}
	n, good := it.len()
	if !good {
		return nil, nil, false, errZipmap
	}
	if field, good = it.bytes(n); !good {
		return nil, nil, false, errZipmap
	}
	if n, good = it.len(); !good || it.pos >= len(it.b)-1 {
		return nil, nil, false, errZipmap
	}
	free := int(it.b[it.pos])
	it.pos++
	if value, good = it.bytes(n); !good {
		return nil, nil, false, errZipmap
	}
	if _, good = it.bytes(free); !good {
		return nil, nil, false, errZipmap
	}
	return field, value, true, nil
}
