package coldread

import (
	"encoding/json"
	"time"

	"github.com/sluicedb/sluice/coltype"
	islab "github.com/sluicedb/sluice/internal/slab"
	"github.com/sluicedb/sluice/table"
)

// Boxing a cold value into `any` allocates once per value: a slab copies
// the emitted rows of one column of a chunk into one fresh array
// (internal/slab) and makes each interface point into it, as table/box.go
// does for the hot tier.

// slab holds the values of one output column for the rows of one chunk,
// row k at index k, and boxes them without allocating.
type slab struct {
	vals  islab.Slab // the values; unused for bools
	valid []bool     // nil: the column is absent (all null)
	bools []bool
	boxed []any // values boxed one by one (bytes, uuids)
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
	if v.typ == table.Date || v.typ == table.TimeOfDay || v.typ.IsDecimal() || v.typ == table.Bytes || v.typ == table.UUID {
		s.fillNative(v, rows)
		return
	}
	switch v.kind {
	case vecInt:
		vals := make([]int64, n)
		for k, r := range rows {
			vals[k] = v.ints[r]
		}
		s.vals = islab.Of(vals)
	case vecFloat:
		vals := make([]float64, n)
		for k, r := range rows {
			vals[k] = v.floats[r]
		}
		s.vals = islab.Of(vals)
	case vecTime:
		vals := make([]time.Time, n)
		for k, r := range rows {
			if s.valid[k] {
				vals[k] = v.timeAt(int(r))
			}
		}
		s.vals = islab.Of(vals)
	case vecString:
		if !v.json {
			vals := make([]string, n)
			for k, r := range rows {
				vals[k] = v.strs[r]
			}
			s.vals = islab.Of(vals)
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
		s.vals = islab.Of(vals)
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
	if s.bools != nil {
		return s.bools[k] // bools box without allocating
	}
	if s.boxed != nil {
		return s.boxed[k]
	}
	return s.vals.At(k)
}

// fillNative is fill for the types whose Go values are coltype's (and a
// bytes column's []byte): each row's value as box gives it.
func (s *slab) fillNative(v *colVec, rows []int32) {
	switch {
	case v.kind == vecInt && v.typ == table.Date:
		s.vals = islab.Of(nativeSlice(v, rows, func(i int64) coltype.DateValue { return coltype.DateValue(i) }))
	case v.kind == vecInt && v.typ == table.TimeOfDay:
		s.vals = islab.Of(nativeSlice(v, rows, func(i int64) coltype.TimeOfDayValue { return coltype.TimeOfDayValue(i) }))
	case v.kind == vecInt && v.typ.IsDecimal():
		scale := v.typ.Scale()
		s.vals = islab.Of(nativeSlice(v, rows, func(i int64) coltype.DecimalValue { return coltype.DecimalValue{Unscaled: i, Scale: scale} }))
	default:
		// Bytes and uuids (and a file's value of another kind): boxed one
		// by one, as box converts them.
		s.boxed = make([]any, len(rows))
		for k, r := range rows {
			s.boxed[k] = v.box(int(r))
		}
	}
}

// nativeSlice is f of v's ints at rows.
func nativeSlice[T any](v *colVec, rows []int32, f func(int64) T) []T {
	out := make([]T, len(rows))
	for k, r := range rows {
		out[k] = f(v.ints[r])
	}
	return out
}
