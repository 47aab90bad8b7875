package table

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zstd"

	"github.com/sluicedb/sluice/coltype"
)

// Block value layout (see docs/storage.md for the diagram):
//
//	block   := version u8 (=1) | codec u8 (0 none, 1 zstd) | payload (compressed by codec)
//	payload := uvarint rows | uvarint columns | column*
//	column  := uvarint len | name | type u8 | [precision u8 | scale u8, a decimal's]
//	           | nulls u8 (0 none, 1 bitmap follows, 2 all null)
//	           | [bitmap ceil(rows/8) bytes, bit set = present] | uvarint len | values
//	values (present rows only, in row order):
//	  int64, timestamp, date, time_of_day, decimal of precision ≤ 18:
//	                    zigzag varint of the first, then zigzag varint deltas
//	                    (unix ns, days, µs since midnight, the unscaled value)
//	  float64:          8 bytes little-endian IEEE 754 each
//	  string, json, bytes, uuid, decimal of precision 19–38:
//	                    uvarint length of each, then all bytes concatenated
//	                    (a uuid's 16 bytes; a wide decimal's unscaled value
//	                    in 16 bytes big-endian two's complement, sign bit
//	                    flipped so the bytes sort as the numbers)
//	  bool:             bitmap ceil(present/8) bytes
//
// The type byte is coltype's kind; only a decimal has the two bytes after
// it, so blocks written before the types beyond json read as they did. The
// precision byte says which of the two layouts a decimal's values have:
// no block written before wide decimals has a precision over 18.
//
// Each block carries its own column names and types, so a block written
// before the schema widened still decodes; readers convert to the current
// type. The values length lets a reader skip columns a query does not need.
const (
	blockVersion = 1
	codecNone    = 0
	codecZstd    = 1
)

// blockDecoders are the zstd decoders of block values, one per decode in
// progress, for the same reason as blockEncoders: a zstd.Decoder runs at
// most WithDecoderConcurrency DecodeAll calls at once and makes the others
// wait, so one shared decoder (concurrency 1) read the blocks of
// concurrent queries and scans one at a time. Used only for DecodeAll, a
// decoder starts no goroutine and needs no Close.
var blockDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		panic(err) // only for invalid options
	}
	return d
}}

// getDecoder returns a decoder no other decode uses until putDecoder.
func getDecoder() *zstd.Decoder { return blockDecoders.Get().(*zstd.Decoder) }

func putDecoder(d *zstd.Decoder) { blockDecoders.Put(d) }

// zstdDecode appends the content of the zstd frames in src to dst.
func zstdDecode(src, dst []byte) ([]byte, error) {
	d := getDecoder()
	defer putDecoder(d)
	return d.DecodeAll(src, dst)
}

// blockEncoders are the zstd encoders of block values, one per encode in
// progress. A zstd.Encoder runs at most WithEncoderConcurrency EncodeAll
// calls at once and makes the others wait for one to finish: the one
// encoder every append shared (concurrency 1) ran the compression of
// concurrent batches one at a time, a sixth of the ingest's CPU serialized
// (HTTP ingest stopped growing at 8 cores). A sync.Pool gives
// each its own without a lock, and keeps as many as are used at once.
var blockEncoders = sync.Pool{New: func() any {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err) // only for invalid options
	}
	return e
}}

// getEncoder returns an encoder no other encode uses until putEncoder.
func getEncoder() *zstd.Encoder { return blockEncoders.Get().(*zstd.Encoder) }

func putEncoder(e *zstd.Encoder) { blockEncoders.Put(e) }

// zstdEncode appends the zstd frame of src to dst.
func zstdEncode(src, dst []byte) []byte {
	e := getEncoder()
	dst = e.EncodeAll(src, dst)
	putEncoder(e)
	return dst
}

// colData is one column of an Append batch, coerced to the column type.
type colData struct {
	name string
	typ  Type
	vals []value
	null []bool // null[r]: row r has no value
}

// encodeBlock appends the payload of the block holding rows idx (in that
// order) of cols to dst.
func encodeBlock(dst []byte, cols []colData, idx []int) []byte {
	dst, _ = encodeBlockWith(dst, nil, cols, idx)
	return dst
}

// encodeBlockWith is encodeBlock with vals as the scratch of a column's
// values (returned, grown, for the next block).
func encodeBlockWith(dst, vals []byte, cols []colData, idx []int) ([]byte, []byte) {
	dst = binary.AppendUvarint(dst, uint64(len(idx)))
	dst = binary.AppendUvarint(dst, uint64(len(cols)))
	for _, c := range cols {
		dst = appendColumnHead(dst, c, idx)
		if holdsText(c.typ) {
			// The values' length is known beforehand: they are written
			// straight into dst, not copied there from vals (wide text
			// columns, such as the RDB ingest's JSON values, paid a
			// growing vals and a second copy of every byte).
			size := 0
			for _, r := range idx {
				if !c.null[r] {
					l := len(c.vals[r].s)
					size += uvarintLen(uint64(l)) + l
				}
			}
			dst = binary.AppendUvarint(dst, uint64(size))
			dst = encodeValues(slices.Grow(dst, size), c, idx)
			continue
		}
		vals = encodeValues(vals[:0], c, idx)
		dst = binary.AppendUvarint(dst, uint64(len(vals)))
		dst = append(dst, vals...)
	}
	return dst, vals
}

