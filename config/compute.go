package config

import "time"

// A table's computed columns and filters, as the YAML writes them: the
// same fields as `sluice compute`'s config (package compute's ColumnConfig,
// FilterConfig and Budget; docs/compute.md). They are described here, not
// imported, so that reading a config does not link the Lua VMs: the server
// builds package compute's config from them, and compute checks them
// (names, types, error policies, the form of every func, engines, budgets)
// where it can also compile them (server.ValidateOptions, `serve --check`).

// ComputedColumn is one computed column.
type ComputedColumn struct {
	Name string `yaml:"name"`
	// Type is a type name or alias (coltype.Parse).
	Type string `yaml:"type"`
	// Func is inline Lua code, a Lua file (path, file://, http(s)://), a Go
	// plugin (.so path or URL) or a built-in (make://...).
	Func string `yaml:"func"`
	// FuncName is the function to call: the Lua global (default "main") or
	// the exported symbol of a plugin (required).
	FuncName string `yaml:"funcname"`
	// OnError is the error policy: null (default), drop, reject or deadletter.
	OnError string `yaml:"on_error"`
	// Nullable makes a nil result a legitimate null instead of an error.
	Nullable bool `yaml:"nullable"`
	// Timeout bounds one Lua call (default: the runtime's default).
	Timeout time.Duration `yaml:"timeout"`
	// Allow opens Lua libraries the sandbox leaves out, for this function.
	Allow  []string `yaml:"allow"`
	Budget `yaml:",inline"`
	// Engine runs a Lua function: gopher-lua (default) or luajit.
	Engine     string `yaml:"engine"`
	ScriptHost `yaml:",inline"`
}

// Filter is one filter: a function returning a bool; false drops the row.
type Filter struct {
	Name     string `yaml:"name"`
	Func     string `yaml:"func"`
	FuncName string `yaml:"funcname"`
	// OnError is the policy when the filter fails: drop (default), keep,
	// reject or deadletter.
	OnError string        `yaml:"on_error"`
	Timeout time.Duration `yaml:"timeout"`
	// Allow opens Lua libraries the sandbox leaves out, as for a column.
	Allow  []string `yaml:"allow"`
	Budget `yaml:",inline"`
	// Engine runs a Lua function: gopher-lua (default) or luajit.
	Engine     string `yaml:"engine"`
	ScriptHost `yaml:",inline"`
}

// Budget bounds what one Lua function may spend on one batch, beside the
// per-row timeout (docs/compute.md).
type Budget struct {
	// BatchTimeout bounds the rows of one batch together (0: no bound but
	// MaxTimeouts).
	BatchTimeout time.Duration `yaml:"batch_timeout"`
	// MaxTimeouts: once this many rows of one batch timed out, the rest
	// fail at once (0: the default, 3; < 0: no limit).
	MaxTimeouts int `yaml:"max_timeouts"`
	// MemoryLimit bounds what one call may allocate, in bytes (0: the
	// default, 256 MiB; < 0: none).
	MemoryLimit int64 `yaml:"memory_limit"`
	// MaxResultBytes bounds a value a function gives (0: the default,
	// 64 MiB; < 0: none).
	MaxResultBytes int64 `yaml:"max_result_bytes"`
}

// ScriptHost is what a Lua function's host modules get (docs/compute.md,
// "Host modules"): the values sluice.config reads, and the bounds of its
// log lines and metric series.
type ScriptHost struct {
	// Params are the values sluice.config(key) returns: strings, numbers,
	// bools; one script serves several tables with their own.
	Params map[string]any `yaml:"params"`
	// LogRate is the log lines a second the script may write and LogBurst
	// how many at once (0: limits.script_log_rate and script_log_burst);
	// LogRate < 0: no limit.
	LogRate  float64 `yaml:"log_rate"`
	LogBurst int     `yaml:"log_burst"`
	// MaxSeries bounds the metric series (name and labels) the script's
	// stats calls make (0: limits.script_max_series).
	MaxSeries int `yaml:"max_series"`
}
