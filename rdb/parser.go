package rdb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
)

// RDB opcodes (the byte before a record where a value type byte would be).
const (
	opKeyMeta       = 243 // Redis 8.6: key metadata before the type byte; Valkey 9: SLOT_IMPORT
	opSlotInfo      = 244
	opFunction2     = 245
	opFunctionPreGA = 246
	opModuleAux     = 247
	opIdle          = 248
	opFreq          = 249
	opAux           = 250
	opResizeDB      = 251
	opExpireTimeMs  = 252
	opExpireTime    = 253
	opSelectDB      = 254
	opEOF           = 255

	// Redis Enterprise only (librdb's __RDB_OPCODE_RAM_LRU and
	// __RDB_OPCODE_SLOT_NUM): one length each, meaning private to it.
	opEntRAMLRU  = 107 // before a key's type byte, like IDLE
	opEntSlotNum = 121
)

// RDB value type bytes.
const (
	rdbString              = 0
	rdbList                = 1
	rdbSet                 = 2
	rdbZSet                = 3
	rdbHash                = 4
	rdbZSet2               = 5
	rdbModulePreGA         = 6
	rdbModule2             = 7
	rdbHashZipmap          = 9
	rdbListZiplist         = 10
	rdbSetIntset           = 11
	rdbZSetZiplist         = 12
	rdbHashZiplist         = 13
	rdbListQuicklist       = 14
	rdbStreamListpacks     = 15
	rdbHashListpack        = 16
	rdbZSetListpack        = 17
	rdbListQuicklist2      = 18
	rdbStreamListpacks2    = 19
	rdbSetListpack         = 20
	rdbStreamListpacks3    = 21
	rdbHashMetadataPreGA   = 22 // Valkey 9: HASH_2
	rdbHashListpackExPreGA = 23
	rdbHashMetadata        = 24
	rdbHashListpackEx      = 25
	rdbStreamListpacks4    = 26
	rdbStreamListpacks5    = 27
)

// maxRedisVersion is the newest Redis RDB version accepted: 13 is Redis 8.6;
// 14 (Redis 8.8) adds stream type 27, read here, and types 28 and up
// (arrays, hash templates, GCRA), which fail with ErrUnknownType. Valkey files ("VALKEY" magic) use
// versions from 80 on.
const (
	maxRedisVersion  = 14
	minValkeyVersion = 80
	maxValkeyVersion = 81
	maxAuxFields     = 1024 // AUX fields kept in Header; later ones are read and dropped
)

// Parser reads an RDB file key by key. It is not safe for concurrent use.
type Parser struct {
	r    reader
	opts Options
	hdr  Header

	closer  func() error // Open's file and mapping; nil for NewParser
	path    string       // file name for errors, from Open
	mapping *mapping     // Open's memory map, if any

	started bool
	done    bool
	err     error // sticky: set once, returned by Err

	entry    Entry
	hasEntry bool // entry is current: its value may be accessed
	consumed bool // the current value has been read (or partly read and failed)
	rawType  byte // RDB type byte of the current entry
	value    []byte
	valkey   bool // "VALKEY" magic: 243 and 22 mean what Valkey says

	db   int
	slot int

	// Reused buffers, grown to the largest value seen and kept. Which
	// buffer a string is decoded into decides how long it lives:
	keyBuf   []byte // the current key (streaming input); valid until the next Next
	lzfBuf   []byte // LZF/int strings: Value's result, list items, listpacks; until the next read
	lzfBuf2  []byte // hash values, while the field sits in fieldBuf
	fieldBuf []byte // a field or member that must survive the read of its value or score
	groupBuf []byte // the stream group name while its PEL and consumers are read

	numA, numB    [24]byte // decimal form of packed integers, one per slot of an element
	scratch       []byte   // stream entry integers (see packedBytesInto)
	masterFields  [][]byte // fields of the current stream node's master entry
	masterScratch []byte   // their integers
	fields        [][]byte // Element.Fields of the current stream entry

	el         Element              // passed to the Visit callback; valid during the call only
	visiting   func(*Element) error // the Visit callback; nil outside Visit
	stopped    bool                 // SkipRest returned during this Visit
	moduleID   uint64               // last module type id seen, and its decoded name
	moduleName string
}

