package rdb_test

import (
	"bytes"
	"strconv"
)

// unquoteCorpus extracts the []byte("...") literal of a Go fuzz corpus file.
func unquoteCorpus(b []byte) []byte {
	lines := bytes.SplitN(b, []byte("\n"), 3)
	lit := bytes.TrimSuffix(bytes.TrimPrefix(lines[1], []byte("[]byte(")), []byte(")"))
	s, err := strconv.Unquote(string(lit))
	if err != nil {
		return nil
	}
	return []byte(s)
}
