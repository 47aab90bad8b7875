package rdbtool

import (
	"math"
	"math/bits"
)

// Memory estimation: how many bytes a key would take in a 64-bit Redis 7
// with its default configuration and jemalloc, the model redis-rdb-tools'
// memory profiler uses (dictionary entry + key sds + robj + value structure,
// each allocation rounded up to its jemalloc size class), updated for Redis
// 7 structures (listpacks instead of ziplists, jemalloc 5 with a 16-byte
// quantum). It is an estimate: allocator state, rehashing and shared objects
// are not modelled; MEMORY USAGE on a live server is the ground truth.
//
// Sizes of Redis structures on 64-bit (Redis 7.0 sources):
const (
	sizeDictEntry    = 24 // key ptr, value union, next ptr
	sizeRobj         = 16 // type/encoding/lru (4 bytes of bitfields), refcount, ptr
	sizeDict         = 56 // dict: type ptr, 2 table ptrs, 2 sizes+used, rehashidx, pauserehash
	sizeQuicklist    = 40 // head, tail, count, len, fill/compress/bookmarks
	sizeQuicklistNod = 32 // prev, next, entry ptr, sz, count/encoding bits
	sizeZSet         = 16 // dict ptr + zskiplist ptr
	sizeZSkiplist    = 32 // header, tail, length, level
	sizeZSkiplistNod = 24 // ele, score, backward (+ 16 per level)
	sizeStream       = 64 // rax ptr, length, last/first/max-deleted ids, entries added, cgroups ptr
	sizeRax          = 24
	sizeListpackHdr  = 7 // 4 bytes total length, 2 bytes count, 1 byte end marker
	sizeIntsetHdr    = 8 // encoding, length
	embstrMaxLen     = 44
	streamNodeMax    = 100 // stream-node-max-entries default
	quicklistNodeMax = 8192
)

// Redis 7.0 defaults deciding compact encodings when a value is loaded.
const (
	hashMaxListpackEntries = 128
	hashMaxListpackValue   = 64
	zsetMaxListpackEntries = 128
	zsetMaxListpackValue   = 64
	setMaxIntsetEntries    = 512
)

// mallocSize is the jemalloc 5 (x86-64, 16-byte quantum) size class of an
// allocation of n bytes: 8, 16, 32, 48, ... 128 in steps of 16, then four
// classes per doubling (160, 192, 224, 256, 320, ...).
func mallocSize(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= 8:
		return 8
	case n <= 128:
		return (n + 15) &^ 15
	}
	lg := int64(bits.Len64(uint64(n - 1))) // 2^lg >= n
	step := int64(1) << (lg - 3)
	return (n + step - 1) &^ (step - 1)
}

// sdsSize is the allocation of an sds string of n bytes: header (by length
// class), bytes, NUL terminator.
func sdsSize(n int64) int64 {
	var hdr int64
	switch {
	case n < 1<<5:
		hdr = 1
	case n < 1<<8:
		hdr = 3
	case n < 1<<16:
		hdr = 5
	case n < 1<<32:
		hdr = 9
	default:
		hdr = 17
	}
	return mallocSize(hdr + n + 1)
}

// dictSize is a dict holding n entries: the struct and a bucket table of the
// next power of two >= n pointers (entries counted by the caller).
func dictSize(n int64) int64 {
	buckets := int64(4)
	for buckets < n {
		buckets <<= 1
	}
	return mallocSize(sizeDict) + mallocSize(buckets*8)
}