// NewParser returns a Parser reading r. opts may be nil. Nothing is read
// until the first Next.
func NewParser(r io.Reader, opts *Options) *Parser {
	p := &Parser{opts: opts.normalized()}
	p.r = reader{src: r, initSize: p.opts.BufferSize, crcOn: !p.opts.SkipChecksum}
	p.entry.Idle, p.entry.Freq, p.entry.Slot = -1, -1, -1
	p.slot = -1
	return p
}

// NewBytesParser returns a Parser over an in-memory file; values and keys
// are then slices of data itself, never copied.
func NewBytesParser(data []byte, opts *Options) *Parser {
	p := NewParser(nil, opts)
	p.r.buf, p.r.end = data, len(data)
	return p
}

// Reset makes p parse a new input read from r, as NewParser would, keeping
// its options and its grown buffers, so scanning many files costs no new
// allocations. If p came from Open, its file is closed first.
func (p *Parser) Reset(r io.Reader) {
	_ = p.Close()
	var window []byte
	if p.r.src != nil { // our own window (not the caller's bytes or a mapping)
		window = p.r.buf[:cap(p.r.buf)]
		if len(window) > maxRetainedBuffer {
			window = nil
		}
	}
	spare := p.r.spare // Close stopped the helper: no chunk is in flight
	p.r = reader{src: r, buf: window, spare: spare, initSize: p.opts.BufferSize, crcOn: !p.opts.SkipChecksum}
	p.hdr = Header{Aux: p.hdr.Aux[:0]}
	p.started, p.done, p.err = false, false, nil
	p.entry = Entry{Idle: -1, Freq: -1, Slot: -1}
	p.hasEntry, p.consumed, p.value, p.valkey = false, false, nil, false
	p.db, p.slot = 0, -1
	p.path, p.mapping = "", nil
}

// Header returns the file header and the AUX fields read so far.
func (p *Parser) Header() *Header { return &p.hdr }

// Entry returns the current key. It is owned by the Parser: valid until the
// next Next. It is nil before the first Next and after Next returns false.
func (p *Parser) Entry() *Entry {
	if !p.hasEntry {
		return nil
	}
	return &p.entry
}

// Err returns the error that stopped Next, or nil at a clean end of file.
func (p *Parser) Err() error { return p.err }

// Offset returns the byte offset of the next unread byte.
func (p *Parser) Offset() int64 { return p.r.offset() }

// Close stops the checksum helper goroutine, if one is running, and releases
// the file (and its mapping) opened by Open. A parse that reaches the end or
// fails stops the helper by itself; call Close when abandoning a parse half
// way (a dropped Parser's helper is otherwise only stopped by a cleanup after
// garbage collection). After Close no borrowed bytes may be used.
func (p *Parser) Close() error {
	p.hasEntry = false
	p.stopWorker()
	if p.closer == nil {
		return nil
	}
	p.done = true // the input is gone: Next returns false, Err keeps its value
	c := p.closer
	p.closer = nil
	p.r.buf = nil
	p.r.pos, p.r.end = 0, 0
	return c()
}

// stopWorker ends the checksum helper, if any, before its input goes away.
func (p *Parser) stopWorker() {
	if p.r.worker != nil {
		p.r.worker.stop()
		p.r.worker = nil
	}
}

// fail records err as the sticky error, as a *CorruptionError at the current
// offset unless it is one already or it came from a Visit callback.
func (p *Parser) fail(err error) error {
	if p.err != nil {
		return p.err
	}
	p.err = p.corrupt(err)
	p.hasEntry = false
	p.stopWorker()
	return p.err
}

func (p *Parser) corrupt(err error) error {
	if _, ok := err.(*CorruptionError); ok {
		return err
	}
	ce := &CorruptionError{Path: p.path, Offset: p.r.offset(), Err: err}
	if p.hasEntry || p.entry.Key != nil {
		ce.Key = bytes.Clone(p.entry.Key)
		if ce.Key == nil {
			ce.Key = []byte{}
		}
	}
	return ce
}

func errorf(base error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{base}, args...)...)
}

