package table

import "fmt"

// Absent is a query over columns the store lacks: columns of the table's
// whole schema (another node's store, the Iceberg table) that this store
// never held, which it answers as null. Query is the query the store can
// run (the absent columns left out); Row turns its rows into the answer's.
type Absent struct {
	// Query is the query without the absent columns.
	Query Query
	// Out are the answer's columns in the query's order, the absent ones
	// with the type absent gave.
	Out []Column
	// Names are the absent columns the query names.
	Names []string
	// None: a predicate on an absent column holds for no row (a null
	// matches IS NULL only, as a null cell does), so the store answers
	// nothing.
	None bool
	pos  []int // per Out column, its index in Query's answer; -1: absent
}

// WithAbsent splits q into what the store holds and what it answers as
// null. absent gives the type of a column the store lacks, or false when
// the table's whole schema lacks it too (an ErrUnknownColumn error naming
// it). It returns nil when q names no absent column: run q as it is.
func (t *Table) WithAbsent(q Query, absent func(name string) (Type, bool)) (*Absent, error) {
	known := map[string]bool{}
	for _, c := range t.Schema() {
		known[c.Name] = true
	}
	return SplitAbsent(q, func(name string) bool { return known[name] }, absent, t.Columns, t.SortBy(), t.Name())
}

// SplitAbsent is WithAbsent over any reader of the table: has says whether
// it answers a column, columns gives its answer's columns for a query, and
// fill is a column it has, read when every column q names is absent (no
// columns would mean all of them).
func SplitAbsent(q Query, has func(string) bool, absent func(string) (Type, bool), columns func(Query) ([]Column, error), fill, tableName string) (*Absent, error) {
	a := &Absent{Query: q}
	types := map[string]Type{}
	isAbsent := func(name string) (bool, error) {
		if has(name) {
			return false, nil
		}
		if _, ok := types[name]; ok {
			return true, nil
		}
		typ, ok := absent(name)
		if !ok {
			return false, fmt.Errorf("table %s: %w %q", tableName, ErrUnknownColumn, name)
		}
		types[name] = typ
		a.Names = append(a.Names, name)
		return true, nil
	}
	// A path column reads its json column: absent with it (null, of type
	// json), or answered from it.
	source := func(name string) string {
		if cp, ok := q.Paths[name]; ok {
			return cp.Column
		}
		return name
	}
	a.Query.Columns = nil
	for _, name := range q.Columns {
		out, err := isAbsent(source(name))
		if err != nil {
			return nil, err
		}
		if !out {
			a.Query.Columns = append(a.Query.Columns, name)
		}
	}
	a.Query.Where = nil
	for _, p := range q.Where {
		out, err := isAbsent(p.Column)
		if err != nil {
			return nil, err
		}
		switch {
		case !out:
			a.Query.Where = append(a.Query.Where, p)
		case p.Op != IsNull:
			a.None = true
		}
	}
	if len(a.Names) == 0 {
		return nil, nil
	}
	if len(q.Columns) > 0 && len(a.Query.Columns) == 0 {
		a.Query.Columns = []string{fill}
	}
	inner, err := columns(a.Query)
	if err != nil {
		return nil, err
	}
	if len(q.Columns) == 0 {
		// All columns: the reader's (an absent column only a predicate
		// names is not output).
		a.Out, a.pos = inner, make([]int, len(inner))
		for i := range inner {
			a.pos[i] = i
		}
		return a, nil
	}
	at := map[string]int{}
	for i, c := range inner {
		at[c.Name] = i
	}
	for _, name := range q.Columns {
		if i, ok := at[name]; ok && has(source(name)) {
			a.Out = append(a.Out, inner[i])
			a.pos = append(a.pos, i)
			continue
		}
		typ := types[name]
		if _, ok := q.Paths[name]; ok {
			typ = JSON
		}
		a.Out = append(a.Out, Column{Name: name, Type: typ})
		a.pos = append(a.pos, -1)
	}
	return a, nil
}

// Row is the answer's row for a row of Query's answer, nulls in the absent
// columns, in dst (reused).
func (a *Absent) Row(dst, inner []any) []any {
	dst = dst[:0]
	for _, p := range a.pos {
		if p < 0 {
			dst = append(dst, nil)
		} else {
			dst = append(dst, inner[p])
		}
	}
	return dst
}
