package rdb

import (
	"encoding/binary"
	"math"
	"strconv"
	"unsafe"
)

// Value returns the current entry's string value. Integer-encoded strings
// are formatted in decimal and LZF strings decompressed, both into buffers
// the Parser reuses. The bytes are valid until the next Next. Calling Value
// again for the same entry returns the same bytes. On a non-string entry it
// returns ErrWrongAccessor.
func (p *Parser) Value() ([]byte, error) {
	if !p.hasEntry {
		if p.err != nil {
			return nil, p.err
		}
		return nil, ErrValueConsumed
	}
	if p.rawType != rdbString {
		return nil, ErrWrongAccessor
	}
	if p.consumed {
		return p.value, nil
	}
	p.consumed = true
	v, err := p.readString(&p.lzfBuf, false)
	if err != nil {
		return nil, p.fail(err)
	}
	if v == nil {
		v = []byte{}
	}
	p.value = v
	return v, nil
}

// Visit calls fn for every element of the current entry's collection, in
// file order (see ElementKind for what each kind carries). The *Element and
// its byte slices are valid only during the call. If fn returns SkipRest the
// rest of the value is skipped and Visit returns nil; any other error stops
// the parse: Visit returns it and Err returns it too. A corrupt value is a
// *CorruptionError, also sticky. A value can be visited once.
func (p *Parser) Visit(fn func(*Element) error) error {
	if !p.hasEntry {
		if p.err != nil {
			return p.err
		}
		return ErrValueConsumed
	}
	if p.rawType == rdbString {
		return ErrWrongAccessor
	}
	if p.consumed {
		return ErrValueConsumed
	}
	p.consumed = true
	p.visiting, p.stopped = fn, false
	err := p.visitValue(p.rawType)
	p.visiting = nil
	if err != nil {
		if ce, ok := err.(*callbackError); ok {
			p.err = ce.err
			p.hasEntry = false
			p.stopWorker()
			return ce.err
		}
		return p.fail(err)
	}
	return nil
}

// callbackError carries a Visit callback's error through the walkers so it
// is not mistaken for corruption.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// emit passes p.el to the Visit callback unless SkipRest was returned.
func (p *Parser) emit() error {
	if p.stopped {
		return nil
	}
	if err := p.visiting(&p.el); err != nil {
		if err == SkipRest {
			p.stopped = true
			return nil
		}
		return &callbackError{err}
	}
	p.el.Index++
	return nil
}

// unsafeString views b as a string for strconv parsing, which does not keep
// its argument (error values copy it), so b may be reused afterwards.
func unsafeString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func parseScore(b []byte) (float64, error) {
	f, err := strconv.ParseFloat(unsafeString(b), 64)
	if err != nil {
		return 0, errorf(ErrMalformed, "zset score %q", b)
	}
	return f, nil
}

// packedBytes returns the current packed entry as bytes, formatting an
// integer into num.
func packedBytes(it *packedIter, num *[24]byte) []byte {
	if it.isInt {
		return strconv.AppendInt(num[:0], it.v, 10)
	}
	return it.s
}

func (p *Parser) skipLens(n int) error {
	for range n {
		if _, err := p.readLen(); err != nil {
			return err
		}
	}
	return nil
}

