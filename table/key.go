package table

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sluicedb/sluice/coltype"
)

// Key layout (all integers big-endian so that byte order is numeric order):
//
//	meta:  0x01 'm' name                       → table metadata (JSON)
//	seq:   0x01 's'                            → next unreserved sequence (uint64)
//	block: 0x02 | table id u32 | partition hash u64 | min time u64 | seq u64
//	       (min time is unix ns with the sign bit flipped so negative times sort first)
const (
	prefixMeta  = 0x01
	prefixBlock = 0x02
	blockKeyLen = 1 + 4 + 8 + 8 + 8
)

var seqKey = []byte{prefixMeta, 's'}

func metaKey(name string) []byte { return append([]byte{prefixMeta, 'm'}, name...) }

// blockKey appends the key of a block to dst.
func blockKey(dst []byte, table uint32, hash uint64, minTime int64, seq uint64) []byte {
	dst = append(dst, prefixBlock)
	dst = binary.BigEndian.AppendUint32(dst, table)
	dst = binary.BigEndian.AppendUint64(dst, hash)
	dst = binary.BigEndian.AppendUint64(dst, uint64(minTime)^(1<<63))
	return binary.BigEndian.AppendUint64(dst, seq)
}

// partitionKey is the prefix of every block of one partition whose min time
// is at least minTime: the bound of a partition range scan or delete.
func partitionKey(table uint32, hash uint64, minTime int64) []byte {
	return blockKey(make([]byte, 0, blockKeyLen), table, hash, minTime, 0)[:blockKeyLen-8]
}

// tableBounds are the first key of the table's keyspace and the first key
// after it.
func tableBounds(table uint32) (lo, hi []byte) {
	lo = binary.BigEndian.AppendUint32([]byte{prefixBlock}, table)
	hi = binary.BigEndian.AppendUint32([]byte{prefixBlock}, table+1)
	if table == math.MaxUint32 {
		hi = []byte{prefixBlock + 1}
	}
	return lo, hi
}

// parseBlockKey splits a block key; ok is false if k is not one.
func parseBlockKey(k []byte) (table uint32, hash uint64, minTime int64, seq uint64, ok bool) {
	if len(k) != blockKeyLen || k[0] != prefixBlock {
		return 0, 0, 0, 0, false
	}
	return binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:]),
		int64(binary.BigEndian.Uint64(k[13:]) ^ (1 << 63)), binary.BigEndian.Uint64(k[21:]), true
}

// partitionHash hashes a partition value by its text (the text a column
// widened to string would hold), so that widening the hashBy column's type
// (int64 → float64 → string) keeps every partition where it is. Null has
// its own hash.
func partitionHash(t Type, v value, null bool) uint64 {
	if null {
		return 0
	}
	var buf [64]byte
	b := append(buf[:0], 1)
	b = appendText(b, t, v)
	return xxhash.Sum64(b)
}

// floorTime rounds ns down to a multiple of span (toward minus infinity).
func floorTime(ns, span int64) int64 {
	r := ns % span
	if r < 0 {
		r += span
	}
	return ns - r
}

// appendText appends the text of a typed value: the value a column widened
// to string holds.
func appendText(b []byte, t Type, v value) []byte {
	switch t {
	case Int64:
		return strconv.AppendInt(b, v.i, 10)
	case Float64:
		return strconv.AppendFloat(b, v.float(), 'g', -1, 64)
	case Bool:
		return strconv.AppendBool(b, v.i != 0)
	case Timestamp:
		return time.Unix(0, v.i).UTC().AppendFormat(b, time.RFC3339Nano)
	case Date:
		return append(b, coltype.DateValue(v.i).String()...)
	case TimeOfDay:
		return append(b, coltype.TimeOfDayValue(v.i).String()...)
	case UUID:
		var u coltype.UUIDValue
		copy(u[:], v.s)
		return append(b, u.String()...)
	case Bytes:
		return base64.StdEncoding.AppendEncode(b, []byte(v.s))
	}
	if t.IsDecimal() {
		return append(b, decimalOf(t, v).String()...)
	}
	return append(b, v.s...)
}
