package server

import (
	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/luavm"
)

// The scripts' host modules (docs/compute.md, "Host modules"): every
// table's compute writes its scripts' log lines through the server's
// logger, carrying the table, and their stats series into one collector
// that /metrics serves.

// scripts is the collector of the series scripts make, made at its first
// use (a table's compute or the metrics handler, whichever comes first).
func (s *Server) scripts() *luavm.ScriptMetrics {
	if s.scriptMetrics == nil {
		s.scriptMetrics = luavm.NewScriptMetrics()
	}
	return s.scriptMetrics
}

// computeOptions are the options of table tc's compute.
func (s *Server) computeOptions(tc config.Table) compute.Options {
	lim := s.cfg.Limits
	return compute.Options{
		Lua: s.lua, LuaJIT: s.jit, BaseDir: s.cfg.BaseDir, Logger: s.log.With("table", tc.Name),
		Table: tc.Name, ScriptMetrics: s.scripts(),
		ScriptLimits: compute.ScriptLimits{LogRate: lim.ScriptLogRate, LogBurst: lim.ScriptLogBurst, MaxSeries: lim.ScriptMaxSeries},
	}
}
