// Package computeopt is the options of a computed column or a filter as a
// config writes them (docs/compute.md): the one description that both the
// server's config (a table's `computed:` and `filters:`) and package
// compute (`sluice compute`'s YAML, and what it runs) use. compute.ColumnConfig,
// FilterConfig, Budget, ScriptHost and S3Options are aliases of its types,
// and so are config's ComputedColumn, Filter, Budget, ScriptHost and
// ComputeS3: a field added here is a key of both, with nothing to keep in
// step.
//
// It describes only: plain structs and the checks of their secrets. The
// checks that need the runtime (types, error policies, the form of a func,
// engines) are compute's (compute.Config.Validate). Of sluice it imports
// internal/secret alone, so that reading a config does not link the Lua VMs.
package computeopt

import (
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/secret"
)

// Script is what a computed column and a filter share: the function, how
// it is found and run, and what it may spend. Column and Filter embed it
// inline, so its keys sit beside theirs in a config.
type Script struct {
	Name string `yaml:"name"`
	// Func is inline Lua code, a Lua file (path, file://, http(s)://,
	// s3://), a Go plugin (.so path or URL) or a built-in (make://...); see
	// compute.ResolveSource.
	Func string `yaml:"func"`
	// FuncName is the function to call: the Lua global (default "main") or
	// the exported symbol of a plugin (required).
	FuncName string `yaml:"funcname"`
	// Timeout bounds one Lua call (default: the runtime's default).
	Timeout time.Duration `yaml:"timeout"`
	// Allow opens Lua libraries the sandbox leaves out, for this function:
	// io, os, debug, coroutine, channel, load, require (see docs/pool.md).
	Allow  []string `yaml:"allow" json:"allow,omitempty"`
	Budget `yaml:",inline"`
	// Engine runs a Lua function: gopher-lua (default) or luajit.
	Engine     string `yaml:"engine"`
	ScriptHost `yaml:",inline"`
	// S3 says where an s3:// Func is read from and with which keys; nil
	// means the table's default (the endpoint of its cold tier, else the
	// environment's).
	S3 *S3 `yaml:"s3" json:"s3,omitempty"`
}

// Column is one computed column, in Talaria's shape plus sluice's error
// policy, nullability, timeout and budget.
type Column struct {
	Script `yaml:",inline"`
	// Type is a type name or alias (coltype.Parse).
	Type string `yaml:"type"`
	// OnError is the error policy: null (default), drop, reject or
	// deadletter. A filter's takes other values (Filter.OnError), so it is
	// not Script's.
	OnError string `yaml:"on_error"`
	// Nullable makes a nil result a legitimate null instead of an error.
	Nullable bool `yaml:"nullable"`
}

// Filter is one filter: a function returning a bool; false drops the row.
type Filter struct {
	Script `yaml:",inline"`
	// OnError is the policy when the filter fails: drop (default), keep,
	// reject or deadletter.
	OnError string `yaml:"on_error"`
}

// Budget bounds what one Lua function may spend on one batch, beside the
// per-row Timeout: without it a runaway main costs Timeout per row, and a
// 1000-row batch held an ingest slot for ~83 minutes.
type Budget struct {
	// BatchTimeout bounds the rows of one batch together: once it is used,
	// the rows not yet run fail at once with compute.ErrBatchBudget (and the
	// function's policy applies to them). 0 = no bound but MaxTimeouts.
	BatchTimeout time.Duration `yaml:"batch_timeout" json:"batch_timeout,omitempty"`
	// MaxTimeouts: once this many rows of one batch have timed out, the
	// rows not yet run fail at once with compute.ErrBatchBudget. 0 =
	// compute.DefaultMaxTimeouts (3), < 0 = no limit (every row gets its
	// Timeout).
	MaxTimeouts int `yaml:"max_timeouts" json:"max_timeouts,omitempty"`
	// MemoryLimit bounds what one call of a Lua function may allocate, in
	// bytes (both engines; see docs/compute.md): a call over it fails with
	// luavm.ErrMemoryLimit (or ErrStringLimit for a string a builtin was
	// asked to build). 0 = luavm.DefaultMemoryLimit (256 MiB), < 0 = none.
	MemoryLimit int64 `yaml:"memory_limit" json:"memory_limit,omitempty"`
	// MaxResultBytes bounds a value a Lua function gives (a string, a
	// table's JSON; on LuaJIT also a field it writes to the row): a larger
	// one fails the row with luavm.ErrResultSize, naming the script and
	// the column. 0 = luavm.DefaultMaxResultBytes (64 MiB), < 0 = none.
	MaxResultBytes int64 `yaml:"max_result_bytes" json:"max_result_bytes,omitempty"`
}

// ScriptHost is what a Lua function's host modules get: the values
// sluice.config reads, and the bounds of its log lines and metric series
// (docs/compute.md, "Host modules").
type ScriptHost struct {
	// Params are the values sluice.config(key) returns: strings, numbers
	// and bools, so that one script serves several tables with their own.
	Params map[string]any `yaml:"params" json:"params,omitempty"`
	// LogRate is the log lines a second the script may write, LogBurst
	// how many at once; the lines over it are counted and reported in one
	// line. 0: compute.Options.ScriptLimits (the server's
	// limits.script_log_rate and script_log_burst; then 10 a second, 100
	// at once); LogRate < 0: no limit.
	LogRate  float64 `yaml:"log_rate" json:"log_rate,omitempty"`
	LogBurst int     `yaml:"log_burst" json:"log_burst,omitempty"`
	// MaxSeries bounds the metric series (name and labels) the script's
	// stats calls make; the calls beyond are counted in
	// sluice_script_series_dropped_total and otherwise ignored. 0:
	// compute.Options.ScriptLimits (limits.script_max_series; then 100).
	MaxSeries int `yaml:"max_series" json:"max_series,omitempty"`
}

// S3 says where the s3:// source of a function is read from and with which
// keys. Empty fields fall back to the environment as the AWS SDK does
// (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY), as the cold tier's do.
type S3 struct {
	// Endpoint is an S3-compatible server's URL, e.g. http://127.0.0.1:7070.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
	// Region signs the requests (default us-east-1).
	Region string `yaml:"region" json:"region,omitempty"`
	// PathStyle puts the bucket in the URL's path (self-hosted servers).
	PathStyle bool `yaml:"path_style" json:"path_style,omitempty"`
	// AccessKey and SecretKey are the keys, revealed at each request so
	// that a rotated secret file is picked up; unset means the
	// environment's. Never in JSON: a table's description shows where its
	// function is read from, not with which keys.
	AccessKey secret.Ref `yaml:"access_key,omitempty" json:"-"`
	SecretKey secret.Ref `yaml:"secret_key,omitempty" json:"-"`
}

// Check reports the problems of s's keys that need nothing but s: a key
// without the other, a secret that names both a variable and a file, or a
// variable unset now. A nil s (no s3 section) has none.
func (s *S3) Check(where string) []error {
	if s == nil {
		return nil
	}
	errs := append(s.AccessKey.Check(where+".access_key"), s.SecretKey.Check(where+".secret_key")...)
	if s.AccessKey.IsSet() != s.SecretKey.IsSet() {
		errs = append(errs, fmt.Errorf("%s: set access_key and secret_key together", where))
	}
	return errs
}
