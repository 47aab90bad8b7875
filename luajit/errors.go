package luajit

import "errors"

// ErrUnavailable: the binary was built without the LuaJIT engine (no
// "luajit" build tag or no cgo).
var ErrUnavailable = errors.New("luajit: this binary was built without the LuaJIT engine (build with -tags luajit and cgo; scripts/install-luajit installs the library)")