// skipValue walks over a value of RDB type t without decoding it.
func (p *Parser) skipValue(t byte) error {
	switch t {
	case rdbString, rdbHashZipmap, rdbListZiplist, rdbSetIntset, rdbZSetZiplist, rdbHashZiplist,
		rdbHashListpack, rdbZSetListpack, rdbSetListpack:
		return p.skipString()
	case rdbHashListpackExPreGA:
		if p.valkey {
			return errorf(ErrUnknownType, "type byte %d", t)
		}
		return p.skipString()
	case rdbList, rdbSet, rdbListQuicklist:
		n, err := p.readLen()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if err := p.skipString(); err != nil {
				return err
			}
		}
	case rdbHash:
		n, err := p.readLen()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if err := p.skipString(); err != nil {
				return err
			}
			if err := p.skipString(); err != nil {
				return err
			}
		}
	case rdbZSet, rdbZSet2:
		n, err := p.readLen()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if err := p.skipString(); err != nil {
				return err
			}
			if t == rdbZSet2 {
				err = p.r.skip(8)
			} else {
				var l byte
				if l, err = p.r.readByte(); err == nil && l < 253 {
					err = p.r.skip(int64(l))
				}
			}
			if err != nil {
				return err
			}
		}
	case rdbModule2:
		return p.walkModule(nil) // the module id was read with the key
	case rdbListQuicklist2:
		n, err := p.readLen()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if _, err := p.readLen(); err != nil { // container
				return err
			}
			if err := p.skipString(); err != nil {
				return err
			}
		}
	case rdbStreamListpacks, rdbStreamListpacks2, rdbStreamListpacks3, rdbStreamListpacks4, rdbStreamListpacks5:
		return p.walkStream(t, false)
	case rdbHashMetadataPreGA, rdbHashMetadata:
		if p.valkey {
			return p.walkHash2(false)
		}
		if t == rdbHashMetadata {
			if err := p.r.skip(8); err != nil {
				return err
			}
		}
		n, err := p.readLen()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if _, err := p.readLen(); err != nil {
				return err
			}
			if err := p.skipString(); err != nil {
				return err
			}
			if err := p.skipString(); err != nil {
				return err
			}
		}
	case rdbHashListpackEx:
		if err := p.r.skip(8); err != nil {
			return err
		}
		return p.skipString()
	default:
		return errorf(ErrUnknownType, "type byte %d", t)
	}
	return nil
}

// visitValue decodes a value of RDB type t, emitting its elements: it
// picks the visitor of t's encoding.
func (p *Parser) visitValue(t byte) error {
	el := &p.el
	el.Index = 0
	el.ExpireAt = 0
	el.Value = nil
	switch t {
	case rdbList:
		return p.visitStrings(ListItem)
	case rdbSet:
		return p.visitStrings(SetMember)
	case rdbZSet, rdbZSet2:
		return p.visitZSet(t == rdbZSet2)
	case rdbHash:
		return p.visitHash()
	case rdbHashMetadataPreGA, rdbHashMetadata:
		if p.valkey {
			return p.walkHash2(true)
		}
		return p.visitHashMetadata(t == rdbHashMetadata)
	case rdbModule2:
		return p.walkModule(p.emit)
	case rdbHashZipmap:
		return p.visitZipmap()
	case rdbSetIntset:
		return p.visitIntset()
	case rdbListZiplist, rdbZSetZiplist, rdbHashZiplist, rdbHashListpack, rdbZSetListpack, rdbSetListpack,
		rdbHashListpackExPreGA, rdbHashListpackEx:
		if t == rdbHashListpackEx {
			if err := p.r.skip(8); err != nil { // minimum field expiry, derivable from the fields
				return err
			}
		}
		b, err := p.readString(&p.lzfBuf, false)
		if err != nil {
			return err
		}
		return p.visitPacked(t, b)
	case rdbListQuicklist:
		return p.visitQuicklist()
	case rdbListQuicklist2:
		return p.visitQuicklist2()
	case rdbStreamListpacks, rdbStreamListpacks2, rdbStreamListpacks3, rdbStreamListpacks4, rdbStreamListpacks5:
		return p.walkStream(t, true)
	}
	return errorf(ErrUnknownType, "type byte %d", t)
}

// visitStrings emits a length-prefixed sequence of strings (a linked list
// or a hashtable set) as elements of kind.
func (p *Parser) visitStrings(kind ElementKind) error {
	el := &p.el
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		s, err := p.readString(&p.lzfBuf, false)
		if err != nil {
			return err
		}
		el.Kind, el.Member = kind, s
		if err := p.emit(); err != nil {
			return err
		}
	}
	return nil
}

// visitZSet emits a skiplist sorted set: member strings, each with a score
// as 8 binary bytes (ZSET_2) or as ASCII text (the old ZSET).
func (p *Parser) visitZSet(binaryScores bool) error {
	el := &p.el
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		m, err := p.readString(&p.fieldBuf, true)
		if err != nil {
			return err
		}
		var score float64
		if binaryScores {
			u, err := p.r.uint64LE()
			if err != nil {
				return err
			}
			score = math.Float64frombits(u)
		} else if score, err = p.readASCIIDouble(); err != nil {
			return err
		}
		el.Kind, el.Member, el.Score = ZSetMember, m, score
		if err := p.emit(); err != nil {
			return err
		}
	}
	return nil
}

