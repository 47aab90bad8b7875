package rdb

import (
	"bytes"
	"strconv"
)

// Type is the logical Redis type of a value, whatever its on-disk encoding.
type Type uint8

// Logical value types.
const (
	String Type = iota
	List
	Set
	ZSet
	Hash
	Stream
	Module
)

var typeNames = [...]string{"string", "list", "set", "zset", "hash", "stream", "module"}

// String returns the name Redis's TYPE command uses ("string", "zset", ...).
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Encoding is the on-disk encoding of a value: which RDB object type byte it
// was written with. Two files can store the same logical Type differently.
type Encoding uint8

// On-disk encodings. The comment gives the RDB type byte.
const (
	EncString              Encoding = iota // 0: one RDB string (raw, int or LZF)
	EncList                                // 1: linked list, one string per item
	EncSet                                 // 2: hash table set, one string per member
	EncZSet                                // 3: skiplist zset, scores as ASCII doubles
	EncHash                                // 4: hash table, field and value strings
	EncZSet2                               // 5: skiplist zset, scores as binary doubles
	EncModule                              // 7: module value, walked by its opcodes (6, pre-GA, is rejected)
	EncZipmap                              // 9: Redis < 2.6 small hash
	EncZiplist                             // 10: list as one ziplist
	EncIntset                              // 11: set of integers
	EncZSetZiplist                         // 12: zset as one ziplist
	EncHashZiplist                         // 13: hash as one ziplist
	EncQuicklist                           // 14: list of ziplists
	EncStreamListpacks                     // 15: stream, Redis 5
	EncHashListpack                        // 16: hash as one listpack
	EncZSetListpack                        // 17: zset as one listpack
	EncQuicklist2                          // 18: list of listpacks or plain nodes
	EncStreamListpacks2                    // 19: stream, Redis 7.0
	EncSetListpack                         // 20: set as one listpack
	EncStreamListpacks3                    // 21: stream, Redis 7.2 (consumer active time)
	EncHashMetadataPreGA                   // 22 (Redis 7.4 RC): hash with absolute field TTLs
	EncHashListpackExPreGA                 // 23 (Redis 7.4 RC): listpack of field, value, TTL
	EncHashMetadata                        // 24: hash with field TTLs relative to a minimum
	EncHashListpackEx                      // 25: min TTL, then listpack of field, value, TTL
	EncStreamListpacks4                    // 26: stream, Redis 8.6
	EncHash2                               // 22 in a Valkey 9 file: field, value, per-field expiry
	EncStreamListpacks5                    // 27: stream, Redis 8.8 (per-group NACK zone)
)

var encodingNames = [...]string{
	"string", "list", "set", "zset", "hash", "zset2", "module", "zipmap", "ziplist", "intset",
	"zset-ziplist", "hash-ziplist", "quicklist", "stream-listpacks", "hash-listpack", "zset-listpack",
	"quicklist2", "stream-listpacks2", "set-listpack", "stream-listpacks3", "hash-metadata-pre-ga",
	"hash-listpack-ex-pre-ga", "hash-metadata", "hash-listpack-ex", "stream-listpacks4", "hash2",
	"stream-listpacks5",
}

// String returns a short stable name for the encoding ("quicklist2", ...).
func (e Encoding) String() string {
	if int(e) < len(encodingNames) {
		return encodingNames[e]
	}
	return "encoding(" + strconv.Itoa(int(e)) + ")"
}

// Entry is one key of the snapshot as Next leaves it: the record header is
// decoded, the value is not (see Parser.Value and Parser.Visit).
//
// The Entry returned by Parser.Entry is owned by the Parser and overwritten
// by the next call to Next; Key is valid until then. Use Clone to keep it.
type Entry struct {
	DB       int      // database number from the last SELECTDB (0 if none)
	Key      []byte   // borrowed: valid until the next Next
	Type     Type     // logical type
	Encoding Encoding // on-disk encoding
	ExpireAt int64    // absolute expiry in unix milliseconds; 0 = no expiry
	Idle     int64    // LRU idle time in seconds from an IDLE opcode; -1 = absent
	Freq     int      // LFU frequency from a FREQ opcode; -1 = absent
	Slot     int      // cluster slot from the last SLOT_INFO opcode; -1 = absent
	Module   string   // module type name (9 chars) for Type Module, else ""
	Offset   int64    // byte offset of the record's first byte (expiry/hint opcode or type byte)
}

// Clone returns a copy of e whose Key does not alias the parser's buffer.
func (e *Entry) Clone() Entry {
	c := *e
	c.Key = bytes.Clone(e.Key)
	return c
}

// ElementKind says what an Element passed to a Visit callback holds.
type ElementKind uint8

