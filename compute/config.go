package compute

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicedb/sluice/coltype"
)

// Config is the computed columns and filters of one table. A later server
// config embeds it per table (a table's `computed:` and `filters:` lists),
// e.g. as a field tagged `yaml:",inline"`.
type Config struct {
	// Computed columns, evaluated in this order; a column sees the values of
	// the columns before it.
	Computed []ColumnConfig `yaml:"computed"`
	// Filters run before the computed columns, on the input row; a row is
	// kept only if every filter returns true.
	Filters []FilterConfig `yaml:"filters"`
}

// ColumnConfig is one computed column, in Talaria's shape plus sluice's
// error policy, nullability and timeout.
type ColumnConfig struct {
	Name string `yaml:"name"`
	// Type is a type name or alias, see coltype.Parse.
	Type string `yaml:"type"`
	// Func is inline Lua code, a Lua file (path, file://, http(s)://,
	// s3://), a Go plugin (.so path or URL) or a built-in (make://...); see ResolveSource.
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
	// Allow opens Lua libraries the sandbox leaves out, for this function:
	// io, os, debug, coroutine, channel, load, require (see docs/pool.md).
	Allow  []string `yaml:"allow" json:"allow,omitempty"`
	Budget `yaml:",inline"`
	// Engine runs a Lua function: gopher-lua (default) or luajit.
	Engine     string `yaml:"engine"`
	ScriptHost `yaml:",inline"`
	// S3 says where an s3:// Func is read from and with which keys; nil
	// means the table's default (Options.S3).
	S3 *S3Options `yaml:"s3" json:"s3,omitempty"`
}

