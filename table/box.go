package table

import (
	"encoding/json"
	"time"
	"unsafe"
)

// Boxing values into `any` allocates once per value (int64 beyond 255,
// float64, string, time.Time): at 10 columns that was 8 allocations per
// row and half of a query's time. boxColumn instead copies a block's column
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

// boxSlab points every element of dst at an element of slab, or sets it to
// nil where c is null.
func boxSlab[T any](dst []any, c *decodedCol, typ unsafe.Pointer, slab []T) {
	for r := range dst {
		if c.isNull(r) {
			dst[r] = nil
			continue
		}
		e := (*eface)(unsafe.Pointer(&dst[r]))
		e.typ = typ
		e.data = unsafe.Pointer(&slab[r])
	}
}

// boxColumn returns the rows of c as Row values: int64, float64, string,
// bool, time.Time (UTC) or json.RawMessage, nil for null. A nil c (a column
// the block lacks) gives all nils.
func boxColumn(dst []any, c *decodedCol, rows int) []any {
	dst = grow(dst, rows)
	if c == nil {
		clear(dst)
		return dst
	}
	switch c.typ {
	case Int64:
		boxSlab(dst, c, int64Type, append([]int64(nil), c.ints[:rows]...))
	case Float64:
		boxSlab(dst, c, float64Type, append([]float64(nil), c.floats[:rows]...))
	case String:
		boxSlab(dst, c, stringType, append([]string(nil), c.strs[:rows]...))
	case JSON:
		slab := make([]json.RawMessage, rows)
		for r := range slab {
			slab[r] = json.RawMessage(c.strs[r])
		}
		boxSlab(dst, c, rawType, slab)
	case Timestamp:
		slab := make([]time.Time, rows)
		for r := range slab {
			slab[r] = time.Unix(0, c.ints[r]).UTC()
		}
		boxSlab(dst, c, timeType, slab)
	case Bool:
		for r := range dst {
			if c.isNull(r) {
				dst[r] = nil
			} else {
				dst[r] = c.ints[r] != 0 // bools box without allocating
			}
		}
	}
	return dst
}