// appendColumnHead appends the column's name, type, nulls byte and bitmap
// (rows idx) to dst: what comes before its values' length.
func appendColumnHead(dst []byte, c colData, idx []int) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(c.name)))
	dst = append(dst, c.name...)
	dst = append(dst, byte(c.typ.Kind()))
	if c.typ.IsDecimal() {
		dst = append(dst, byte(c.typ.Precision()), byte(c.typ.Scale()))
	}
	present := 0
	for _, r := range idx {
		if !c.null[r] {
			present++
		}
	}
	switch present {
	case len(idx):
		dst = append(dst, 0)
	case 0:
		dst = append(dst, 2)
	default:
		dst = append(dst, 1)
		start := len(dst)
		dst = append(dst, make([]byte, (len(idx)+7)/8)...)
		for j, r := range idx {
			if !c.null[r] {
				dst[start+j/8] |= 1 << (j % 8)
			}
		}
	}
	return dst
}

// uvarintLen is the length of binary.AppendUvarint's encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func zigzag(i int64) uint64 { return uint64(i<<1) ^ uint64(i>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func encodeValues(dst []byte, c colData, idx []int) []byte {
	switch {
	case c.typ == Float64:
		for _, r := range idx {
			if !c.null[r] {
				dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.vals[r].float()))
			}
		}
	case holdsText(c.typ):
		for _, r := range idx {
			if !c.null[r] {
				dst = binary.AppendUvarint(dst, uint64(len(c.vals[r].s)))
			}
		}
		for _, r := range idx {
			if !c.null[r] {
				dst = append(dst, c.vals[r].s...)
			}
		}
	case c.typ == Bool:
		var b byte
		n := 0
		for _, r := range idx {
			if !c.null[r] {
				if c.vals[r].i != 0 {
					b |= 1 << (n % 8)
				}
				n++
				if n%8 == 0 {
					dst = append(dst, b)
					b = 0
				}
			}
		}
		if n%8 != 0 {
			dst = append(dst, b)
		}
	default: // the types held in value.i
		var prev int64
		for _, r := range idx {
			if !c.null[r] {
				dst = binary.AppendUvarint(dst, zigzag(c.vals[r].i-prev))
				prev = c.vals[r].i
			}
		}
	}
	return dst
}

// minCompress is the payload size below which a block is stored
// uncompressed: on one-row blocks (~150 bytes) zstd made the value larger
// (192 → 179 B per row stored without it) and cost 10 % of the CPU.
const minCompress = 256

// compressBlock appends the block value (header and payload, zstd
// compressed unless it is small or does not shrink) to dst.
func compressBlock(dst, payload []byte) []byte {
	start := len(dst)
	if len(payload) >= minCompress {
		dst = append(dst, blockVersion, codecZstd)
		// Room for an output as large as the input (kept only if smaller):
		// grown by EncodeAll block after block, a 200 MB payload allocated
		// 1.2 GB.
		dst = slices.Grow(dst, len(payload)+64)
		dst = zstdEncode(payload, dst)
		if len(dst)-start-2 < len(payload) {
			return dst
		}
		dst = dst[:start]
	}
	dst = append(dst, blockVersion, codecNone)
	return append(dst, payload...)
}

// decodedCol is one column of a decoded block, expanded to one slot per
// row (null slots hold zero values).
type decodedCol struct {
	name    string
	typ     Type
	present []bool // nil: every row present
	ints    []int64
	floats  []float64
	strs    []string
}

func (c *decodedCol) isNull(r int) bool { return c.present != nil && !c.present[r] }

// blockDecoder decodes blocks, reusing its buffers from block to block.
// The decoded columns are valid until the next decode.
type blockDecoder struct {
	raw  []byte
	rows int
	cols []decodedCol
	n    int // cols[:n] are in use
	// borrowStrings makes the string values point into raw instead of a
	// copy of their bytes: for a reader done with them before the next
	// decode (a block-wise query, which copies them into Arrow).
	borrowStrings bool
}