// Budget bounds what one Lua function may spend on one batch, beside the
// per-row Timeout: without it a runaway main costs Timeout per row, and a
// 1000-row batch held an ingest slot for ~83 minutes.
type Budget struct {
	// BatchTimeout bounds the rows of one batch together: once it is used,
	// the rows not yet run fail at once with ErrBatchBudget (and the
	// function's policy applies to them). 0 = no bound but MaxTimeouts.
	BatchTimeout time.Duration `yaml:"batch_timeout" json:"batch_timeout,omitempty"`
	// MaxTimeouts: once this many rows of one batch have timed out, the
	// rows not yet run fail at once with ErrBatchBudget. 0 =
	// DefaultMaxTimeouts, < 0 = no limit (every row gets its Timeout).
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

// DefaultMaxTimeouts is Budget.MaxTimeouts when 0: a function that timed
// out on three rows of a batch is taken to be looping, so a runaway costs a
// batch 3 x its timeout (15 s with the default 5 s), not one per row.
const DefaultMaxTimeouts = 3

// FilterConfig is one filter: a function returning a bool; false drops the row.
type FilterConfig struct {
	Name     string `yaml:"name"`
	Func     string `yaml:"func"`
	FuncName string `yaml:"funcname"`
	// OnError is the policy when the filter fails: drop (default), keep,
	// reject or deadletter.
	OnError string        `yaml:"on_error"`
	Timeout time.Duration `yaml:"timeout"`
	// Allow opens Lua libraries the sandbox leaves out, as for a column.
	Allow  []string `yaml:"allow" json:"allow,omitempty"`
	Budget `yaml:",inline"`
	// Engine runs a Lua function: gopher-lua (default) or luajit.
	Engine     string `yaml:"engine"`
	ScriptHost `yaml:",inline"`
	// S3 says where an s3:// Func is read from and with which keys; nil
	// means the table's default (Options.S3).
	S3 *S3Options `yaml:"s3" json:"s3,omitempty"`
}

// Policy says what happens to a row whose function failed.
type Policy uint8

// The error policies.
const (
	PolicyNull       Policy = iota + 1 // the column is null, the row goes on (columns only)
	PolicyKeep                         // the row is kept as if the filter passed (filters only)
	PolicyDrop                         // the row is dropped
	PolicyReject                       // the whole batch is rejected
	PolicyDeadLetter                   // the row goes, annotated, to the dead-letter output
)

func (p Policy) String() string {
	switch p {
	case PolicyNull:
		return "null"
	case PolicyKeep:
		return "keep"
	case PolicyDrop:
		return "drop"
	case PolicyReject:
		return "reject"
	case PolicyDeadLetter:
		return "deadletter"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

func parsePolicy(s string, filter bool) (Policy, error) {
	switch s {
	case "":
		if filter {
			return PolicyDrop, nil
		}
		return PolicyNull, nil
	case "null":
		if !filter {
			return PolicyNull, nil
		}
	case "keep":
		if filter {
			return PolicyKeep, nil
		}
	case "drop":
		return PolicyDrop, nil
	case "reject":
		return PolicyReject, nil
	case "deadletter", "dead-letter", "dead_letter":
		return PolicyDeadLetter, nil
	}
	if filter {
		return 0, fmt.Errorf("unknown on_error %q for a filter (want drop, keep, reject or deadletter)", s)
	}
	return 0, fmt.Errorf("unknown on_error %q for a column (want null, drop, reject or deadletter)", s)
}

// UsesDeadLetter reports whether any column or filter routes failing rows
// to the dead-letter output (on_error: deadletter), so that a caller knows
// to provide one.
func (c Config) UsesDeadLetter() bool {
	for _, col := range c.Computed {
		if p, err := parsePolicy(col.OnError, false); err == nil && p == PolicyDeadLetter {
			return true
		}
	}
	for _, f := range c.Filters {
		if p, err := parsePolicy(f.OnError, true); err == nil && p == PolicyDeadLetter {
			return true
		}
	}
	return false
}

// ParseConfig decodes a YAML config. Unknown fields are errors (a typo such
// as `fucn:` must not silently drop a column). It checks the shape only;
// New loads the functions.
func ParseConfig(data []byte) (Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("compute config: %w", err)
	}
	return cfg, cfg.Validate()
}

// LoadConfig reads and parses the YAML config at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("compute config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Validate checks names, types, policies and the form of every func without
// loading anything, and reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, col := range c.Computed {
		where := fmt.Sprintf("computed[%d] %q", i, col.Name)
		if col.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is empty", where))
		} else if seen["c:"+col.Name] {
			errs = append(errs, fmt.Errorf("%s: duplicate column name", where))
		}
		seen["c:"+col.Name] = true
		if _, err := coltype.Parse(col.Type); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if _, err := parsePolicy(col.OnError, false); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		errs = append(errs, checkFunc(where, col.Func, col.FuncName, col.Timeout, col.Budget)...)
		errs = append(errs, checkEngine(where, col.Engine)...)
		errs = append(errs, col.ScriptHost.check(where)...)
	}
	for i, f := range c.Filters {
		where := fmt.Sprintf("filters[%d] %q", i, f.Name)
		if f.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is empty", where))
		} else if seen["f:"+f.Name] {
			errs = append(errs, fmt.Errorf("%s: duplicate filter name", where))
		}
		seen["f:"+f.Name] = true
		if _, err := parsePolicy(f.OnError, true); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		errs = append(errs, checkFunc(where, f.Func, f.FuncName, f.Timeout, f.Budget)...)
		errs = append(errs, checkEngine(where, f.Engine)...)
		errs = append(errs, f.ScriptHost.check(where)...)
	}
	return errors.Join(errs...)
}

func checkFunc(where, fn, funcName string, timeout time.Duration, budget Budget) []error {
	var errs []error
	src, err := ResolveSource(fn)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if src.Plugin && funcName == "" {
		errs = append(errs, fmt.Errorf("%s: plugin %s needs funcname (the exported symbol)", where, src))
	}
	if timeout < 0 {
		errs = append(errs, fmt.Errorf("%s: negative timeout %v", where, timeout))
	}
	if budget.BatchTimeout < 0 {
		errs = append(errs, fmt.Errorf("%s: negative batch_timeout %v", where, budget.BatchTimeout))
	}
	if budget.MemoryLimit > 0 && budget.MemoryLimit < 1<<20 {
		errs = append(errs, fmt.Errorf("%s: memory_limit %d is under 1 MiB (a Lua VM alone takes ~100 KB; -1 means no limit)", where, budget.MemoryLimit))
	}
	return errs
}
