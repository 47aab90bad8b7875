package luavm

import "errors"

// DefaultMemoryLimit is ScriptConfig.MemoryLimit when 0 (and the LuaJIT
// engine's per-VM limit): what one call may allocate.
const DefaultMemoryLimit = 256 << 20

// DefaultMaxResultBytes bounds a value a script gives a column when the
// column does not say otherwise (compute's max_result_bytes, the LuaJIT
// engine's MaxResultBytes): the largest request body the server takes by
// default, so that no value is larger than an input could be.
const DefaultMaxResultBytes = 64 << 20

// ErrResultSize: a script gave a value larger than the bound on results
// (compute's max_result_bytes); the row fails, before the value is copied.
var ErrResultSize = errors.New("luavm: result size limit")

// memoryLimit is the script's ScriptConfig.MemoryLimit in bytes, 0 = none.
func (c ScriptConfig) memoryLimit() int64 {
	switch {
	case c.MemoryLimit == 0:
		return DefaultMemoryLimit
	case c.MemoryLimit < 0:
		return 0
	}
	return c.MemoryLimit
}
