package compute

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Builtin is the loader of functions compiled into sluice, named by
// make:// URIs. They need no VM:
//
//	make://identifier          a unique id: 32 lower-case hex chars (128 random bits)
//	make://timestamp           now, unix seconds (int64)
//	make://json                the row encoded as JSON (keys sorted), as json.encode(row)
//	make://json?omit=k1,k2     the same without keys k1 and k2 (the row is not changed)
type Builtin struct {
	uri  string
	name string
	omit map[string]struct{}
}

// NewBuiltin returns the unloaded built-in loader.
func NewBuiltin() *Builtin { return &Builtin{} }

// Load returns the built-in named by uri.
func (*Builtin) Load(uri string) (Handler, error) {
	u, err := url.Parse(strings.TrimSpace(uri))
	if err != nil || !strings.EqualFold(u.Scheme, "make") {
		return nil, fmt.Errorf("builtin: %q is not a make:// URI", uri)
	}
	b := &Builtin{uri: uri, name: u.Host}
	q := u.Query()
	switch b.name {
	case "identifier", "timestamp":
		if len(q) > 0 || u.Path != "" {
			return nil, fmt.Errorf("builtin: make://%s takes no arguments (got %q)", b.name, uri)
		}
	case "json":
		for k := range q {
			if k != "omit" {
				return nil, fmt.Errorf("builtin: make://json: unknown argument %q (want omit=key1,key2)", k)
			}
		}
		if o := q.Get("omit"); o != "" {
			b.omit = map[string]struct{}{}
			for _, k := range strings.Split(o, ",") {
				b.omit[k] = struct{}{}
			}
		}
	default:
		return nil, fmt.Errorf("builtin: unknown built-in %q (want make://identifier, make://timestamp or make://json)", uri)
	}
	return b, nil
}

func (*Builtin) String() string { return "builtin" }

// Value computes the built-in; it never changes row.
func (b *Builtin) Value(row map[string]any) (any, error) {
	switch b.name {
	case "identifier":
		var id [16]byte
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
		return hex.EncodeToString(id[:]), nil
	case "timestamp":
		return time.Now().Unix(), nil
	case "json":
		buf, err := AppendJSONRow(make([]byte, 0, 256), row, b.omit)
		if err != nil {
			return nil, err
		}
		return string(buf), nil
	}
	return nil, fmt.Errorf("builtin: not loaded")
}