// visitHash emits a hashtable hash: field and value strings.
func (p *Parser) visitHash() error {
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		if err := p.visitHashPair(0); err != nil {
			return err
		}
	}
	return nil
}

// visitHashMetadata emits a Redis hash with field expiries: each field's
// expiry is absolute (pre-GA) or, with relative set (HASH_METADATA),
// relative to a minimum read first, plus one (0 meaning none).
func (p *Parser) visitHashMetadata(relative bool) error {
	var minExpire uint64
	if relative {
		u, err := p.r.uint64LE()
		if err != nil {
			return err
		}
		minExpire = u
	}
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		ttl, err := p.readLen()
		if err != nil {
			return err
		}
		expireAt := ttl // pre-GA: absolute
		if relative && ttl != 0 {
			expireAt = ttl + minExpire - 1 // 0 means none; else relative to the minimum, +1
		}
		if expireAt > math.MaxInt64 {
			return errorf(ErrMalformed, "hash field expiry %d", expireAt)
		}
		if err := p.visitHashPair(int64(expireAt)); err != nil {
			return err
		}
	}
	return nil
}

// visitZipmap emits a zipmap hash (RDB 2-3): one string of field/value pairs.
func (p *Parser) visitZipmap() error {
	el := &p.el
	b, err := p.readString(&p.lzfBuf, false)
	if err != nil {
		return err
	}
	it, err := newZipmapIter(b)
	if err != nil {
		return errorf(ErrMalformed, "%v", err)
	}
	for !p.stopped {
		f, v, ok, err := it.next()
		if err != nil {
			return errorf(ErrMalformed, "%v", err)
		}
		if !ok {
			break
		}
		el.Kind, el.Member, el.Value, el.ExpireAt = HashField, f, v, 0
		if err := p.emit(); err != nil {
			return err
		}
	}
	return nil
}

// visitIntset emits an intset: one string of integers, each emitted as its
// decimal text.
func (p *Parser) visitIntset() error {
	el := &p.el
	b, err := p.readString(&p.lzfBuf, false)
	if err != nil {
		return err
	}
	it, err := newIntsetIter(b)
	if err != nil {
		return errorf(ErrMalformed, "%v", err)
	}
	for !p.stopped {
		v, ok := it.next()
		if !ok {
			break
		}
		el.Kind, el.Member = SetMember, strconv.AppendInt(p.numA[:0], v, 10)
		if err := p.emit(); err != nil {
			return err
		}
	}
	return nil
}

// visitQuicklist emits a quicklist (RDB 7-9): a sequence of ziplists.
func (p *Parser) visitQuicklist() error {
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		b, err := p.readString(&p.lzfBuf, false)
		if err != nil {
			return err
		}
		if err := p.visitPacked(rdbListZiplist, b); err != nil {
			return err
		}
	}
	return nil
}

// visitQuicklist2 emits a quicklist 2 (RDB 10+): nodes that are each a
// listpack or one large plain item.
func (p *Parser) visitQuicklist2() error {
	el := &p.el
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		container, err := p.readLen()
		if err != nil {
			return err
		}
		b, err := p.readString(&p.lzfBuf, false)
		if err != nil {
			return err
		}
		switch container {
		case 1: // PLAIN: one large item stored as is
			el.Kind, el.Member = ListItem, b
			if err := p.emit(); err != nil {
				return err
			}
		case 2: // PACKED: a listpack
			if err := p.visitPacked(listpackList, b); err != nil {
				return err
			}
		default:
			return errorf(ErrMalformed, "quicklist node container %d", container)
		}
	}
	return nil
}

// listpackList is a pseudo type for visitPacked: a quicklist2 listpack node.
const listpackList = rdbSetListpack + 100

// visitHashPair reads a field and a value string and emits them.
func (p *Parser) visitHashPair(expireAt int64) error {
	f, err := p.readString(&p.fieldBuf, true)
	if err != nil {
		return err
	}
	v, err := p.readString(&p.lzfBuf2, false)
	if err != nil {
		return err
	}
	p.el.Kind, p.el.Member, p.el.Value, p.el.ExpireAt = HashField, f, v, expireAt
	return p.emit()
}

