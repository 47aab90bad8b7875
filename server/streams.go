package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/stream"
)

// deadLetterColumns are the columns of tc's dead-letter table
// (ingest.DeadLetterColumns: origin holds a stream message's topic,
// partition and offset, or stream and sequence), and a message's
// metadata, which replay gives back to its rows (stream.MetadataColumn).
func deadLetterColumns(config.Table) []struct{ Name, Type string } {
	return append(slices.Clip(ingest.DeadLetterColumns), struct{ Name, Type string }{stream.MetadataColumn, "string"})
}

// openSources makes the stream sources of every table; they start with
// Serve and stop before the store closes.
func (s *Server) openSources() error {
	s.router = s.newKeyRouter()
	var sources []stream.Source
	var errs []error
	for _, n := range s.names {
		ts := s.tables[n]
		if len(ts.cfg.Sources) == 0 {
			continue
		}
		if ts.degraded != "" {
			// Consuming without the table's scripts would store rows
			// without their computed columns, unfiltered: the messages
			// wait in the broker until a restart loads them.
			s.log.Error("table degraded: its sources are not started", "table", n, "sources", len(ts.cfg.Sources))
			continue
		}
		target := stream.Target{Store: s.store, Table: ts.table, Compute: ts.proc, Schema: ts.schema, Policy: ts.policy, Log: s.log,
			// The cold tier commits each message once (docs/cold-tier.md);
			// a keyed table orders a key's versions by their source
			// position (docs/upserts.md).
			SourceColumns: ts.cfg.Compact.Iceberg != nil || len(ts.cfg.PrimaryKey) > 0}
		if ts.deadLetter != nil {
			target.DeadLetters = ts.deadLetter.table
		}
		for i, sc := range ts.cfg.Sources {
			var src stream.Source
			var err error
			switch {
			case sc.Kafka != nil:
				opts := kafkaOptions(*sc.Kafka)
				kafkaTarget := target
				if opts.Changes != nil {
					// The store orders a key's versions by their source
					// position (docs/changes.md).
					kafkaTarget.SourceColumns = true
					if opts.Changes.KeyColumn == "" && len(ts.cfg.PrimaryKey) == 1 {
						// A scalar message key is the table's one key
						// column's value.
						opts.Changes.KeyColumn = ts.cfg.PrimaryKey[0]
					}
				}
				if opts.Conn, err = kafkaConn(*sc.Kafka); err == nil {
					opts.SchemaRegistry, err = schemaRegistry(sc.Kafka.SchemaRegistry)
				}
				if err == nil {
					s.router.Hooks(n, &opts)
					src, err = stream.NewKafka(s.messageBound(kafkaTarget, sc.Kafka.MaxMessageBytes), n, opts)
				}
			case sc.NATS != nil:
				opts := natsOptions(*sc.NATS)
				if opts.Conn, err = natsConn(*sc.NATS); err == nil {
					opts.SchemaRegistry, err = schemaRegistry(sc.NATS.SchemaRegistry)
				}
				if err == nil {
					src, err = stream.NewNATS(s.messageBound(target, sc.NATS.MaxMessageBytes), n, opts)
				}
			case sc.S3 != nil:
				src, err = s3Source(context.Background(), s.messageBound(target, sc.S3.MaxObjectBytes), n, *sc.S3)
			default:
				err = errors.New("neither kafka, nats nor s3")
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("table %q: sources[%d]: %w", n, i, err))
				continue
			}
			sources = append(sources, src)
		}
	}
	s.sources = stream.NewRunner(s.log, sources...)
	return errors.Join(errs...)
}

// messageBound is target with a source's bound on a message body: its
// max_message_bytes (stream.DefaultMaxMessageBytes when unset), never more
// than limits.max_body_bytes, the bound HTTP puts on a request body after
// gzip decoding: a message is no license for what a request may not do.
func (s *Server) messageBound(target stream.Target, maxMessage int64) stream.Target {
	if maxMessage <= 0 {
		maxMessage = stream.DefaultMaxMessageBytes
	}
	if limit := s.cfg.Limits.MaxBodyBytes; limit > 0 {
		maxMessage = min(maxMessage, limit)
	}
	target.MaxMessageBytes = maxMessage
	return target
}
