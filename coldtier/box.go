package coldtier

import (
	"encoding/json"
	"time"
	"unsafe"
)

// Boxing a cold value into `any` allocates once per value (int64 beyond
// 255, float64, string, time.Time, json.RawMessage): with nine columns,
// eight allocations per emitted row and, with the GC work they cause,
// half of a cold query's CPU. A slab instead holds the emitted rows of one
// column of a chunk, copied into one fresh array, and makes each interface
// point into it, the way the runtime represents a boxed value (a type word
// and a pointer to an immutable copy); table/box.go does the same for the
// hot tier. This file is the only use of unsafe in the package.
//
// Invariants: a slab's array is allocated per chunk and column and filled
// before any interface points into it, and never written after; it stays
// alive as long as an interface points into it (the
// data word is a real, GC-visible pointer).

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

// pointTo is an interface of type word typ whose value is *p.
func pointTo(typ, p unsafe.Pointer) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, p
	return v
}

// slab holds the values of one output column for the rows of one chunk,
// row k at index k, and boxes them without allocating.
type slab struct {
	typ   unsafe.Pointer // the values' type word; nil for bools
	base  unsafe.Pointer // the first element (keeps the slab alive)
	size  uintptr        // element size
	valid []bool         // nil: the column is absent (all null)
	bools []bool
}

// fill copies the values of v at rows into a fresh slab.
func (s *slab) fill(v *colVec, rows []int32) {
	*s = slab{}
	n := len(rows)
	if v.absent || n == 0 {
		return
	}
	s.valid = make([]bool, n)
	for k, r := range rows {
		s.valid[k] = v.valid[r]
	}
	switch v.kind {
	case vecInt:
		vals := make([]int64, n)
		for k, r := range rows {
			vals[k] = v.ints[r]
		}
		s.typ, s.base, s.size = int64Type, unsafe.Pointer(&vals[0]), unsafe.Sizeof(vals[0])
	case vecFloat:
		vals := make([]float64, n)
		for k, r := range rows {
			vals[k] = v.floats[r]
		}
		s.typ, s.base, s.size = float64Type, unsafe.Pointer(&vals[0]), unsafe.Sizeof(vals[0])
	case vecTime:
		vals := make([]time.Time, n)
		for k, r := range rows {
			if s.valid[k] {
				vals[k] = v.timeAt(int(r))
			}
		}
		s.typ, s.base, s.size = timeType, unsafe.Pointer(&vals[0]), unsafe.Sizeof(vals[0])
	case vecString:
		if !v.json {
			vals := make([]string, n)
			for k, r := range rows {
				vals[k] = v.strs[r]
			}
			s.typ, s.base, s.size = stringType, unsafe.Pointer(&vals[0]), unsafe.Sizeof(vals[0])
			return
		}
		// The chunk's JSON texts in one copy; each value a slice of it,
		// capped so an append by the receiver copies instead of writing
		// past it.
		size := 0
		for _, r := range rows {
			size += len(v.strs[r])
		}
		text := make([]byte, 0, size)
		vals := make([]json.RawMessage, n)
		for k, r := range rows {
			at := len(text)
			text = append(text, v.strs[r]...)
			vals[k] = json.RawMessage(text[at:len(text):len(text)])
		}
		s.typ, s.base, s.size = rawType, unsafe.Pointer(&vals[0]), unsafe.Sizeof(vals[0])
	case vecBool:
		s.bools = make([]bool, n)
		for k, r := range rows {
			s.bools[k] = v.bools[r]
		}
	}
}

// at is row k's value as colVec.box returns it: nil for null, else an
// interface made on the stack pointing into the slab (no allocation, no
// write barrier until the caller stores it).
func (s *slab) at(k int) any {
	if s.valid == nil || !s.valid[k] {
		return nil
	}
	if s.typ == nil {
		return s.bools[k] // bools box without allocating
	}
	return pointTo(s.typ, unsafe.Add(s.base, uintptr(k)*s.size))
}
