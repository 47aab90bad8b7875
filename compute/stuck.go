package compute

import "github.com/sluicedb/sluice/luavm"

// Stuck returns the LuaJIT rows told to stop that still run (see
// luajit.Engine.Stuck), for a server's /readyz and /metrics.
func (l luajitEngine) Stuck() []luavm.StuckCall { return l.e.Stuck() }
