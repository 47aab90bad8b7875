package rdb

// Formats added after Redis 7.4 / Valkey 8. Where the public sources were
// thin, the comment says what the layout rests on.

// skipSlotImport walks a Valkey 9 SLOT_IMPORT opcode (243 in a "VALKEY"
// file): [job name string] [n ranges] { [start slot] [end slot] }*
// (valkey src/cluster_migrateslots.c, clusterRDBLoadSlotImport).
func (p *Parser) skipSlotImport() error {
	if err := p.skipString(); err != nil {
		return err
	}
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		if err := p.skipLens(2); err != nil {
			return err
		}
	}
	return nil
}

// skipKeyMeta walks a Redis 8.6 KEY_META opcode (243 before a type byte):
// [n classes] { [4-byte class spec] [module-annotated value ... EOF] }*
// (redis keymeta.c, rdbSaveKeyMetadata). Module key metadata is not
// exposed; the key that follows is read as usual.
func (p *Parser) skipKeyMeta() error {
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		if err := p.r.skip(4); err != nil {
			return err
		}
		if err := p.walkModule(nil); err != nil {
			return err
		}
	}
	return nil
}

// walkHash2 reads a Valkey 9 HASH_2 value (type 22 in a "VALKEY" file):
// [n] { [field] [value] [expiry: 8-byte little-endian signed ms, -1 = none] }*
// (valkey src/rdb.c rdbLoadObject; EXPIRY_NONE is -1). A stored 0, a time in
// 1970, reads as no expiry.
func (p *Parser) walkHash2(visit bool) error {
	n, err := p.readLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		if !visit {
			if err := p.skipString(); err != nil {
				return err
			}
			if err := p.skipString(); err != nil {
				return err
			}
			if err := p.r.skip(8); err != nil {
				return err
			}
			continue
		}
		f, err := p.readString(&p.fieldBuf, true)
		if err != nil {
			return err
		}
		v, err := p.readString(&p.lzfBuf2, true)
		if err != nil {
			return err
		}
		u, err := p.r.uint64LE()
		if err != nil {
			return err
		}
		exp := int64(u)
		switch {
		case exp == -1: // EXPIRY_NONE
			exp = 0
		case exp < -1:
			return errorf(ErrMalformed, "hash field expiry %d", exp)
		}
		p.el.Kind, p.el.Member, p.el.Value, p.el.ExpireAt = HashField, f, v, exp
		if err := p.emit(); err != nil {
			return err
		}
	}
	return nil
}

// skipStreamIDMP walks the idempotent-producer tail of a Redis 8.6 stream
// (type 26), after the consumer groups: [idmp duration] [idmp max entries]
// [n producers] { [pid] [n] { [iid] [ms] [seq] }* } [iids added]
// [iids duplicates]. This layout is reconstructed from public descriptions
// (librdb's IdmpMeta/IdmpProducer/IdmpEntry callbacks and third-party
// parsers), not from Redis's rdb.c, and has not been checked against a file
// written by Redis 8.6.
func (p *Parser) skipStreamIDMP() error {
	if err := p.skipLens(2); err != nil {
		return err
	}
	producers, err := p.readLen()
	if err != nil {
		return err
	}
	for ; producers > 0; producers-- {
		if err := p.skipString(); err != nil {
			return err
		}
		n, err := p.readLen()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if err := p.skipString(); err != nil {
				return err
			}
			if err := p.skipLens(2); err != nil {
				return err
			}
		}
	}
	return p.skipLens(2)
}
