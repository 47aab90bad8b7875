package table

import (
	"encoding/json"
	"time"
	"unsafe"
)

// Boxing values into `any` allocates once per value (int64 beyond 255,
// float64, string, time.Time): at 10 columns that was 8 allocations per
// row and half of a query's time. A boxer instead copies a block's column
// into one fresh slab and makes each interface point into it, the way the
// runtime itself represents a boxed value (a type word and a pointer to an
// immutable copy). This is the only use of unsafe in the package.
//
// Invariants: a slab is allocated per block and column and never written
// after boxing (interfaces assume their data immutable); the slab stays
// alive as long as any interface points into it (the pointer is a real,
// GC-visible pointer).

// eface is the runtime layout of an empty interface.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	int64Type   = typeWord(int64(0))
	float64Type = typeWord(float64(0))
	stringType  = typeWord("")
	timeType    = typeWord(time.Time{})
	rawType     = typeWord(json.RawMessage(nil))
)

// boxer makes the Row values of one output column of one block.
type boxer struct {
	col  *decodedCol    // nil: the block lacks the column (all null)
	typ  unsafe.Pointer // type word of the values
	base unsafe.Pointer // first element of the slab (keeps it alive)
	size uintptr        // element size
}

// reset prepares b for column c of a block of rows rows: it copies the
// column into a fresh slab (never written again once values point into it).
func (b *boxer) reset(c *decodedCol, rows int) {
	*b = boxer{col: c}
	if c == nil || rows == 0 {
		return
	}
	switch c.typ {
	case Int64:
		slab := append([]int64(nil), c.ints[:rows]...)
		b.typ, b.base, b.size = int64Type, unsafe.Pointer(&slab[0]), unsafe.Sizeof(slab[0])
	case Float64:
		slab := append([]float64(nil), c.floats[:rows]...)
		b.typ, b.base, b.size = float64Type, unsafe.Pointer(&slab[0]), unsafe.Sizeof(slab[0])
	case String:
		slab := append([]string(nil), c.strs[:rows]...)
		b.typ, b.base, b.size = stringType, unsafe.Pointer(&slab[0]), unsafe.Sizeof(slab[0])
	case JSON:
		slab := make([]json.RawMessage, rows)
		for r := range slab {
			slab[r] = json.RawMessage(c.strs[r])
		}
		b.typ, b.base, b.size = rawType, unsafe.Pointer(&slab[0]), unsafe.Sizeof(slab[0])
	case Timestamp:
		slab := make([]time.Time, rows)
		for r := range slab {
			slab[r] = time.Unix(0, c.ints[r]).UTC()
		}
		b.typ, b.base, b.size = timeType, unsafe.Pointer(&slab[0]), unsafe.Sizeof(slab[0])
	}
}

// at returns row r's value: int64, float64, string, bool, time.Time (UTC)
// or json.RawMessage, nil for null. The interface is built on the stack
// pointing into the slab: no allocation, no write barrier until the caller
// stores it.
func (b *boxer) at(r int) any {
	c := b.col
	if c == nil || c.isNull(r) {
		return nil
	}
	if c.typ == Bool {
		return c.ints[r] != 0 // bools box without allocating
	}
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ = b.typ
	e.data = unsafe.Add(b.base, uintptr(r)*b.size)
	return v
}