// Element kinds. The comment lists the Element fields that are set.
const (
	ListItem   ElementKind = iota // Member
	SetMember                     // Member
	ZSetMember                    // Member, Score
	HashField                     // Member (field), Value, ExpireAt (0 = none)
	// StreamEntry is one live stream entry: ID and Fields (field, value,
	// field, value, ...). Deleted entries are not visited.
	StreamEntry
	// StreamInfo comes once, after the entries: Stream holds the length,
	// last ID, first ID, max deleted ID and entries added.
	StreamInfo
	StreamGroup           // Member (group name), ID (last delivered), Stream.EntriesRead
	StreamPending         // Group, ID, DeliveryTime, DeliveryCount: one entry of a group's PEL
	StreamConsumer        // Group, Member (consumer name), SeenTime, ActiveTime
	StreamConsumerPending // Group, Member (consumer name), ID: an entry the consumer owns
	// ModuleItem is one annotated value of a module type: ModuleOpcode says
	// which of Int (signed or unsigned), Score (float or double) or Member
	// (string) holds it.
	ModuleItem
)

var elementKindNames = [...]string{"list-item", "set-member", "zset-member", "hash-field", "stream-entry",
	"stream-info", "stream-group", "stream-pending", "stream-consumer", "stream-consumer-pending", "module-item"}

func (k ElementKind) String() string {
	if int(k) < len(elementKindNames) {
		return elementKindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// StreamID is a stream entry ID, <Ms>-<Seq>.
type StreamID struct {
	Ms, Seq uint64
}

// String formats the ID as Redis does: "1700000000000-0".
func (id StreamID) String() string {
	return strconv.FormatUint(id.Ms, 10) + "-" + strconv.FormatUint(id.Seq, 10)
}

// AppendTo appends the "<ms>-<seq>" form of id to b.
func (id StreamID) AppendTo(b []byte) []byte {
	b = strconv.AppendUint(b, id.Ms, 10)
	b = append(b, '-')
	return strconv.AppendUint(b, id.Seq, 10)
}

// StreamMeta is the stream-wide state written after a stream's entries.
// Fields a given encoding does not store are zero.
type StreamMeta struct {
	Length       uint64   // number of live entries
	LastID       StreamID // last ID ever added
	FirstID      StreamID // first live entry (stream-listpacks2+)
	MaxDeletedID StreamID // largest deleted ID (stream-listpacks2+)
	EntriesAdded uint64   // entries ever added (stream-listpacks2+)
	EntriesRead  int64    // StreamGroup only: the group's entries-read counter; -1 = unknown
}

// Module value opcodes, as stored in Element.ModuleOpcode.
const (
	ModuleSint   = 1
	ModuleUint   = 2
	ModuleFloat  = 3
	ModuleDouble = 4
	ModuleString = 5
)

// Element is one element of a collection, passed to a Visit callback.
//
// The Element and every byte slice in it are owned by the Parser and valid
// only until the callback returns. Integers stored in ziplists, listpacks and
// intsets are formatted in decimal into a reused scratch buffer, so Member
// and Value always hold the bytes Redis would return.
type Element struct {
	Kind  ElementKind
	Index int64 // position of the element within the value, from 0

	Member   []byte  // list item, set/zset member, hash field, group or consumer name, module string
	Value    []byte  // hash value
	Score    float64 // zset score (may be ±Inf or NaN); module float/double
	ExpireAt int64   // hash field expiry in unix ms; 0 = none

	// Streams.
	ID            StreamID
	Fields        [][]byte // StreamEntry: field, value, field, value, ...
	Group         []byte   // StreamPending, StreamConsumer, StreamConsumerPending: the group
	DeliveryTime  int64    // StreamPending: last delivery, unix ms
	DeliveryCount uint64   // StreamPending
	SeenTime      int64    // StreamConsumer: unix ms
	ActiveTime    int64    // StreamConsumer: unix ms; -1 when the encoding does not store it
	Stream        StreamMeta

	// Modules.
	ModuleOpcode int   // ModuleSint ... ModuleString
	Int          int64 // ModuleSint, ModuleUint (as the same 64 bits)
}

// Clone returns a copy of el whose byte slices do not alias the parser's
// buffers, for callers that keep elements past the callback.
func (el *Element) Clone() Element {
	c := *el
	c.Member = bytes.Clone(el.Member)
	c.Value = bytes.Clone(el.Value)
	c.Group = bytes.Clone(el.Group)
	if el.Fields != nil {
		c.Fields = make([][]byte, len(el.Fields))
		for i, f := range el.Fields {
			c.Fields[i] = bytes.Clone(f)
		}
	}
	return c
}

// Header describes the file: its magic, RDB version and the AUX fields read
// so far (AUX fields may appear between keys, so the list can grow).
type Header struct {
	Magic   string // "REDIS" or "VALKEY"
	Version int    // RDB version: 1..12 for Redis, 80+ for Valkey 9
	Aux     []AuxField
	// Checksum is the CRC64 stored at the end of the file (valid once Next
	// returned false without error); 0 when the file has none or it was 0.
	Checksum uint64
}

// AuxField is one AUX key/value pair ("redis-ver" = "7.0.15", ...).
type AuxField struct {
	Key, Value string
}
