// Package kafkabench is the harness behind `sluice bench kafka`: it
// pre-produces 10-field NDJSON messages to a 4-partition topic of a real
// Kafka broker (started from the jars of scripts/install-kafka unless one
// is given), runs `sluice serve` child processes that consume them, and
// reports rows/s with and without a Lua column, the consumer's peak RSS,
// produce-to-queryable latency at a fixed rate, HTTP ingest of the same
// rows in the same run, and two nodes in one group.
package kafkabench
