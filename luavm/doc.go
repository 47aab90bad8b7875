// Package luavm runs user Lua scripts fast and safely: each script is compiled
// once into shared bytecode, executed in a pool of gopher-lua VMs whose
// strategy is chosen per script, sandboxed, isolated between calls, and bounded
// in time by a single watchdog goroutine instead of a per-call context.
//
// The Manager is the entry point. Load compiles a script under a name; Invoke,
// InvokeScriptFunc and Do call its global functions. Go functions and modules
// are registered with Register and RegisterModule; a json module implemented in
// Go is always available through require("json"). Rows are handed to Lua as
// lazy proxies (NewRow) so a call never converts a whole row.
//
// See docs/pool.md for the pool strategies, their defaults and the measured
// figures behind them.
package luavm