// Next advances to the next key. It returns false at the end of the file or
// on an error (see Err). If the previous key's value was not read, it is
// skipped without being decoded.
func (p *Parser) Next() bool {
	if p.err != nil || p.done {
		return false
	}
	if !p.started {
		p.started = true
		if err := p.readHeader(); err != nil {
			p.fail(err)
			return false
		}
		p.attachCRCWorker()
	}
	if p.hasEntry && !p.consumed {
		if err := p.skipValue(p.rawType); err != nil {
			p.fail(err)
			return false
		}
	}
	p.hasEntry = false
	p.entry.Key = nil
	p.r.pinLive = false
	p.value = nil
	p.r.shrink()
	// Like the window, an output buffer a large value grew is not kept for
	// the rest of the file (a 200 MB string would hold 200 MB to the end).
	if cap(p.lzfBuf) > maxRetainedBuffer {
		p.lzfBuf = nil
	}
	if cap(p.lzfBuf2) > maxRetainedBuffer {
		p.lzfBuf2 = nil
	}
	p.releaseMapped()
	if err := p.nextRecord(); err != nil {
		p.fail(err)
		return false
	}
	return p.hasEntry
}

func (p *Parser) readHeader() error {
	b, err := p.r.read(9)
	if err != nil {
		if err == ErrTruncated {
			return ErrBadMagic
		}
		return err
	}
	var digits []byte
	switch {
	case bytes.HasPrefix(b, []byte("REDIS")):
		p.hdr.Magic, digits = "REDIS", b[5:]
	case bytes.HasPrefix(b, []byte("VALKEY")):
		p.hdr.Magic, digits = "VALKEY", b[6:]
		p.valkey = true
	default:
		return ErrBadMagic
	}
	v := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return errorf(ErrBadMagic, "version %q is not a number", digits)
		}
		v = v*10 + int(c-'0')
	}
	p.hdr.Version = v
	switch {
	case p.valkey && (v < minValkeyVersion || v > maxValkeyVersion),
		!p.valkey && (v < 1 || v > maxRedisVersion):
		return errorf(ErrUnsupportedVersion, "%s version %d", p.hdr.Magic, v)
	}
	return nil
}

// nextRecord reads opcodes up to and including the next key, leaving its
// value unread; at EOF it checks the checksum and sets done. A key's
// record (Entry.Offset) starts at the first of the opcodes that describe
// it (expiry, LRU/LFU, key metadata), else at its type byte.
func (p *Parser) nextRecord() error {
	e := &p.entry
	e.ExpireAt, e.Idle, e.Freq = 0, -1, -1
	recStart := int64(-1)
	for {
		p.releaseMapped() // a filter may skip a whole file inside this loop
		off := p.r.offset()
		t, err := p.r.readByte()
		if err != nil {
			return err
		}
		switch t {
		case opEOF:
			return p.finish()
		case opSelectDB:
			if err := p.readSelectDB(); err != nil {
				return err
			}
			recStart = -1
			continue
		case rdbModulePreGA:
			return p.modulePreGA(recStart, off)
		}
		if isOpcode(t) {
			keyMeta, err := p.readOpcode(t)
			if err != nil {
				return err
			}
			if keyMeta && recStart < 0 {
				recStart = off
			}
			continue
		}
		// A key: read it and leave its value unread. (This stays inline:
		// as a function of its own it cost ~2% CPU of a keys-only pass.)
		if recStart < 0 {
			recStart = off
		}
		enc, typ, ok := p.classify(t)
		if !ok {
			return errorf(ErrUnknownType, "type byte %d", t)
		}
		// The key stays in the window; the reader copies it out only if
		// a refill comes before the next Next (see reader.pinned).
		key, err := p.readString(&p.keyBuf, false)
		if err != nil {
			return err
		}
		e.DB, e.Key, e.Type, e.Encoding, e.Slot, e.Offset = p.db, key, typ, enc, p.slot, recStart
		if !p.r.static() {
			p.r.pinned, p.r.pinBuf, p.r.pinLive = &e.Key, &p.keyBuf, true
		}
		e.Module = ""
		p.rawType = t
		p.hasEntry, p.consumed = true, false
		if t == rdbModule2 {
			if err := p.readModuleID(); err != nil {
				return err
			}
			e.Module = p.moduleName
		}
		if p.opts.Filter == nil || p.opts.Filter(e) {
			return nil
		}
		// Rejected: skip its value and read the next record.
		if err := p.skipValue(t); err != nil {
			return err
		}
		p.hasEntry = false
		e.ExpireAt, e.Idle, e.Freq, e.Key = 0, -1, -1, nil
		recStart = -1
	}
}

