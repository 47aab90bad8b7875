// Package stream consumes message streams into tables, exactly once:
// Kafka topics in a consumer group (franz-go) and NATS JetStream streams
// (nats.go). Each message body is decoded by package ingest's decoders,
// computed and filtered by the table's compute.Processor exactly as an HTTP
// batch is, and the rows, their dead letters and the source position that
// produced them (a partition's next offset, a consumer's last stream
// sequence) are committed in one synced Pebble batch (table.Batch). A
// source resumes from the stored position, so a crash at any moment
// neither loses a message nor stores one twice in that store.
//
// The argument, the failure table and the deployment are in
// docs/streams.md.
package stream
