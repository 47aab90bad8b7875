package compute

import (
	"context"
	"fmt"
)

// Handler is one kind of function, in Talaria's shape: Load compiles or opens
// a function and returns a Handler bound to it, String names the loader
// ("lua", "plugin", "builtin") and Value computes the function for one row.
//
// Value may read the row and, for Lua and plugins, write to it: writes are
// visible to later columns and in the output.
type Handler interface {
	Load(uriOrCode string) (Handler, error)
	String() string
	Value(row map[string]any) (any, error)
}

// BatchHandler is implemented by handlers that evaluate many rows at a lower
// cost per row than Value (the Lua handler: one VM acquisition per batch).
// The processor uses it when present.
type BatchHandler interface {
	Handler
	// Values sets out[i] and errs[i] to the result of the function on
	// rows[i]; len(out) == len(errs) == len(rows). A returned error fails
	// every row (the runtime was unavailable).
	Values(ctx context.Context, rows []map[string]any, out []any, errs []error) error
}

// Error is a function's failure on one row, naming the column (or filter),
// its loader and the cause. It unwraps to the cause.
type Error struct {
	Column string // column or filter name
	Filter bool   // true for a filter
	Loader string // "lua", "plugin", "builtin"
	Source string // where the function came from (path, URL, "inline")
	Row    int    // index of the row in its batch; -1 when not about a row
	Err    error
}

func (e *Error) Error() string {
	what := "column"
	if e.Filter {
		what = "filter"
	}
	row := ""
	if e.Row >= 0 {
		row = fmt.Sprintf(" row %d:", e.Row)
	}
	return fmt.Sprintf("compute: %s %q (%s %s):%s %v", what, e.Column, e.Loader, e.Source, row, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// valuesOneByOne is the BatchHandler behaviour of any Handler.
func valuesOneByOne(h Handler, rows []map[string]any, out []any, errs []error) {
	for i, r := range rows {
		out[i], errs[i] = h.Value(r)
	}
}
