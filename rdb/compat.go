package rdb

// Formats described by public sources only loosely; kept apart so what is
// guessed and what is read from redis/valkey sources stays visible.

// skipSlotImport walks a Valkey 9 SLOT_IMPORT opcode (243 in a "VALKEY"
// file). TODO(format): confirm against valkey src/rdb.c.
func (p *Parser) skipSlotImport() error {
	return errorf(ErrUnknownType, "Valkey SLOT_IMPORT opcode not supported yet")
}

// skipKeyMeta walks a Redis 8.6 KEY_META opcode (243 before a type byte).
// TODO(format): confirm against redis src/rdb.c.
func (p *Parser) skipKeyMeta() error {
	return errorf(ErrUnknownType, "Redis KEY_META opcode not supported yet")
}

// walkHash2 reads a Valkey 9 HASH_2 value (type 22 in a "VALKEY" file).
// TODO(format): confirm against valkey src/rdb.c.
func (p *Parser) walkHash2(visit bool) error {
	return errorf(ErrUnknownType, "Valkey HASH_2 not supported yet")
}
