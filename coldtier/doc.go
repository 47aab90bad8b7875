// Package coldtier compacts a sluice table out of the hot store into an
// Apache Iceberg table (one per sluice table) on S3-compatible object
// storage or a local directory, registered in an Iceberg catalog (the SQL
// catalog on SQLite or PostgreSQL, or the REST catalog protocol), and
// answers queries that span both tiers.
//
// It is built on github.com/apache/iceberg-go: the catalogs, the Parquet
// writer (with day partitioning of the event-time column), the S3 file IO,
// the snapshot commit with optimistic concurrency (refresh and replay on
// conflict) and the scan planning with partition and statistics pruning
// all come from it. What this package adds is the write side: the mapping
// of sluice types to Iceberg types, schema evolution as the sluice schema
// widens, streaming the store's rows into Arrow batches of a bounded size,
// the commit protocol that makes a run idempotent across crashes (see
// Compactor.Compact and docs/cold-tier.md), the orphan cleanup, and the
// registration in internal/coldapi. Its parts by purpose:
//
//   - coldtier/catalog opens the catalog (SQLite, PostgreSQL, REST) with
//     the warehouse's file IO and creates a table's Iceberg table;
//   - coldtier/coldread reads the planned data files with
//     github.com/parquet-go/parquet-go into typed columns and matches them
//     with the store's own predicate evaluator (table.Condition);
//   - this package writes, recovers and counts (Counters, read by the
//     server at scrape time through coldapi.Tier).
package coldtier
