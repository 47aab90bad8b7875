package rdb

import (
	"encoding/binary"
	"math"
)

// rdbBuilder writes RDB bytes by hand for tests, following Redis's
// rdbSave* functions. Each method appends and returns the builder.
type rdbBuilder struct {
	b []byte
}

func newRDB(version int) *rdbBuilder {
	w := &rdbBuilder{}
	w.raw([]byte("REDIS"))
	w.raw([]byte{byte('0' + version/1000%10), byte('0' + version/100%10), byte('0' + version/10%10), byte('0' + version%10)})
	return w
}

func newValkeyRDB(version int) *rdbBuilder {
	w := &rdbBuilder{}
	w.raw([]byte("VALKEY"))
	w.raw([]byte{byte('0' + version/100%10), byte('0' + version/10%10), byte('0' + version%10)})
	return w
}

func (w *rdbBuilder) raw(b []byte) *rdbBuilder { w.b = append(w.b, b...); return w }
func (w *rdbBuilder) byte1(c byte) *rdbBuilder { w.b = append(w.b, c); return w }

// len writes n in the shortest RDB length form.
func (w *rdbBuilder) len(n uint64) *rdbBuilder {
	switch {
	case n < 1<<6:
		w.b = append(w.b, byte(n))
	case n < 1<<14:
		w.b = append(w.b, byte(n>>8)|0x40, byte(n))
	case n <= math.MaxUint32:
		w.b = append(w.b, 0x80)
		w.b = binary.BigEndian.AppendUint32(w.b, uint32(n))
	default:
		w.b = append(w.b, 0x81)
		w.b = binary.BigEndian.AppendUint64(w.b, n)
	}
	return w
}

func (w *rdbBuilder) str(s string) *rdbBuilder { w.len(uint64(len(s))); return w.raw([]byte(s)) }

// intStr writes an integer-encoded string (int8/16/32 by size).
func (w *rdbBuilder) intStr(v int32) *rdbBuilder {
	switch {
	case v >= math.MinInt8 && v <= math.MaxInt8:
		return w.byte1(0xC0).byte1(byte(int8(v)))
	case v >= math.MinInt16 && v <= math.MaxInt16:
		w.byte1(0xC1)
		w.b = binary.LittleEndian.AppendUint16(w.b, uint16(int16(v)))
	default:
		w.byte1(0xC2)
		w.b = binary.LittleEndian.AppendUint32(w.b, uint32(v))
	}
	return w
}

// lzfStr writes an LZF-encoded string from raw compressed bytes.
func (w *rdbBuilder) lzfStr(compressed []byte, ulen int) *rdbBuilder {
	w.byte1(0xC3).len(uint64(len(compressed))).len(uint64(ulen))
	return w.raw(compressed)
}

func (w *rdbBuilder) u32le(v uint32) *rdbBuilder {
	w.b = binary.LittleEndian.AppendUint32(w.b, v)
	return w
}
func (w *rdbBuilder) u64le(v uint64) *rdbBuilder {
	w.b = binary.LittleEndian.AppendUint64(w.b, v)
	return w
}

// key writes a type byte and a key.
func (w *rdbBuilder) key(t byte, k string) *rdbBuilder { return w.byte1(t).str(k) }

func (w *rdbBuilder) aux(k, v string) *rdbBuilder { return w.byte1(opAux).str(k).str(v) }

func (w *rdbBuilder) selectDB(n uint64) *rdbBuilder { return w.byte1(opSelectDB).len(n) }

// end writes EOF and, for version >= 5, the CRC64 of everything before it.
func (w *rdbBuilder) end() []byte {
	w.byte1(opEOF)
	w.b = binary.LittleEndian.AppendUint64(w.b, crc64Update(0, w.b))
	return w.b
}