// isOpcode reports whether t is an opcode readOpcode reads rather than a
// value's type byte (a key follows); the check keeps the common case, a
// key, free of readOpcode's call.
func isOpcode(t byte) bool { return t >= opKeyMeta || t == opEntRAMLRU || t == opEntSlotNum }

// readOpcode reads the opcode t (its byte already read) into the parser's
// state or the next key's Entry. keyMeta says whether it describes the next
// key (expiry, LRU, LFU, key metadata): its record starts at the first
// such opcode. Others are about the file or the database (AUX, RESIZEDB,
// functions, slot info, ...).
func (p *Parser) readOpcode(t byte) (keyMeta bool, err error) {
	e := &p.entry
	switch t {
	case opExpireTime:
		v, err := p.r.uint32LE()
		if err != nil {
			return false, err
		}
		e.ExpireAt = int64(int32(v)) * 1000
		return true, nil
	case opExpireTimeMs:
		v, err := p.r.uint64LE()
		if err != nil {
			return false, err
		}
		e.ExpireAt = int64(v)
		return true, nil
	case opResizeDB:
		if _, err := p.readLen(); err != nil {
			return false, err
		}
		if _, err := p.readLen(); err != nil {
			return false, err
		}
		return false, nil
	case opAux:
		return false, p.readAux()
	case opFreq:
		v, err := p.r.readByte()
		if err != nil {
			return false, err
		}
		e.Freq = int(v)
		return true, nil
	case opIdle:
		v, err := p.readLen()
		if err != nil {
			return false, err
		}
		e.Idle = int64(min(v, math.MaxInt64))
		return true, nil
	case opModuleAux:
		return false, p.skipModuleAux()
	case opFunctionPreGA:
		return false, p.skipFunctionPreGA()
	case opFunction2:
		return false, p.skipString()
	case opSlotInfo:
		return false, p.readSlotInfo()
	case opKeyMeta:
		if p.valkey {
			return false, p.skipSlotImport()
		}
		return true, p.skipKeyMeta()
	case opEntRAMLRU, opEntSlotNum:
		if p.valkey {
			return false, errorf(ErrUnknownType, "type byte %d", t)
		}
		if _, err := p.readLen(); err != nil {
			return false, err
		}
		if t == opEntRAMLRU {
			return true, nil
		}
		return false, nil
	}
	return false, errorf(ErrUnknownType, "type byte %d", t)
}

// readSelectDB reads SELECTDB's database number.
func (p *Parser) readSelectDB() error {
	n, err := p.readLen()
	if err != nil {
		return err
	}
	if n > math.MaxInt32 {
		return errorf(ErrMalformed, "SELECTDB %d", n)
	}
	p.db = int(n)
	return nil
}

// readSlotInfo reads SLOT_INFO: the cluster slot of the keys that follow.
func (p *Parser) readSlotInfo() error {
	id, err := p.readLen()
	if err != nil {
		return err
	}
	for range 2 { // slot size, expires slot size
		if _, err := p.readLen(); err != nil {
			return err
		}
	}
	if id > 16383 {
		return errorf(ErrMalformed, "SLOT_INFO slot %d", id)
	}
	p.slot = int(id)
	return nil
}

// releaseMapped hands the pages of a mapped file before the current
// position back to the kernel once enough of them are done with. Nothing
// before pos is borrowed between records; the CRC is brought up to pos first.
func (p *Parser) releaseMapped() {
	if p.r.worker != nil && p.r.pos-p.r.crcPos >= crcChunk {
		p.r.sumCRC(p.r.pos)
	}
	if m := p.mapping; m != nil && p.r.pos-m.released >= releaseChunk {
		p.r.sumCRC(p.r.pos)
		m.release(min(p.r.pos, p.r.crcProgress()))
	}
}

