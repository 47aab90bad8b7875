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
	"github.com/sluicedb/sluice/computeopt"
)

// Config is the computed columns and filters of one table: `sluice
// compute`'s YAML, and a table's `computed:` and `filters:` lists in the
// server's config (config.Table holds the same types).
type Config struct {
	// Computed columns, evaluated in this order; a column sees the values of
	// the columns before it.
	Computed []ColumnConfig `yaml:"computed"`
	// Filters run before the computed columns, on the input row; a row is
	// kept only if every filter returns true.
	Filters []FilterConfig `yaml:"filters"`
}

// The options of a column and a filter are package computeopt's, which
// the server's config shares: a table's `computed:` and `filters:` are
// this Config's lists as they are.
type (
	// ScriptConfig is what a column and a filter share: the function, how
	// it runs and what it may spend.
	ScriptConfig = computeopt.Script
	// ColumnConfig is one computed column.
	ColumnConfig = computeopt.Column
	// FilterConfig is one filter: a function returning a bool; false drops
	// the row.
	FilterConfig = computeopt.Filter
	// Budget bounds what one Lua function may spend on one batch, beside
	// the per-row timeout.
	Budget = computeopt.Budget
)

// DefaultMaxTimeouts is Budget.MaxTimeouts when 0: a function that timed
// out on three rows of a batch is taken to be looping, so a runaway costs a
// batch 3 x its timeout (15 s with the default 5 s), not one per row.
const DefaultMaxTimeouts = 3

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
	return cfg, errors.Join(append(s3KeysInYAML(cfg), cfg.Validate())...)
}

// ErrS3KeysInYAML: a config of `sluice compute` gave an s3 section keys.
// Its S3 keys come from the environment only (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY), so that the file never holds one; a server's
// config names its keys as secrets ({env: ...}, {file: ...}), which config
// checks.
var ErrS3KeysInYAML = errors.New("access_key and secret_key come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), not from this file")

// s3KeysInYAML reports every column and filter of cfg whose s3 section sets
// a key (ErrS3KeysInYAML).
func s3KeysInYAML(cfg Config) []error {
	var errs []error
	check := func(where string, s3 *S3Options) {
		if s3 != nil && (s3.AccessKey.IsSet() || s3.SecretKey.IsSet()) {
			errs = append(errs, fmt.Errorf("%s: s3: %w", where, ErrS3KeysInYAML))
		}
	}
	for i, col := range cfg.Computed {
		check(fmt.Sprintf("computed[%d] %q", i, col.Name), col.S3)
	}
	for i, f := range cfg.Filters {
		check(fmt.Sprintf("filters[%d] %q", i, f.Name), f.S3)
	}
	return errs
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
		errs = append(errs, checkScriptHost(where, col.ScriptHost)...)
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
		errs = append(errs, checkScriptHost(where, f.ScriptHost)...)
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
