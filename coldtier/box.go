package coldtier

import (
	"encoding/json"
	"time"
	"unsafe"
)

// Boxing a cold value into `any` allocates once per value (int64 beyond
// 255, float64, string, time.Time, json.RawMessage): with nine columns,
// eight allocations per emitted row and, with the GC work they cause,
// half of a cold query's CPU. A slabBoxer instead copies the emitted rows
// of one column of a chunk into one fresh slab and makes each interface
// point into it, the way the runtime represents a boxed value (a type word
// and a pointer to an immutable copy); table/box.go does the same for the
// hot tier. This file is the only use of unsafe in the package.
//
// Invariants: a slab is allocated per chunk and column, each element is
// written once, before the interface pointing to it is made, and never
// after; the slab stays alive as long as an interface points into it (the
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

// slabBoxer boxes the values of one column for the rows of one chunk.
type slabBoxer struct {
	v      *colVec
	ints   []int64
	floats []float64
	strs   []string
	raws   []json.RawMessage
	text   []byte // the JSON texts of the chunk, one allocation
	times  []time.Time
}

// reset prepares b for the rows of one chunk of column v.
func (b *slabBoxer) reset(v *colVec, rows []int32) {
	*b = slabBoxer{v: v}
	if v.absent {
		return
	}
	n := len(rows)
	switch v.kind {
	case vecInt:
		b.ints = make([]int64, 0, n)
	case vecFloat:
		b.floats = make([]float64, 0, n)
	case vecTime:
		b.times = make([]time.Time, 0, n)
	case vecString:
		if v.json {
			b.raws = make([]json.RawMessage, 0, n)
			size := 0
			for _, r := range rows {
				size += len(v.strs[r])
			}
			b.text = make([]byte, 0, size)
		} else {
			b.strs = make([]string, 0, n)
		}
	}
}

// box is row r's value as colVec.box returns it, pointing into the slab.
// Each row given to reset is boxed at most once; the slabs never grow past
// what reset sized them for (no reallocation under a live interface).
func (b *slabBoxer) box(r int) any {
	v := b.v
	if v.null(r) {
		return nil
	}
	switch v.kind {
	case vecInt:
		b.ints = append(b.ints, v.ints[r])
		return pointTo(int64Type, unsafe.Pointer(&b.ints[len(b.ints)-1]))
	case vecFloat:
		b.floats = append(b.floats, v.floats[r])
		return pointTo(float64Type, unsafe.Pointer(&b.floats[len(b.floats)-1]))
	case vecTime:
		b.times = append(b.times, v.timeAt(r))
		return pointTo(timeType, unsafe.Pointer(&b.times[len(b.times)-1]))
	case vecString:
		if v.json {
			// A slice of the chunk's one copy of the texts, capped so an
			// append by the receiver copies instead of writing past it.
			at := len(b.text)
			b.text = append(b.text, v.strs[r]...)
			b.raws = append(b.raws, json.RawMessage(b.text[at:len(b.text):len(b.text)]))
			return pointTo(rawType, unsafe.Pointer(&b.raws[len(b.raws)-1]))
		}
		b.strs = append(b.strs, v.strs[r])
		return pointTo(stringType, unsafe.Pointer(&b.strs[len(b.strs)-1]))
	}
	return v.bools[r] // bools box without allocating
}
