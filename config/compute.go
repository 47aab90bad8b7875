package config

import "github.com/sluicedb/sluice/computeopt"

// A table's computed columns and filters are package computeopt's types,
// the same ones `sluice compute`'s config is (compute.ColumnConfig and
// FilterConfig are aliases of them too; docs/compute.md): the server hands
// them to compute as they are. They live in a leaf package, not in
// compute, so that reading a config does not link the Lua VMs; compute
// checks what needs it (names, types, error policies, the form of every
// func, engines, budgets) where it can also compile them
// (server.ValidateOptions, `serve --check`). config checks their s3 keys,
// as it checks every secret.
type (
	// ComputeScript is what a computed column and a filter share: the
	// function, how it runs and what it may spend.
	ComputeScript = computeopt.Script
	// ComputedColumn is one computed column.
	ComputedColumn = computeopt.Column
	// Filter is one filter: a function returning a bool; false drops the row.
	Filter = computeopt.Filter
	// Budget bounds what one Lua function may spend on one batch.
	Budget = computeopt.Budget
	// ScriptHost is what a Lua function's host modules get.
	ScriptHost = computeopt.ScriptHost
	// ComputeS3 is the endpoint and keys of a function's s3:// func.
	ComputeS3 = computeopt.S3
)
