//go:build !luajit || !cgo

package compute

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicedb/sluice/luajit"
)

// Without the luajit build tag, a function asking for LuaJIT fails to load
// with an error that says how to get it, and the others are not affected.
func TestEngineLuaJITUnavailable(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
computed:
  - name: c
    type: string
    engine: luajit
    func: "function main(row) return 'x' end"
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg, Options{}); !errors.Is(err, luajit.ErrUnavailable) {
		t.Errorf("New: %v, want luajit.ErrUnavailable", err)
	}
}

// testEngines are the engines the shared engine tests run on: gopher-lua
// only in a binary without LuaJIT.
var testEngines = []string{EngineGopherLua}
