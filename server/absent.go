package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/sluicedb/sluice/table"
)

// A query names columns of the table's whole schema, not only of the
// node's store: a node that never stored a column another node's store or
// the Iceberg table has answers it as null. A column no one has is still
// a 400 naming it.

// storeLacks are the columns req names that ts's store lacks.
func storeLacks(ts *tableState, req QueryRequest) []string {
	known := map[string]bool{}
	for _, c := range ts.table.Schema() {
		known[c.Name] = true
	}
	var lacks []string
	add := func(name string) {
		if !known[name] {
			known[name] = true
			lacks = append(lacks, name)
		}
	}
	for _, c := range req.Columns {
		if cp, ok := req.Paths[c]; ok {
			add(cp.Column)
			continue
		}
		if !known[c] {
			// A path's column, as for a where clause's below.
			if col, _, _, err := table.SplitColumnPath(c); err == nil && col != c {
				add(col)
			}
		}
		add(c)
	}
	for _, w := range req.Where {
		if w.Path == "" && !known[w.Column] {
			// A path's column, or a quoted column's name (tableQuery
			// resolves the clause once the columns of the table's other
			// readers are known too).
			if col, _, _, err := table.SplitColumnPath(w.Column); err == nil && col != w.Column {
				add(col)
			}
		}
		add(w.Column)
	}
	return lacks
}

// icebergColumns are the columns of ts's Iceberg table (none without a
// cold tier, or before its first commit).
func icebergColumns(ctx context.Context, ts *tableState) (map[string]table.Column, error) {
	cols := map[string]table.Column{}
	if ts.cold == nil {
		return cols, nil
	}
	list, err := ts.cold.TableColumns(ctx)
	if err != nil {
		return nil, fmt.Errorf("table %s: the Iceberg table's columns: %w", ts.cfg.Name, err)
	}
	for _, c := range list {
		cols[c.Name] = c
	}
	return cols, nil
}

// knowColumns adds to req the columns it names that the store lacks and
// the Iceberg table has; the others stay unknown (tableQuery's 400).
func knowColumns(ctx context.Context, ts *tableState, req QueryRequest) (QueryRequest, error) {
	lacks := storeLacks(ts, req)
	if len(lacks) == 0 || req.Tier == "hot" {
		return req, nil
	}
	cold, err := icebergColumns(ctx, ts)
	if err != nil {
		return req, err
	}
	known := map[string]bool{}
	for k := range req.known {
		known[k] = true
	}
	for _, name := range lacks {
		if _, ok := cold[name]; ok {
			known[name] = true
		}
	}
	req.known = known
	return req, nil
}

// knowClusterColumns is knowColumns for a cluster query's coordinator: a
// column neither its store nor the Iceberg table has is looked for in every
// member's store (GET /v1/tables/{t}/schema), asked only then. A member
// that does not answer knows nothing; with none knowing a name, the query
// fails naming it.
func (s *Server) knowClusterColumns(ctx context.Context, ts *tableState, req QueryRequest, nodes []string) (QueryRequest, error) {
	req, err := knowColumns(ctx, ts, req)
	if err != nil {
		return req, err
	}
	var unknown []string
	for _, name := range storeLacks(ts, req) {
		if !req.known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return req, nil
	}
	answers := s.fanout.Open(ctx, nodes, func(ctx context.Context, node string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, node+"/v1/tables/"+url.PathEscape(ts.cfg.Name)+"/schema", nil)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
	known := map[string]bool{}
	for k := range req.known {
		known[k] = true
	}
	for _, a := range answers {
		if a.Err == nil {
			var schema struct {
				Columns []table.Column `json:"columns"`
			}
			if json.NewDecoder(io.LimitReader(a, 16<<20)).Decode(&schema) == nil {
				for _, c := range schema.Columns {
					known[c.Name] = true
				}
			}
		}
		a.Close()
	}
	req.known = known
	return req, nil
}

// splitAbsent is q as ts's tiers can answer it: cols are the answer's
// columns, and the columns no tier of this node has (a member's, checked by
// tableQuery) are answered as null by absent (nil: q names none). A column
// the Iceberg table has and the store lacks is the cold tier's to answer
// (its cold side reads it, its hot side has nulls).
func splitAbsent(ctx context.Context, ts *tableState, q table.Query) (cols []table.Column, absent *table.Absent, err error) {
	lacks := storeLacks(ts, QueryRequest{Columns: q.Columns, Paths: q.Paths, Where: whereOf(q)})
	if len(lacks) == 0 {
		cols, err = ts.table.Columns(q)
		return cols, nil, err
	}
	cold, err := icebergColumns(ctx, ts)
	if err != nil {
		return nil, nil, err
	}
	store := map[string]bool{}
	for _, c := range ts.table.Schema() {
		store[c.Name] = true
	}
	has := func(name string) bool {
		_, inCold := cold[name]
		return store[name] || inCold
	}
	columns := func(q table.Query) ([]table.Column, error) {
		if len(q.Columns) == 0 {
			return ts.table.Columns(table.Query{})
		}
		var cols []table.Column
		for _, name := range q.Columns {
			source := name
			cp, isPath := q.Paths[name]
			if isPath {
				source = cp.Column
			}
			if c, ok := cold[source]; ok && !store[source] {
				if isPath {
					c = table.Column{Name: name, Type: table.JSON}
				}
				cols = append(cols, c)
				continue
			}
			c, err := ts.table.Columns(table.Query{Columns: []string{name}, Paths: q.Paths})
			if err != nil {
				return nil, err
			}
			cols = append(cols, c...)
		}
		return cols, nil
	}
	// The names were checked (tableQuery): a column no tier here has is
	// another node's; its type is unknown here, and its values all null.
	anyType := func(string) (table.Type, bool) { return table.String, true }
	absent, err = table.SplitAbsent(q, has, anyType, columns, ts.table.SortBy(), ts.cfg.Name)
	if err != nil || absent != nil {
		if absent != nil {
			cols = absent.Out
		}
		return cols, absent, err
	}
	cols, err = columns(q)
	return cols, nil, err
}

// whereOf is q's predicates as the request's clauses (their columns only).
func whereOf(q table.Query) []WhereClause {
	w := make([]WhereClause, len(q.Where))
	for i, p := range q.Where {
		w[i] = WhereClause{Column: p.Column, Path: p.Path}
	}
	return w
}