// endNoCRC writes EOF with no checksum (RDB < 5) or a zero checksum.
func (w *rdbBuilder) endNoCRC(zero bool) []byte {
	w.byte1(opEOF)
	if zero {
		w.b = append(w.b, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	return w.b
}

// listpack builds a listpack from entries: string or int64.
func listpack(entries ...any) []byte {
	b := []byte{0, 0, 0, 0, 0, 0}
	for _, e := range entries {
		start := len(b)
		switch v := e.(type) {
		case string:
			switch n := len(v); {
			case n < 64:
				b = append(b, 0x80|byte(n))
			case n < 4096:
				b = append(b, 0xE0|byte(n>>8), byte(n))
			default:
				b = append(b, 0xF0)
				b = binary.LittleEndian.AppendUint32(b, uint32(n))
			}
			b = append(b, v...)
		case int:
			x := int64(v)
			switch {
			case x >= 0 && x < 128:
				b = append(b, byte(x))
			case x >= -4096 && x < 4096:
				u := uint16(x) & 0x1fff
				b = append(b, 0xC0|byte(u>>8), byte(u))
			case x >= math.MinInt16 && x <= math.MaxInt16:
				b = append(b, 0xF1)
				b = binary.LittleEndian.AppendUint16(b, uint16(x))
			case x >= -1<<23 && x < 1<<23:
				b = append(b, 0xF2, byte(x), byte(x>>8), byte(x>>16))
			case x >= math.MinInt32 && x <= math.MaxInt32:
				b = append(b, 0xF3)
				b = binary.LittleEndian.AppendUint32(b, uint32(x))
			default:
				b = append(b, 0xF4)
				b = binary.LittleEndian.AppendUint64(b, uint64(x))
			}
		default:
			panic("listpack: bad entry type")
		}
		l := len(b) - start
		// backlen, written big-end first as lpEncodeBacklen does.
		switch {
		case l <= 127:
			b = append(b, byte(l))
		case l < 16383:
			b = append(b, byte(l>>7), byte(l&127)|128)
		default:
			b = append(b, byte(l>>14), byte(l>>7&127)|128, byte(l&127)|128)
		}
	}
	b = append(b, 0xFF)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	n := len(entries)
	if n > 65535 {
		n = 65535
	}
	binary.LittleEndian.PutUint16(b[4:], uint16(n))
	return b
}

// ziplist builds a ziplist from entries: string or int64.
func ziplist(entries ...any) []byte {
	b := make([]byte, 10)
	prev := 0
	tail := 10
	for _, e := range entries {
		start := len(b)
		tail = start
		if prev < 254 {
			b = append(b, byte(prev))
		} else {
			b = append(b, 0xFE)
			b = binary.LittleEndian.AppendUint32(b, uint32(prev))
		}
		switch v := e.(type) {
		case string:
			switch n := len(v); {
			case n < 64:
				b = append(b, byte(n))
			case n < 16384:
				b = append(b, 0x40|byte(n>>8), byte(n))
			default:
				b = append(b, 0x80)
				b = binary.BigEndian.AppendUint32(b, uint32(n))
			}
			b = append(b, v...)
		case int:
			x := int64(v)
			switch {
			case x >= 0 && x <= 12:
				b = append(b, 0xF1+byte(x))
			case x >= math.MinInt8 && x <= math.MaxInt8:
				b = append(b, 0xFE, byte(x))
			case x >= math.MinInt16 && x <= math.MaxInt16:
				b = append(b, 0xC0)
				b = binary.LittleEndian.AppendUint16(b, uint16(x))
			case x >= -1<<23 && x < 1<<23:
				b = append(b, 0xF0, byte(x), byte(x>>8), byte(x>>16))
			case x >= math.MinInt32 && x <= math.MaxInt32:
				b = append(b, 0xD0)
				b = binary.LittleEndian.AppendUint32(b, uint32(x))
			default:
				b = append(b, 0xE0)
				b = binary.LittleEndian.AppendUint64(b, uint64(x))
			}
		default:
			panic("ziplist: bad entry type")
		}
		prev = len(b) - start
	}
	b = append(b, 0xFF)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	binary.LittleEndian.PutUint32(b[4:], uint32(tail))
	binary.LittleEndian.PutUint16(b[8:], uint16(min(len(entries), 65535)))
	return b
}

// intset builds an intset of the given width (2, 4, 8).
func intset(width int, vals ...int64) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(width))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(vals)))
	for _, v := range vals {
		switch width {
		case 2:
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		case 4:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		default:
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}

// zipmap builds a Redis < 2.6 zipmap from field/value pairs.
func zipmap(pairs ...string) []byte {
	b := []byte{byte(len(pairs) / 2)}
	zl := func(n int) {
		if n < 254 {
			b = append(b, byte(n))
		} else {
			b = append(b, 254)
			b = binary.LittleEndian.AppendUint32(b, uint32(n))
		}
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		zl(len(pairs[i]))
		b = append(b, pairs[i]...)
		zl(len(pairs[i+1]))
		b = append(b, 1) // one byte of free space after the value
		b = append(b, pairs[i+1]...)
		b = append(b, 0)
	}
	return append(b, 0xFF)
}
