// Package slab boxes the values of one array into interfaces without
// allocating per value.
//
// Boxing a value into `any` allocates once per value (int64 beyond 255,
// float64, string, time.Time, json.RawMessage): with ten columns that was
// eight allocations per emitted row and, with the GC work they cause, half
// of a query's CPU, in the hot tier (table) and the cold one (coldtier)
// alike. A Slab instead holds one column's values for a block or chunk of
// rows in one array and makes each interface point into it, the way the
// runtime itself represents a boxed value (a type word and a pointer to an
// immutable copy). This is the only use of unsafe for it in sluice.
//
// Invariants the caller keeps: the array is filled before any interface
// points into it and never written afterwards (interfaces assume their data
// immutable); it stays alive as long as an interface points into it (the
// data word is a real, GC-visible pointer), so each Slab gets a fresh array.
package slab

import (
	"reflect"
	"unsafe"
)

// eface is the runtime layout of an empty interface.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// A Slab boxes the elements of one array. The zero Slab is empty.
type Slab struct {
	typ  unsafe.Pointer // the elements' type word
	base unsafe.Pointer // the first element (keeps the array alive)
	size uintptr        // element size
}

// Of makes a Slab of vals, which the caller must not write again. T must
// not be a pointer-shaped type (a pointer, map, chan or func), which the
// runtime stores in the data word itself rather than behind it.
func Of[T any](vals []T) Slab {
	if len(vals) == 0 {
		return Slab{}
	}
	var zero T
	return Slab{typ: typeWord[T](), base: unsafe.Pointer(&vals[0]), size: unsafe.Sizeof(zero)}
}

// typeWord is T's type word, without boxing a T (which allocates for
// time.Time and slices): a reflect.Type is an interface whose data word is
// the runtime's type descriptor, the same pointer an `any` holding a T has
// as its type word.
func typeWord[T any]() unsafe.Pointer {
	t := reflect.TypeFor[T]()
	return (*eface)(unsafe.Pointer(&t)).data
}

// At is element k as an interface built on the stack pointing into the
// array: no allocation, and no write barrier until the caller stores it.
// k must be within the array given to Of.
func (s Slab) At(k int) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = s.typ, unsafe.Add(s.base, uintptr(k)*s.size)
	return v
}