// classify maps an RDB type byte to its encoding and logical type.
func (p *Parser) classify(t byte) (Encoding, Type, bool) {
	switch t {
	case rdbString:
		return EncString, String, true
	case rdbList:
		return EncList, List, true
	case rdbSet:
		return EncSet, Set, true
	case rdbZSet:
		return EncZSet, ZSet, true
	case rdbHash:
		return EncHash, Hash, true
	case rdbZSet2:
		return EncZSet2, ZSet, true
	case rdbModule2:
		return EncModule, Module, true
	case rdbHashZipmap:
		return EncZipmap, Hash, true
	case rdbListZiplist:
		return EncZiplist, List, true
	case rdbSetIntset:
		return EncIntset, Set, true
	case rdbZSetZiplist:
		return EncZSetZiplist, ZSet, true
	case rdbHashZiplist:
		return EncHashZiplist, Hash, true
	case rdbListQuicklist:
		return EncQuicklist, List, true
	case rdbStreamListpacks:
		return EncStreamListpacks, Stream, true
	case rdbHashListpack:
		return EncHashListpack, Hash, true
	case rdbZSetListpack:
		return EncZSetListpack, ZSet, true
	case rdbListQuicklist2:
		return EncQuicklist2, List, true
	case rdbStreamListpacks2:
		return EncStreamListpacks2, Stream, true
	case rdbSetListpack:
		return EncSetListpack, Set, true
	case rdbStreamListpacks3:
		return EncStreamListpacks3, Stream, true
	case rdbHashMetadataPreGA:
		if p.valkey {
			return EncHash2, Hash, true
		}
		return EncHashMetadataPreGA, Hash, true
	case rdbHashListpackExPreGA:
		if p.valkey {
			return 0, 0, false
		}
		return EncHashListpackExPreGA, Hash, true
	case rdbHashMetadata:
		return EncHashMetadata, Hash, !p.valkey
	case rdbHashListpackEx:
		return EncHashListpackEx, Hash, !p.valkey
	case rdbStreamListpacks4:
		return EncStreamListpacks4, Stream, !p.valkey
	case rdbStreamListpacks5:
		return EncStreamListpacks5, Stream, !p.valkey
	}
	return 0, 0, false
}

func (p *Parser) finish() error {
	sum := p.r.finishCRC(p.r.pos)
	p.done = true
	if p.hdr.Version < 5 && !p.valkey {
		return nil // no checksum before RDB 5
	}
	b, err := p.r.read(8)
	if err != nil {
		return err
	}
	stored := binary.LittleEndian.Uint64(b)
	p.hdr.Checksum = stored
	if stored != 0 && !p.opts.SkipChecksum && stored != sum {
		return errorf(ErrChecksum, "stored %016x, computed %016x", stored, sum)
	}
	return nil
}

func (p *Parser) readAux() error {
	k, err := p.readString(&p.fieldBuf, true)
	if err != nil {
		return err
	}
	v, err := p.readString(&p.lzfBuf, false)
	if err != nil {
		return err
	}
	if len(p.hdr.Aux) < maxAuxFields {
		p.hdr.Aux = append(p.hdr.Aux, AuxField{Key: string(k), Value: string(v)})
	}
	return nil
}

// readLen reads an RDB length; a special (string) encoding is an error here.
func (p *Parser) readLen() (uint64, error) {
	n, special, err := p.readLenOrEnc()
	if err != nil {
		return 0, err
	}
	if special {
		return 0, errorf(ErrMalformed, "string encoding %d where a length belongs", n)
	}
	return n, nil
}

// readLenOrEnc reads a length; special reports the 11xxxxxx form, whose low
// six bits (returned as n) name a string encoding.
func (p *Parser) readLenOrEnc() (n uint64, special bool, err error) {
	// Fast path: enough bytes in the window for any length form.
	if r := &p.r; r.end-r.pos >= 9 {
		w := r.buf[r.pos:r.end]
		c := w[0]
		switch c >> 6 {
		case 0:
			r.pos++
			return uint64(c & 0x3f), false, nil
		case 1:
			r.pos += 2
			return uint64(c&0x3f)<<8 | uint64(w[1]), false, nil
		case 3:
			r.pos++
			return uint64(c & 0x3f), true, nil
		}
		switch c {
		case 0x80:
			r.pos += 5
			return uint64(binary.BigEndian.Uint32(w[1:])), false, nil
		case 0x81:
			r.pos += 9
			return binary.BigEndian.Uint64(w[1:]), false, nil
		}
		return 0, false, errorf(ErrMalformed, "length prefix 0x%02x", c)
	}
	return p.readLenOrEncSlow()
}

