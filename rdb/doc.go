// Package rdb reads Redis and Valkey RDB snapshot files as a stream of keys.
//
// It is built for nightly scans of multi-gigabyte snapshots: the file is read
// once, front to back, through a reusable window buffer (or a memory map, see
// Open), and nothing is decoded that the caller does not ask for.
//
//	p := rdb.NewParser(r, nil)
//	for p.Next() {
//		e := p.Entry() // DB, Key, Type, Encoding, ExpireAt, ...; the value is not read yet
//		switch e.Type {
//		case rdb.String:
//			v, err := p.Value() // the string, LZF-decompressed into a reused buffer
//		default:
//			err := p.Visit(func(el *rdb.Element) error { ... }) // element by element
//		}
//	}
//	if err := p.Err(); err != nil { ... } // *CorruptionError with offset and key
//
// # Lazy values and filters
//
// Next reads the record header (expiry, LRU/LFU hints, type byte, key) and
// stops. If the caller neither calls Value nor Visit, the following Next
// skips the value by walking its lengths only: LZF payloads are skipped by
// their compressed length, ziplists and listpacks by their byte length, and
// nothing is materialised. Options.Filter rejects keys before any of their
// value is read, so a filter that rejects everything runs at close to the
// speed of reading the file.
//
// # Borrowed bytes
//
// Entry.Key and the slice returned by Value are valid until the next call to
// Next (or Close). The byte slices in an Element passed to a Visit callback
// are valid only until the callback returns. Callers that keep bytes must
// copy them (bytes.Clone, Entry.Clone, Element.Clone). This is what makes the iteration
// allocation-free after warm-up.
//
// # Inputs
//
// NewParser reads any io.Reader through a window buffer (two, alternating,
// once the input outgrows the first) that is refilled before it grows and
// shrinks back after a value over 8 MiB. NewBytesParser and Open (which
// memory-maps files of 1 MiB and more on Linux) parse in place: nothing is
// copied, and a mapped file's pages are released as the parse moves on, so
// the resident set stays around 20 MB whatever the file size (plus the
// largest single value). Either way the CRC64 is summed by a helper
// goroutine behind the parser, which ends with the parse (EOF, error or
// Close). Reset reuses a Parser and its buffers for the next file.
//
// # Formats
//
// RDB versions 1 to 13 of Redis 2.x to 8.6 (and 14 of Redis 8.8, but for
// its new non-stream types), and Valkey 9 (magic "VALKEY", versions 80 and
// 81; Valkey 7 and 8 write REDIS0011). Every length and string encoding,
// every value type (string, list, set, zset, zset2, hash, zipmap, ziplist,
// intset, listpack, quicklist, quicklist2 with plain and packed nodes,
// streams 1 to 5 with consumer groups, PELs and consumers, hashes with
// per-field expiry in Redis's four encodings and Valkey's HASH_2, module
// values walked through their opcodes) and every opcode (AUX, MODULE_AUX,
// FUNCTION_PRE_GA, FUNCTION2, SELECTDB, RESIZEDB, EXPIRETIME(_MS), FREQ,
// IDLE, SLOT_INFO, and 243: Redis's KEY_META or Valkey's SLOT_IMPORT, told
// apart by the magic; Redis Enterprise's RAM_LRU 107 and SLOT_NUM 121 are
// skipped). Module values of type 6 (Redis 4.0 release candidates) carry no
// annotations, so no reader can walk them: they fail with ErrModulePreGA,
// naming the key and the module. The on-disk format is written down in
// docs/rdb-format.md.
//
// # Errors
//
// A parse failure is a *CorruptionError carrying the byte offset and the key
// being read; it unwraps to one of the sentinel errors (ErrTruncated,
// ErrChecksum, ErrBadMagic, ...). The parser never panics on bad input and
// never allocates a size read from the file before the bytes have arrived.
package rdb
