// Package upserts holds the benchmark of keyed tables (docs/perf/upserts.md,
// "Keyed tables at scale"): a store loaded with many keys takes a
// Zipf-skewed change stream (upserts and deletes with their source
// positions), measured against an append-only table taking the same rows in
// the same run: rows per CPU-second, change → visible in a query at a fixed
// rate, and the key index's bytes per key on disk and the heap per key.
// It is a test-only harness: `go test -run '^$' -bench . ./bench/upserts/`.
package upserts