// parseInt reports whether s is the canonical decimal form of an int64, the
// test Redis uses (string2ll) to store a value as an integer. Hand-written:
// strconv.ParseInt(string(s)) allocates, and this runs per element.
func parseInt(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > 20 || (s[0] > '9' && s[0] != '-') {
		return 0, false // most text starts with a letter: one comparison
	}
	neg := s[0] == '-'
	digits := s
	if neg {
		digits = s[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && (len(digits) > 1 || neg)) {
		return 0, false
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// listpackEntrySize is the bytes one element takes in a listpack: encoding
// byte(s) + data + backlen.
func listpackEntrySize(s []byte) int64 {
	if v, ok := parseInt(s); ok {
		return listpackIntSize(v)
	}
	return listpackStringSize(s)
}

// listpackStringSize is the listpack entry of s stored as a string.
func listpackStringSize(s []byte) int64 {
	var n int64
	l := int64(len(s))
	switch {
	case l < 64:
		n = 1 + l
	case l < 4096:
		n = 2 + l
	default:
		n = 5 + l
	}
	return withBacklen(n)
}

// listpackScoreSize is the listpack entry of a zset score: an integer entry
// when the score is whole, else the %.17g text Redis stores (taken as 18
// characters, the usual length, rather than formatting every score).
func listpackScoreSize(f float64) int64 {
	if f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		return listpackIntSize(int64(f))
	}
	return withBacklen(1 + 18)
}

// listpackIntSize is the listpack entry of an integer: 7-bit unsigned,
// 13/16/24/32/64-bit signed encodings.
func listpackIntSize(v int64) int64 {
	var n int64
	switch {
	case v >= 0 && v <= 127:
		n = 1
	case v >= -4096 && v <= 4095:
		n = 2
	case v >= -1<<15 && v < 1<<15:
		n = 3
	case v >= -1<<23 && v < 1<<23:
		n = 4
	case v >= -1<<31 && v < 1<<31:
		n = 5
	default:
		n = 9
	}
	return withBacklen(n)
}

// withBacklen adds the back-length field to an entry of n bytes.
func withBacklen(n int64) int64 {
	switch {
	case n < 128:
		return n + 1
	case n < 16384:
		return n + 2
	case n < 2097152:
		return n + 3
	case n < 268435456:
		return n + 4
	}
	return n + 5
}

// memKind is the shape of the value being estimated.
type memKind uint8

const (
	memString memKind = iota
	memList
	memSet
	memZSet
	memHash
	memStream
	memModule
)

var memKindNames = [...]string{"string", "list", "set", "zset", "hash", "stream", "module"}

// keyEstimate accumulates the estimated memory of one key as its elements
// are visited. Both the compact (listpack / intset) and the hash table /
// skiplist costs are summed, and finish picks the one Redis 7 would use given
// the element count and sizes, as Redis converts on load.
type keyEstimate struct {
	kind     memKind
	base     int64 // top-level cost: dict entry, key sds, robj, expiry entry
	elements int64
	largest  int64 // longest element (member, field or value) in bytes
	allInts  bool
	maxInt   int64 // largest |v| seen among integer members (intset width)

	compact  int64 // listpack payload bytes (sum of entry sizes)
	table    int64 // hash table / skiplist per-element bytes
	value    int64 // string value cost; stream/module running total
	encoding string

	// quicklist simulation (lists): bytes in the current node, node count.
	nodeBytes int64
	nodes     int64
	// streams: entries in the current rax node.
	streamNodeEntries int64
}

// skiplistLevel is the level of a skiplist node for member m: 1 + k with
// P(k) = 0.25^k, as Redis draws it, but taken from a fixed hash of the
// member (FNV-1a with a 64-bit finalizer) so that the estimate is the same
// in every process: a per-process random seed (maphash.MakeSeed) made a
// big sorted set's estimate differ from run to run.
func skiplistLevel(m []byte) int64 {
	h := uint64(14695981039346656037)
	for _, c := range m {
		h ^= uint64(c)
		h *= 1099511628211
	}
	// FNV's low bits mix poorly for short members: finalize (murmur3's fmix64).
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	level := int64(1)
	for ; h&3 == 0 && level < 32; h >>= 2 {
		level++
	}
	return level
}

// start resets e for a new key.
func (e *keyEstimate) start(kind memKind, key []byte, hasExpiry bool) {
	*e = keyEstimate{kind: kind, allInts: true}
	e.base = mallocSize(sizeDictEntry) + sdsSize(int64(len(key))) + mallocSize(sizeRobj)
	if hasExpiry {
		e.base += mallocSize(sizeDictEntry) // entry in the expires dict, value held in the union
	}
}

// stringValue sets the value of a string key.
func (e *keyEstimate) stringValue(v []byte) {
	n := int64(len(v))
	e.elements = n // redis-rdb-tools reports a string's length as num_elements
	e.largest = n
	switch _, isInt := parseInt(v); {
	case isInt:
		e.encoding = "int" // stored in the robj pointer itself
	case n <= embstrMaxLen:
		e.encoding = "embstr" // robj and sds in one allocation
		e.base -= mallocSize(sizeRobj)
		e.value = mallocSize(sizeRobj + 3 + n + 1)
	default:
		e.encoding = "raw"
		e.value = sdsSize(n)
	}
}

func (e *keyEstimate) note(s []byte) {
	if l := int64(len(s)); l > e.largest {
		e.largest = l
	}
}

// member adds a list item or set member.
func (e *keyEstimate) member(m []byte) {
	e.elements++
	e.note(m)
	v, isInt := parseInt(m) // once: it decides the listpack size and the intset
	var lp int64
	if isInt {
		lp = listpackIntSize(v)
	} else {
		lp = listpackStringSize(m)
	}
	e.compact += lp
	switch e.kind {
	case memList:
		if e.nodes == 0 || e.nodeBytes+lp > quicklistNodeMax {
			e.nodes++
			e.nodeBytes = sizeListpackHdr
		}
		e.nodeBytes += lp
		e.table += lp
	case memSet:
		if isInt && e.allInts {
			if v < 0 {
				v = -v
			}
			e.maxInt = max(e.maxInt, v)
		} else {
			e.allInts = false
		}
		e.table += mallocSize(sizeDictEntry) + sdsSize(int64(len(m)))
	}
}

// zsetMember adds a sorted-set member with its score.
func (e *keyEstimate) zsetMember(m []byte, score float64) {
	e.elements++
	e.note(m)
	e.compact += listpackEntrySize(m) + listpackScoreSize(score)
	level := skiplistLevel(m)
	e.table += mallocSize(sizeDictEntry) + sdsSize(int64(len(m))) + mallocSize(sizeZSkiplistNod+16*level)
}

// hashField adds a hash field and its value.
func (e *keyEstimate) hashField(f, v []byte) {
	e.elements++
	e.note(f)
	e.note(v)
	e.compact += listpackEntrySize(f) + listpackEntrySize(v)
	e.table += mallocSize(sizeDictEntry) + sdsSize(int64(len(f))) + sdsSize(int64(len(v)))
}

// streamEntry adds one stream entry of fields (field, value, ...).
func (e *keyEstimate) streamEntry(fields [][]byte) {
	e.elements++
	if e.streamNodeEntries == 0 || e.streamNodeEntries >= streamNodeMax {
		e.streamNodeEntries = 0
		// A new rax node + listpack header with the master entry.
		e.value += 64 + sizeListpackHdr
	}
	e.streamNodeEntries++
	e.value += 3 // entry flags, ms and seq deltas (small ints)
	for _, f := range fields {
		e.note(f)
		e.value += listpackEntrySize(f)
	}
}

// streamExtra adds a consumer group, consumer, or pending entry.
func (e *keyEstimate) streamExtra(name []byte) {
	e.value += 64 + sdsSize(int64(len(name)))
}

// finish returns the estimated bytes and the in-memory encoding Redis 7
// would use for the value.
func (e *keyEstimate) finish() (bytes int64, encoding string) {
	switch e.kind {
	case memString:
		return e.base + e.value, e.encoding
	case memList:
		return e.base + mallocSize(sizeQuicklist) + e.nodes*mallocSize(sizeQuicklistNod) + e.listpackNodesBytes(), "quicklist"
	case memSet:
		if e.allInts && e.elements <= setMaxIntsetEntries {
			width := int64(2)
			switch {
			case e.maxInt >= 1<<31:
				width = 8
			case e.maxInt >= 1<<15:
				width = 4
			}
			return e.base + mallocSize(sizeIntsetHdr+width*e.elements), "intset"
		}
		return e.base + dictSize(e.elements) + e.table, "hashtable"
	case memZSet:
		if e.elements <= zsetMaxListpackEntries && e.largest <= zsetMaxListpackValue {
			return e.base + mallocSize(sizeListpackHdr+e.compact), "listpack"
		}
		return e.base + mallocSize(sizeZSet) + dictSize(e.elements) + mallocSize(sizeZSkiplist) + mallocSize(sizeZSkiplistNod+32*16) + e.table, "skiplist"
	case memHash:
		if e.elements <= hashMaxListpackEntries && e.largest <= hashMaxListpackValue {
			return e.base + mallocSize(sizeListpackHdr+e.compact), "listpack"
		}
		return e.base + dictSize(e.elements) + e.table, "hashtable"
	case memStream:
		return e.base + mallocSize(sizeStream) + mallocSize(sizeRax) + e.value, "stream"
	}
	return e.base + e.value, memKindNames[e.kind]
}

// listpackNodesBytes is the allocation of the quicklist's listpacks: the
// entries were packed into nodes of at most 8 KiB as member went along, so
// every node but the last is near full; allocations are rounded per node.
func (e *keyEstimate) listpackNodesBytes() int64 {
	if e.nodes == 0 {
		return 0
	}
	total := e.table + e.nodes*sizeListpackHdr
	per := total / e.nodes
	return e.nodes * mallocSize(per)
}
