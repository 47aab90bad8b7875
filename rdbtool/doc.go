// Package rdbtool is what `sluice rdb` does with a Redis RDB snapshot, built
// on the streaming parser in package rdb: JSON / JSON Lines export in a
// lossless, documented form, a memory report (estimated bytes per key, as
// redis-rdb-tools estimates them), key listing and counts, filters mapped onto
// the parser's own key filter so rejected values are skipped undecoded, and
// per-key Lua scripts through luavm. KeyReader reads a snapshot from any reader
// as key records (value JSON and memory estimate in one pass): package ingest
// stores them as rows (`sluice ingest --format rdb`). The benchmark (`sluice
// bench rdb`) lives in bench/rdbbench and its corpus generator in
// internal/rdbcorpus.
//
// Export writes JSON by hand into reused buffers (no reflection per key) and,
// with two or more CPUs, parses on one goroutine while another escapes and
// formats (see parallel.go). The JSON form, the memory model, the script
// contract and the benchmark are documented in docs/rdb.md.
package rdbtool
