package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Offsets are source offsets a node's answer holds: per source (a stream
// partition, named as its rows' batch tags name it), sorted, disjoint,
// non-adjacent half-open ranges. Two stores can hold the same messages (a
// node killed after storing them and before its consumer group learned
// their offsets, whose partition's next owner read them again); the
// coordinator of a cluster query gives each offset to one node (Assign),
// and each node answers only for the offsets given to it.
//
// Its size is one range per run of consecutive batches a node holds of a
// partition, not one per row: a partition a node consumed without a
// break is one range.
type Offsets map[string][]Span

// Span is the half-open offset range [Lo, Hi).
type Span struct{ Lo, Hi int64 }

// Add adds [lo, hi) to source's ranges. Consecutive adds of neighbouring
// ranges (a scan's batches in offset order) merge as they come; others are
// kept sorted by a later merge.
func (o Offsets) Add(source string, lo, hi int64) {
	if hi <= lo {
		return
	}
	s := o[source]
	if n := len(s); n > 0 && lo <= s[n-1].Hi && hi >= s[n-1].Lo {
		s[n-1].Lo, s[n-1].Hi = min(s[n-1].Lo, lo), max(s[n-1].Hi, hi)
		o[source] = s
		return
	}
	s = append(s, Span{lo, hi})
	if n := len(s); n >= 64 && n&(n-1) == 0 {
		s = normalize(s) // keep unmerged ranges from growing past twice the merged ones
	}
	o[source] = s
}

// Normalize sorts and merges every source's ranges; Add leaves them
// unsorted when they come out of order.
func (o Offsets) Normalize() {
	for src, s := range o {
		o[src] = normalize(s)
	}
}

func normalize(s []Span) []Span {
	slices.SortFunc(s, func(a, b Span) int {
		switch {
		case a.Lo < b.Lo:
			return -1
		case a.Lo > b.Lo:
			return 1
		}
		return 0
	})
	out := s[:0]
	for _, sp := range s {
		if n := len(out); n > 0 && sp.Lo <= out[n-1].Hi {
			out[n-1].Hi = max(out[n-1].Hi, sp.Hi)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// Contains reports whether source's ranges hold off (Normalize first).
func (o Offsets) Contains(source string, off int64) bool {
	s := o[source]
	i, _ := slices.BinarySearchFunc(s, off, func(sp Span, off int64) int {
		if sp.Hi <= off {
			return -1
		}
		if sp.Lo > off {
			return 1
		}
		return 0
	})
	return i < len(s) && s[i].Lo <= off && off < s[i].Hi
}

// Empty reports whether o holds no offset.
func (o Offsets) Empty() bool {
	for _, s := range o {
		if len(s) > 0 {
			return false
		}
	}
	return true
}

// Assign gives each offset held by any of held to exactly one of them, the
// first in order that holds it, and returns for each node the offsets
// given to it: what it keeps in its answer. A node leaves out every
// source offset outside its own share, also those of rows it stored after
// it reported what it holds (a node that reported them may answer for
// them). Every held[i] must be normalized.
func Assign(held []Offsets) []Offsets {
	keep := make([]Offsets, len(held))
	taken := Offsets{} // what the nodes before i hold
	for i, h := range held {
		keep[i] = Offsets{}
		for src, s := range h {
			if mine := minus(s, taken[src]); len(mine) > 0 {
				keep[i][src] = mine
			}
			taken[src] = normalize(append(slices.Clone(taken[src]), s...))
		}
	}
	return keep
}

// minus is the offsets of a that b lacks (each sorted and disjoint).
func minus(a, b []Span) []Span {
	var out []Span
	j := 0
	for _, sp := range a {
		lo := sp.Lo
		for j < len(b) && b[j].Hi <= lo {
			j++
		}
		for k := j; k < len(b) && b[k].Lo < sp.Hi; k++ {
			if b[k].Lo > lo {
				out = append(out, Span{lo, b[k].Lo})
			}
			lo = max(lo, b[k].Hi)
		}
		if lo < sp.Hi {
			out = append(out, Span{lo, sp.Hi})
		}
	}
	return out
}

// String encodes o as "<source>@<lo>-<hi>,<lo>-<hi>;<source>@..." (a
// source name holds neither ';' nor, after its last '@', anything but the
// ranges), sources in name order; ParseOffsets reads it back.
func (o Offsets) String() string {
	srcs := make([]string, 0, len(o))
	for src, s := range o {
		if len(s) > 0 {
			srcs = append(srcs, src)
		}
	}
	slices.Sort(srcs)
	var b strings.Builder
	for i, src := range srcs {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(src)
		b.WriteByte('@')
		for j, sp := range o[src] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(sp.Lo, 10))
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(sp.Hi, 10))
		}
	}
	return b.String()
}

// ParseOffsets reads what Offsets.String wrote; the ranges come back
// normalized.
func ParseOffsets(v string) (Offsets, error) {
	o := Offsets{}
	if strings.TrimSpace(v) == "" {
		return o, nil
	}
	for part := range strings.SplitSeq(v, ";") {
		i := strings.LastIndexByte(part, '@')
		if i < 0 {
			return nil, fmt.Errorf("offsets %q: no '@' in %q", v, part)
		}
		src := part[:i]
		for r := range strings.SplitSeq(part[i+1:], ",") {
			los, his, ok := strings.Cut(r, "-")
			lo, err1 := strconv.ParseInt(los, 10, 64)
			hi, err2 := strconv.ParseInt(his, 10, 64)
			if !ok || err1 != nil || err2 != nil || hi < lo {
				return nil, fmt.Errorf("offsets of %q: bad range %q", src, r)
			}
			o[src] = append(o[src], Span{lo, hi})
		}
	}
	o.Normalize()
	return o, nil
}
