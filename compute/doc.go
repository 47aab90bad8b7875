// Package compute evaluates computed columns and filters on rows before they
// are stored: the Talaria design (one Handler interface with Lua, Go-plugin
// and built-in loaders) made per table, counted, and fast.
//
// A row is a map[string]any as decoded by DecodeRow: JSON integers become
// int64 (every digit kept), integers beyond int64 stay json.Number, other
// numbers are float64, null is nil. Columns are evaluated in configuration
// order, one column for the whole batch at a time; each column's value is
// written into the row before the next column runs, so later columns (and the
// JSON encoding of a row) see earlier ones. Filters run first, on the input
// row, so that dropped rows cost no computation.
//
// Every failure is counted per column and loader (Stats), a sample is logged
// with the row (log/slog), and the column's error policy decides what happens
// to the row: null (the column is null), drop (the row is dropped), reject
// (the whole batch is rejected) or deadletter (the row goes, annotated, to the
// dead-letter output).
package compute