func (p *Parser) readLenOrEncSlow() (n uint64, special bool, err error) {
	b, err := p.r.readByte()
	if err != nil {
		return 0, false, err
	}
	switch b >> 6 {
	case 0:
		return uint64(b & 0x3f), false, nil
	case 1:
		c, err := p.r.readByte()
		if err != nil {
			return 0, false, err
		}
		return uint64(b&0x3f)<<8 | uint64(c), false, nil
	case 2:
		switch b {
		case 0x80:
			s, err := p.r.read(4)
			if err != nil {
				return 0, false, err
			}
			return uint64(binary.BigEndian.Uint32(s)), false, nil
		case 0x81:
			s, err := p.r.read(8)
			if err != nil {
				return 0, false, err
			}
			return binary.BigEndian.Uint64(s), false, nil
		}
		return 0, false, errorf(ErrMalformed, "length prefix 0x%02x", b)
	}
	return uint64(b & 0x3f), true, nil
}

// checkSize validates a byte length read from the file before anything is
// read or allocated for it.
func (p *Parser) checkSize(n uint64) (int, error) {
	if n > uint64(p.opts.MaxValueSize) {
		return 0, errorf(ErrTooLarge, "length %d exceeds the %d-byte limit", n, p.opts.MaxValueSize)
	}
	if rem := p.r.remaining(); rem >= 0 && n > uint64(rem) {
		return 0, errorf(ErrTruncated, "length %d but only %d bytes left", n, rem)
	}
	return int(n), nil
}

// readString reads one RDB string. A raw string is returned as a window
// slice, valid until the next read, unless stable is set: then it is copied
// into *dst (for a streaming source) so it survives later reads. Integer and
// LZF encodings are always decoded into *dst. *dst is reused across calls.
func (p *Parser) readString(dst *[]byte, stable bool) ([]byte, error) {
	// Fast path: a short raw string (6-bit length) wholly in the window.
	if r := &p.r; r.pos < r.end {
		if c := r.buf[r.pos]; c < 0x40 && int64(c) <= p.opts.MaxValueSize && r.end-r.pos > int(c) {
			start := r.pos + 1
			end := start + int(c)
			r.pos = end
			if stable && r.src != nil {
				*dst = append((*dst)[:0], r.buf[start:end]...)
				return *dst, nil
			}
			return r.buf[start:end:end], nil
		}
	}
	n, special, err := p.readLenOrEnc()
	if err != nil {
		return nil, err
	}
	if special {
		switch n {
		case 0, 1, 2:
			v, err := p.readEncInt(int(n))
			if err != nil {
				return nil, err
			}
			*dst = strconv.AppendInt((*dst)[:0], v, 10)
			return *dst, nil
		case 3:
			return p.readLZF(dst)
		}
		return nil, errorf(ErrMalformed, "unknown string encoding %d", n)
	}
	size, err := p.checkSize(n)
	if err != nil {
		return nil, err
	}
	s, err := p.r.read(size)
	if err != nil {
		return nil, err
	}
	if stable && !p.r.static() {
		*dst = append((*dst)[:0], s...)
		return *dst, nil
	}
	return s, nil
}

func (p *Parser) readEncInt(enc int) (int64, error) {
	switch enc {
	case 0:
		b, err := p.r.readByte()
		return int64(int8(b)), err
	case 1:
		b, err := p.r.read(2)
		if err != nil {
			return 0, err
		}
		return int64(int16(binary.LittleEndian.Uint16(b))), nil
	default:
		b, err := p.r.read(4)
		if err != nil {
			return 0, err
		}
		return int64(int32(binary.LittleEndian.Uint32(b))), nil
	}
}

func (p *Parser) readLZF(dst *[]byte) ([]byte, error) {
	clen, err := p.readLen()
	if err != nil {
		return nil, err
	}
	ulen, err := p.readLen()
	if err != nil {
		return nil, err
	}
	csize, err := p.checkSize(clen)
	if err != nil {
		return nil, err
	}
	if ulen > uint64(p.opts.MaxValueSize) {
		return nil, errorf(ErrTooLarge, "LZF uncompressed length %d exceeds the %d-byte limit", ulen, p.opts.MaxValueSize)
	}
	if ulen > uint64(csize)*lzfMaxRatio || (ulen == 0) != (csize == 0) {
		return nil, errorf(ErrMalformed, "LZF lengths %d compressed, %d uncompressed", csize, ulen)
	}
	in, err := p.r.read(csize) // the compressed bytes arrive before the output is sized
	if err != nil {
		return nil, err
	}
	if uint64(cap(*dst)) < ulen {
		*dst = make([]byte, ulen)
	}
	out := (*dst)[:ulen]
	if err := lzfDecompress(in, out); err != nil {
		return nil, errorf(ErrMalformed, "%v", err)
	}
	*dst = out
	return out, nil
}