// decode decodes the block value v stored at key. want reports whether a
// column is needed; other columns are skipped.
func (d *blockDecoder) decode(key, v []byte, want func(string) bool) error {
	if len(v) < 2 || v[0] != blockVersion {
		return &CorruptionError{Key: slices.Clone(key), Reason: "bad block header"}
	}
	switch v[1] {
	case codecNone:
		d.raw = append(d.raw[:0], v[2:]...)
	case codecZstd:
		var err error
		if d.raw, err = zstdDecode(v[2:], d.raw[:0]); err != nil {
			return &CorruptionError{Key: slices.Clone(key), Offset: 2, Reason: "zstd", Err: err}
		}
	default:
		return &CorruptionError{Key: slices.Clone(key), Offset: 1, Reason: "unknown codec"}
	}
	b := d.raw
	off := 0
	fail := func(reason string) error {
		return &CorruptionError{Key: slices.Clone(key), Offset: off, Reason: reason}
	}
	uvarint := func() (uint64, bool) {
		u, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return 0, false
		}
		off += n
		return u, true
	}
	rows, ok := uvarint()
	if !ok || rows > uint64(len(b))*8+8 {
		return fail("row count")
	}
	ncols, ok := uvarint()
	if !ok || ncols > uint64(len(b)) {
		return fail("column count")
	}
	d.rows = int(rows)
	d.n = 0
	for range ncols {
		nameLen, ok := uvarint()
		if !ok || nameLen > uint64(len(b)-off) {
			return fail("column name length")
		}
		name := b[off : off+int(nameLen)]
		off += int(nameLen)
		if off+2 > len(b) {
			return fail("column header")
		}
		typ := Type(b[off])
		off++
		if typ == coltype.DecimalKind {
			if off+3 > len(b) {
				return fail("column header")
			}
			typ = coltype.Decimal(int(b[off]), int(b[off+1]))
			off += 2
		}
		nulls := b[off]
		off++
		if !validType(typ) || nulls > 2 {
			return fail("column type or null flag")
		}
		var bitmap []byte
		if nulls == 1 {
			nb := (d.rows + 7) / 8
			if nb > len(b)-off {
				return fail("null bitmap")
			}
			bitmap = b[off : off+nb]
			off += nb
		}
		vlen, ok := uvarint()
		if !ok || vlen > uint64(len(b)-off) {
			return fail("values length")
		}
		vals := b[off : off+int(vlen)]
		off += int(vlen)
		// The name is only looked up: a string over the block's bytes
		// (string(name) escapes through the func value, a copy per
		// column and block).
		if !want(unsafe.String(unsafe.SliceData(name), len(name))) {
			continue
		}
		if d.n == len(d.cols) {
			d.cols = append(d.cols, decodedCol{})
		}
		c := &d.cols[d.n]
		d.n++
		if c.name != string(name) {
			c.name = string(name)
		}
		c.typ = typ
		if err := c.decodeValues(d.rows, nulls, bitmap, vals, d.borrowStrings); err != "" {
			return &CorruptionError{Key: slices.Clone(key), Offset: off - int(vlen), Reason: "column " + c.name + ": " + err}
		}
	}
	if off != len(b) {
		return fail("trailing bytes")
	}
	return nil
}

func (c *decodedCol) decodeValues(rows int, nulls byte, bitmap, vals []byte, borrow bool) string {
	c.present = c.present[:0]
	switch nulls {
	case 0:
		c.present = nil
	case 1:
		for r := range rows {
			c.present = append(c.present, bitmap[r/8]&(1<<(r%8)) != 0)
		}
	case 2:
		for range rows {
			c.present = append(c.present, false)
		}
	}
	present := func(r int) bool { return c.present == nil || c.present[r] }
	off := 0
	switch {
	case c.typ != Float64 && !holdsText(c.typ): // the types held in ints
		c.ints = grow(c.ints, rows)
		var prev int64
		bit := 0
		for r := range rows {
			if !present(r) {
				c.ints[r] = 0
				continue
			}
			if c.typ == Bool {
				if bit/8 >= len(vals) {
					return "short bool bitmap"
				}
				c.ints[r] = int64(vals[bit/8]>>(bit%8)) & 1
				bit++
				continue
			}
			u, n := binary.Uvarint(vals[off:])
			if n <= 0 {
				return "bad varint"
			}
			off += n
			prev += unzigzag(u)
			c.ints[r] = prev
		}
		if c.typ == Bool {
			off = (bit + 7) / 8
		}
	case c.typ == Float64:
		c.floats = grow(c.floats, rows)
		for r := range rows {
			if !present(r) {
				c.floats[r] = 0
				continue
			}
			if off+8 > len(vals) {
				return "short float"
			}
			c.floats[r] = math.Float64frombits(binary.LittleEndian.Uint64(vals[off:]))
			off += 8
		}
	default: // holdsText
		c.strs = grow(c.strs, rows)
		lens := c.ints[:0]
		total := 0
		for r := range rows {
			if !present(r) {
				continue
			}
			u, n := binary.Uvarint(vals[off:])
			if n <= 0 || u > uint64(len(vals)) {
				return "bad string length"
			}
			off += n
			lens = append(lens, int64(u))
			total += int(u)
		}
		c.ints = lens
		if total != len(vals)-off {
			return "string bytes do not match lengths"
		}
		// One allocation for all strings of the column; each value is a
		// substring, so keeping one keeps the column's bytes alive. A
		// borrowing decoder's strings are the block's own bytes, valid
		// until its next decode.
		var all string
		if borrow && off < len(vals) {
			all = unsafe.String(&vals[off], len(vals)-off)
		} else {
			all = string(vals[off:])
		}
		off = len(vals)
		pos, j := 0, 0
		for r := range rows {
			if !present(r) {
				c.strs[r] = ""
				continue
			}
			l := int(lens[j])
			j++
			c.strs[r] = all[pos : pos+l]
			pos += l
		}
	}
	if off != len(vals) {
		return "trailing value bytes"
	}
	return ""
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
