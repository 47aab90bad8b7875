// Package rowformat is the registry of query answer formats that not every
// binary links: the server writes NDJSON and CSV itself, and a format whose
// library is heavy (Arrow IPC: arrow-go) registers here from the package
// that implements it, imported by the binaries that carry it (sluice-full),
// as the cold tier registers in internal/coldapi.
package rowformat

import (
	"errors"
	"io"
	"sync"

	"github.com/sluicedb/sluice/table"
)

// Encoder writes one query answer.
type Encoder interface {
	// Row writes one row's values, in the order of the columns the
	// encoder was made with (the values of table.QueryValues).
	Row(vals []any) error
	// Append copies the rows of another answer in the same format and
	// with the same columns (another node's, in a cluster query), at most
	// max of them when max ≥ 0, and returns how many it copied.
	Append(r io.Reader, max int) (int, error)
	// Close ends the answer; it must be called once whatever happened.
	Close() error
}

// Format is an answer format.
type Format struct {
	Name        string // the query's format parameter
	ContentType string
	// NewEncoder makes an encoder of an answer with cols to w.
	NewEncoder func(w io.Writer, cols []table.Column) (Encoder, error)
}

// ErrNotLinked is a format this binary does not carry.
var ErrNotLinked = errors.New("this binary is built without it (sluice-full has it)")

var (
	mu      sync.RWMutex
	formats = map[string]Format{}
)

// Register adds f; the implementing package's init calls it.
func Register(f Format) {
	mu.Lock()
	defer mu.Unlock()
	formats[f.Name] = f
}

// Lookup returns the format named name.
func Lookup(name string) (Format, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := formats[name]
	return f, ok
}