// skipString walks over one RDB string without decoding it: LZF payloads
// are skipped by their compressed length.
func (p *Parser) skipString() error {
	// Fast path: a short raw string (6-bit length) wholly in the window.
	if r := &p.r; r.pos < r.end {
		if c := r.buf[r.pos]; c < 0x40 && int64(c) <= p.opts.MaxValueSize && r.end-r.pos > int(c) {
			r.pos += 1 + int(c)
			return nil
		}
	}
	n, special, err := p.readLenOrEnc()
	if err != nil {
		return err
	}
	if special {
		switch n {
		case 0:
			return p.r.skip(1)
		case 1:
			return p.r.skip(2)
		case 2:
			return p.r.skip(4)
		case 3:
			clen, err := p.readLen()
			if err != nil {
				return err
			}
			if _, err := p.readLen(); err != nil {
				return err
			}
			n = clen
		default:
			return errorf(ErrMalformed, "unknown string encoding %d", n)
		}
	}
	if n > uint64(p.opts.MaxValueSize) {
		return errorf(ErrTooLarge, "length %d exceeds the %d-byte limit", n, p.opts.MaxValueSize)
	}
	return p.r.skip(int64(n))
}

func (p *Parser) skipFunctionPreGA() error {
	// Redis 7.0 RC1/RC2: name, engine name, has-description flag,
	// [description], code.
	for range 2 {
		if err := p.skipString(); err != nil {
			return err
		}
	}
	hasDesc, err := p.readLen()
	if err != nil {
		return err
	}
	if hasDesc != 0 {
		if err := p.skipString(); err != nil {
			return err
		}
	}
	return p.skipString()
}

func (p *Parser) skipModuleAux() error {
	if _, err := p.readLen(); err != nil { // module id
		return err
	}
	whenOp, err := p.readLen()
	if err != nil {
		return err
	}
	if whenOp != ModuleUint {
		return errorf(ErrMalformed, "MODULE_AUX when-opcode %d", whenOp)
	}
	if _, err := p.readLen(); err != nil { // when
		return err
	}
	return p.walkModule(nil)
}

// modulePreGA reads the key and module id of a pre-GA module value (type 6,
// written by Redis 4.0 release candidates) and fails naming both: such a
// value is the module's own bytes with no type annotations and no end mark,
// so nothing but the module can tell where it ends (Redis since 4.0 GA,
// librdb and HDT3213/rdb refuse it too).
func (p *Parser) modulePreGA(recStart, off int64) error {
	if recStart < 0 {
		recStart = off
	}
	key, err := p.readString(&p.keyBuf, false)
	if err != nil {
		return err
	}
	e := &p.entry
	e.DB, e.Key, e.Type, e.Encoding, e.Slot, e.Offset = p.db, key, Module, EncModule, p.slot, recStart
	if err := p.readModuleID(); err != nil {
		return err
	}
	return errorf(ErrModulePreGA, "module %q encoding version %d", p.moduleName, p.moduleID&1023)
}

// readModuleID reads a module value's 64-bit type id and names it.
func (p *Parser) readModuleID() error {
	id, err := p.readLen()
	if err != nil {
		return err
	}
	if id != p.moduleID || p.moduleName == "" {
		p.moduleID, p.moduleName = id, moduleTypeName(id)
	}
	return nil
}

const moduleNameCharset = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// moduleTypeName decodes the 9-character type name from the high 54 bits of
// a module type id (the low 10 bits are the encoding version).
func moduleTypeName(id uint64) string {
	var name [9]byte
	id >>= 10
	for j := 8; j >= 0; j-- {
		name[j] = moduleNameCharset[id&63]
		id >>= 6
	}
	return string(name[:])
}
