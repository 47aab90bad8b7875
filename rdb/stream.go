package rdb

import (
	"encoding/binary"
	"strconv"
)

// Stream entry flags in a stream listpack (t_stream.c).
const (
	streamItemDeleted    = 1
	streamItemSameFields = 2
)

// walkStream reads a stream value of type t; with visit it emits its
// entries, StreamInfo, groups, PELs and consumers, otherwise it only skips.
//
// Layout: [nodes] { [master ID: 16-byte string] [listpack string] }*
// [length] [last ID] (v2+: [first ID] [max deleted ID] [entries added])
// [groups] { [name] [last delivered ID] (v2+: [entries read])
// [pel] { [raw ID 16] [delivery ms 8] [count] }*
// [consumers] { [name] [seen ms 8] (v3+: [active ms 8]) [pel] { [raw ID 16] }* }* }*
func (p *Parser) walkStream(t byte, visit bool) error {
	if err := p.walkStreamNodes(visit); err != nil {
		return err
	}
	meta, err := p.readStreamMeta(t >= rdbStreamListpacks2)
	if err != nil {
		return err
	}
	if visit {
		p.el.Kind, p.el.Stream = StreamInfo, meta
		if err := p.emit(); err != nil {
			return err
		}
	}
	groups, err := p.readLen()
	if err != nil {
		return err
	}
	for ; groups > 0; groups-- {
		if err := p.walkStreamGroup(t, visit); err != nil {
			return err
		}
	}
	if t >= rdbStreamListpacks4 {
		return p.skipStreamIDMP()
	}
	return nil
}

// walkStreamNodes reads the entries' nodes: a master ID and a listpack
// each, emitted unless skipping (or stopped).
func (p *Parser) walkStreamNodes(visit bool) error {
	nodes, err := p.readLen()
	if err != nil {
		return err
	}
	for ; nodes > 0; nodes-- {
		if !visit || p.stopped {
			if err := p.skipString(); err != nil { // master ID
				return err
			}
			if err := p.skipString(); err != nil { // listpack
				return err
			}
			continue
		}
		k, err := p.readString(&p.fieldBuf, false)
		if err != nil {
			return err
		}
		if len(k) != 16 {
			return errorf(ErrMalformed, "stream node key of %d bytes, want 16", len(k))
		}
		master := StreamID{binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])}
		lp, err := p.readString(&p.lzfBuf, false)
		if err != nil {
			return err
		}
		if err := p.visitStreamListpack(master, lp); err != nil {
			return err
		}
	}
	return nil
}

// readStreamMeta reads the stream's length and last ID and, from
// STREAM_LISTPACKS_2 (v2), its first ID, max deleted ID and entries added.
func (p *Parser) readStreamMeta(v2 bool) (StreamMeta, error) {
	var meta StreamMeta
	var err error
	if meta.Length, err = p.readLen(); err != nil {
		return meta, err
	}
	if meta.LastID, err = p.readStreamID(); err != nil {
		return meta, err
	}
	if v2 {
		if meta.FirstID, err = p.readStreamID(); err != nil {
			return meta, err
		}
		if meta.MaxDeletedID, err = p.readStreamID(); err != nil {
			return meta, err
		}
		if meta.EntriesAdded, err = p.readLen(); err != nil {
			return meta, err
		}
	}
	meta.EntriesRead = -1
	return meta, nil
}

