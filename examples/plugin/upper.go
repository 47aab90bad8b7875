// Command upper is an example sluice plugin: a computed column in Go.
//
// Build it from the file, into a path that names the version, so that a new
// build can be loaded next to an old one (Go cannot reload a plugin at the
// same path, and a plugin built from a package keeps the package's identity):
//
//	go build -buildmode=plugin -o examples/plugin/upper-v1.so examples/plugin/upper.go
//
// It must be built by the same Go version, with the same flags, as sluice.
package main

import (
	"fmt"
	"strings"
)

// Upper is the column function: the user name in upper case. Its signature
// is the one sluice looks up: func(map[string]interface{}) (interface{}, error).
func Upper(row map[string]interface{}) (interface{}, error) {
	user, ok := row["user"].(string)
	if !ok {
		return nil, fmt.Errorf("user is %T, want a string", row["user"])
	}
	return strings.ToUpper(user), nil
}

// main is never called: it lets `go build ./...` and `go vet ./...` treat
// this directory as an ordinary command.
func main() {}
