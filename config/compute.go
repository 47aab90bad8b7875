package config

import (
	"fmt"
	"time"
)

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
	// Func is inline Lua code, a Lua file (path, file://, http(s)://,
	// s3://), a Go plugin (.so path or URL) or a built-in (make://...).
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
	// S3 is where an s3:// func is read from; nil: the table's cold-tier
	// endpoint, else the environment's.
	S3 *ComputeS3 `yaml:"s3"`
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
	// S3 is where an s3:// func is read from; nil: the table's cold-tier
	// endpoint, else the environment's.
	S3 *ComputeS3 `yaml:"s3"`
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

// ComputeS3 is the endpoint and keys of a function's s3:// func. Empty
// fields fall back to the environment, as the cold tier's do
// (AWS_ENDPOINT_URL_S3, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
type ComputeS3 struct {
	Endpoint  string `yaml:"endpoint"`
	Region    string `yaml:"region"`
	PathStyle bool   `yaml:"path_style"`
	AccessKey Secret `yaml:"access_key,omitempty"`
	SecretKey Secret `yaml:"secret_key,omitempty"`
}

func (c *ComputeS3) validate(where string) []error {
	if c == nil {
		return nil
	}
	errs := append(c.AccessKey.validate(where+".access_key"), c.SecretKey.validate(where+".secret_key")...)
	if c.AccessKey.IsSet() != c.SecretKey.IsSet() {
		errs = append(errs, fmt.Errorf("%s: set access_key and secret_key together", where))
	}
	return errs
}
