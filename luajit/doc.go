// Package luajit is the second engine for user Lua scripts: LuaJIT (OpenResty's
// branch, through cgo) behind the contract of luavm's gopher-lua engine, with a
// host API shaped like lua-resty-core. A batch of rows is laid out once per
// batch in C memory (column-major typed cells, strings in one arena); the row a
// script sees is a Lua object over FFI, so row.x compiles into loads; results
// and the script's writes to rows go back through FFI buffers the Go side reads
// after the batch: one cgo crossing per batch (plus one per column the script
// reads, per batch). Scripts are compiled once and the bytecode is shared by
// the VMs of a script's pool.
//
// The engine needs the build tag "luajit" and cgo (pkg-config "luajit", Debian
// libluajit2-5.1-dev; scripts/install-luajit). Without them New returns
// ErrUnavailable, so the default build works on machines without LuaJIT.
// See docs/luajit.md.
package luajit