// readASCIIDouble reads a type-3 zset score: a length byte (253 NaN, 254
// +Inf, 255 -Inf) then that many ASCII characters.
func (p *Parser) readASCIIDouble() (float64, error) {
	l, err := p.r.readByte()
	if err != nil {
		return 0, err
	}
	switch l {
	case 253:
		return math.NaN(), nil
	case 254:
		return math.Inf(1), nil
	case 255:
		return math.Inf(-1), nil
	}
	b, err := p.r.read(int(l))
	if err != nil {
		return 0, err
	}
	return parseScore(b)
}

// visitPacked walks a ziplist or listpack value of RDB type t.
func (p *Parser) visitPacked(t byte, b []byte) error {
	var it packedIter
	var err error
	switch t {
	case rdbListZiplist, rdbZSetZiplist, rdbHashZiplist:
		it, err = newZiplistIter(b)
	default:
		it, err = newListpackIter(b)
	}
	if err != nil {
		return errorf(ErrMalformed, "%v", err)
	}
	el := &p.el
	for !p.stopped {
		ok, err := it.next()
		if err != nil {
			return errorf(ErrMalformed, "%v", err)
		}
		if !ok {
			return nil
		}
		first := packedBytes(&it, &p.numA)
		switch t {
		case rdbListZiplist, listpackList:
			el.Kind, el.Member = ListItem, first
		case rdbSetListpack:
			el.Kind, el.Member = SetMember, first
		case rdbZSetZiplist, rdbZSetListpack:
			if ok, err = it.next(); err != nil || !ok {
				return errorf(ErrMalformed, "zset member %q without a score", first)
			}
			score := float64(it.v)
			if !it.isInt {
				if score, err = parseScore(it.s); err != nil {
					return err
				}
			}
			el.Kind, el.Member, el.Score = ZSetMember, first, score
		default: // hashes: field, value[, ttl]
			if ok, err = it.next(); err != nil || !ok {
				return errorf(ErrMalformed, "hash field %q without a value", first)
			}
			el.Kind, el.Member, el.Value, el.ExpireAt = HashField, first, packedBytes(&it, &p.numB), 0
			if t == rdbHashListpackEx || t == rdbHashListpackExPreGA {
				if ok, err = it.next(); err != nil || !ok || !it.isInt || it.v < 0 {
					return errorf(ErrMalformed, "hash field %q without a valid TTL", first)
				}
				el.ExpireAt = it.v // 0: no expiry
			}
		}
		if err := p.emit(); err != nil {
			return err
		}
	}
	return nil
}

// walkModule walks module opcodes up to their EOF opcode, emitting each item
// when emit is not nil (the module id was already read).
func (p *Parser) walkModule(emit func() error) error {
	el := &p.el
	for {
		op, err := p.readLen()
		if err != nil {
			return err
		}
		el.Kind, el.ModuleOpcode, el.Member, el.Int, el.Score = ModuleItem, int(op), nil, 0, 0
		switch op {
		case 0:
			return nil
		case ModuleSint, ModuleUint:
			v, err := p.readLen()
			if err != nil {
				return err
			}
			el.Int = int64(v)
		case ModuleFloat:
			v, err := p.r.uint32LE()
			if err != nil {
				return err
			}
			el.Score = float64(math.Float32frombits(v))
		case ModuleDouble:
			v, err := p.r.uint64LE()
			if err != nil {
				return err
			}
			el.Score = math.Float64frombits(v)
		case ModuleString:
			if emit == nil {
				if err := p.skipString(); err != nil {
					return err
				}
				continue
			}
			s, err := p.readString(&p.lzfBuf, false)
			if err != nil {
				return err
			}
			el.Member = s
		default:
			return errorf(ErrMalformed, "module opcode %d", op)
		}
		if emit != nil {
			if err := emit(); err != nil {
				return err
			}
		}
	}
}

// readStreamID reads an ID stored as two lengths (ms, seq).
func (p *Parser) readStreamID() (StreamID, error) {
	ms, err := p.readLen()
	if err != nil {
		return StreamID{}, err
	}
	seq, err := p.readLen()
	return StreamID{ms, seq}, err
}

// readRawStreamID reads an ID stored as 16 big-endian bytes.
func (p *Parser) readRawStreamID() (StreamID, error) {
	b, err := p.r.read(16)
	if err != nil {
		return StreamID{}, err
	}
	return StreamID{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}, nil
}
