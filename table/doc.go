// Package table stores time-series tables in an embedded Pebble LSM store.
//
// One Store is one Pebble database; each table is a keyspace (a key prefix).
// Rows are not stored one key per row: every Append becomes, per partition
// (the value of the table's hashBy column) and per time bucket (BlockSpan,
// one hour by default), one block holding the rows column by column, zstd
// compressed, keyed by (table, hash(partition), the block's minimum event
// time, sequence). A query for one partition over a time range is one range
// scan; TTL expiry and compaction removal are range deletions per partition.
//
// Append is durable and atomic: all blocks and schema changes of a call are
// one pebble.Batch committed with pebble.Sync, so a crash loses no
// acknowledged row and never exposes part of a batch.
//
// A table with a primary key (Config.PrimaryKey) keeps one row per key:
// a key index and per-block dead-row marks, written in the append's batch,
// make each key's latest row the only one queries see (keyed.go,
// docs/upserts.md).
//
// The key layout, block encoding and design choices are described in
// docs/storage.md.
package table