// walkStreamGroup reads one consumer group of a stream of type t: its
// name, last delivered ID, entries read (v2+), pending entries, consumers
// and (v5+) NACK zone.
func (p *Parser) walkStreamGroup(t byte, visit bool) error {
	el := &p.el
	var name []byte
	var err error
	if visit {
		name, err = p.readString(&p.groupBuf, true)
	} else {
		err = p.skipString()
	}
	if err != nil {
		return err
	}
	last, err := p.readStreamID()
	if err != nil {
		return err
	}
	entriesRead := int64(-1)
	if t >= rdbStreamListpacks2 {
		n, err := p.readLen()
		if err != nil {
			return err
		}
		entriesRead = int64(n) // Redis stores SCG_INVALID_ENTRIES_READ (-1) as all ones
	}
	if visit {
		el.Kind, el.Member, el.Group, el.ID = StreamGroup, name, name, last
		el.Stream = StreamMeta{EntriesRead: entriesRead}
		if err := p.emit(); err != nil {
			return err
		}
	}
	if err := p.walkStreamGroupPEL(name, visit); err != nil {
		return err
	}
	consumers, err := p.readLen()
	if err != nil {
		return err
	}
	for ; consumers > 0; consumers-- {
		if err := p.walkStreamConsumer(t, name, visit); err != nil {
			return err
		}
	}
	if t >= rdbStreamListpacks5 {
		// The NACK zone: [n] { [ID: 16 raw] }*, group PEL entries no
		// consumer owns (already visited as StreamPending).
		n, err := p.readLen()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if err := p.r.skip(16); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkStreamGroupPEL reads the pending entries of group name: an ID, the
// delivery time and the delivery count each.
func (p *Parser) walkStreamGroupPEL(name []byte, visit bool) error {
	el := &p.el
	pel, err := p.readLen()
	if err != nil {
		return err
	}
	for ; pel > 0; pel-- {
		id, err := p.readRawStreamID()
		if err != nil {
			return err
		}
		dt, err := p.r.uint64LE()
		if err != nil {
			return err
		}
		count, err := p.readLen()
		if err != nil {
			return err
		}
		if visit {
			el.Kind, el.Group, el.Member, el.ID = StreamPending, name, nil, id
			el.DeliveryTime, el.DeliveryCount = int64(dt), count
			if err := p.emit(); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkStreamConsumer reads one consumer of group name: its name, seen time,
// (v3+) active time and the IDs of its pending entries.
func (p *Parser) walkStreamConsumer(t byte, name []byte, visit bool) error {
	el := &p.el
	var cname []byte
	var err error
	if visit {
		cname, err = p.readString(&p.fieldBuf, true)
	} else {
		err = p.skipString()
	}
	if err != nil {
		return err
	}
	seen, err := p.r.uint64LE()
	if err != nil {
		return err
	}
	active := int64(-1)
	if t >= rdbStreamListpacks3 {
		a, err := p.r.uint64LE()
		if err != nil {
			return err
		}
		active = int64(a)
	}
	if visit {
		el.Kind, el.Group, el.Member, el.SeenTime, el.ActiveTime = StreamConsumer, name, cname, int64(seen), active
		if err := p.emit(); err != nil {
			return err
		}
	}
	pel, err := p.readLen()
	if err != nil {
		return err
	}
	for ; pel > 0; pel-- {
		id, err := p.readRawStreamID()
		if err != nil {
			return err
		}
		if visit {
			el.Kind, el.Group, el.Member, el.ID = StreamConsumerPending, name, cname, id
			if err := p.emit(); err != nil {
				return err
			}
		}
	}
	return nil
}

// lpInt reads the next listpack entry, which must be an integer.
func lpInt(it *packedIter) (int64, bool) {
	ok, err := it.next()
	if err != nil || !ok || !it.isInt {
		return 0, false
	}
	return it.v, true
}

// visitStreamListpack emits the live entries of one stream node.
//
// Master entry: [count] [deleted] [n master fields] [field]... [0]
// Entry: [flags] [ms-diff] [seq-diff] then, with SAMEFIELDS, [value] x n,
// else [n] ([field] [value]) x n; then [lp-count]. IDs are deltas from the
// node's master ID.
func (p *Parser) visitStreamListpack(master StreamID, lp []byte) error {
	bad := func(what string) error { return errorf(ErrMalformed, "stream listpack: %s", what) }
	it, err := newListpackIter(lp)
	if err != nil {
		return bad(err.Error())
	}
	if _, ok := lpInt(&it); !ok {
		return bad("count")
	}
	if _, ok := lpInt(&it); !ok {
		return bad("deleted count")
	}
	nf, ok := lpInt(&it)
	if !ok || nf < 0 || nf > int64(len(lp)) {
		return bad("master field count")
	}
	// Master fields are formatted once into masterScratch (see
	// packedBytesInto for why earlier slices into it stay valid).
	p.masterFields = p.masterFields[:0]
	p.masterScratch = p.masterScratch[:0]
	for range nf {
		if ok, err := it.next(); err != nil || !ok {
			return bad("master field")
		}
		p.masterFields = append(p.masterFields, p.packedBytesInto(&it, &p.masterScratch))
	}
	if z, ok := lpInt(&it); !ok || z != 0 {
		return bad("master entry terminator")
	}
	el := &p.el
	for !p.stopped {
		ok, err := it.next()
		if err != nil {
			return bad(err.Error())
		}
		if !ok {
			return nil
		}
		if !it.isInt {
			return bad("entry flags")
		}
		flags := it.v
		msd, ok1 := lpInt(&it)
		seqd, ok2 := lpInt(&it)
		if !ok1 || !ok2 {
			return bad("entry ID")
		}
		n := nf
		same := flags&streamItemSameFields != 0
		if !same {
			if n, ok = lpInt(&it); !ok || n < 0 || n > int64(len(lp)) {
				return bad("entry field count")
			}
		}
		p.fields = p.fields[:0]
		p.scratch = p.scratch[:0]
		for i := range n {
			if !same {
				if ok, err := it.next(); err != nil || !ok {
					return bad("entry field")
				}
				p.fields = append(p.fields, p.packedBytesInto(&it, &p.scratch))
			} else {
				p.fields = append(p.fields, p.masterFields[i])
			}
			if ok, err := it.next(); err != nil || !ok {
				return bad("entry value")
			}
			p.fields = append(p.fields, p.packedBytesInto(&it, &p.scratch))
		}
		if _, ok := lpInt(&it); !ok {
			return bad("entry lp-count")
		}
		if flags&streamItemDeleted != 0 {
			continue
		}
		el.Kind, el.Fields = StreamEntry, p.fields
		el.ID = StreamID{master.Ms + uint64(msd), master.Seq + uint64(seqd)}
		if err := p.emit(); err != nil {
			return err
		}
	}
	return nil
}

// packedBytesInto returns the current entry's bytes, formatting an integer
// at the end of *scratch. When *scratch is full it moves to a new, larger
// array rather than growing in place, so slices already handed out keep
// pointing at intact bytes; the largest array is then reused for later
// entries. Growth follows the integers actually present, never a count read
// from the file.
func (p *Parser) packedBytesInto(it *packedIter, scratch *[]byte) []byte {
	if !it.isInt {
		return it.s
	}
	if cap(*scratch)-len(*scratch) < 20 {
		*scratch = make([]byte, 0, max(256, 2*cap(*scratch)))
	}
	start := len(*scratch)
	*scratch = strconv.AppendInt(*scratch, it.v, 10)
	return (*scratch)[start:len(*scratch):len(*scratch)]
}
