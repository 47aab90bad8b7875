package server

import (
	"errors"
	"fmt"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/rdbtool"
	"github.com/sluicedb/sluice/stream"
)

// The server is the one place that translates the config (package config:
// YAML described and checked for what it can check alone) into the options
// of the packages that run it: compute's columns and filters, rdbtool's
// filters of RDB snapshots, stream's sources (and coldapi's cold tier,
// cold.go). docs/architecture.md draws the layers.

// ValidateOptions builds, without loading or opening anything, the options
// every table of cfg gives the packages that run it, and reports every
// problem config.Validate cannot find alone, each located in the config as
// config.Validate locates its own (`tables[0] "events": computed[1] "n":
// ...`, `tables[0] "events": rdb.type[0] "tree": ...`). New and Check run
// it after config.Validate; a caller that reports config.Load's problems
// runs it to add these to them (one run shows every problem). It is safe
// on a config that failed config.Validate.
func ValidateOptions(cfg *config.Config) error {
	var errs []error
	for i, tc := range cfg.Tables {
		where := fmt.Sprintf("tables[%d] %q", i, tc.Name)
		// each problem located on its own line (config.Validate used to
		// name the table on the first of a table's compute problems only)
		if err := computeConfig(tc).Validate(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s: %w", where, e))
			}
		}
		if _, err := rdbFilter(tc.RDB); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fmt.Errorf("%s: rdb.%w", where, e))
			}
		}
	}
	errs = append(errs, authRoleErrors(cfg.Auth)...)
	return errors.Join(errs...)
}

// validate is config.Validate and ValidateOptions: what New and Check
// refuse a config for before they load anything.
func validate(cfg *config.Config) error {
	return errors.Join(cfg.Validate(), ValidateOptions(cfg))
}

// splitJoined is the errors joined in err (errors.Join), or err alone.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// computeConfig is package compute's config of tc's computed columns and
// filters: the same lists, since both packages describe them with
// computeopt's types.
func computeConfig(tc config.Table) compute.Config {
	return compute.Config{Computed: tc.Computed, Filters: tc.Filters}
}

// tableS3 is where a table's s3:// funcs without an s3 section of their own
// are read: the endpoint of its cold tier, when it has one.
func tableS3(tc config.Table) *compute.S3Options {
	ic := tc.Compact.Iceberg
	if ic == nil {
		return nil
	}
	return &compute.S3Options{Endpoint: ic.S3.Endpoint, Region: ic.S3.Region, PathStyle: ic.S3.PathStyle}
}

// rdbFilter is rdbtool's filter of a table's rdb: section.
func rdbFilter(r config.RDB) (rdbtool.Filter, error) {
	return rdbtool.NewFilter(rdbtool.FilterSpec{DBs: r.DB, Types: r.Type, Prefixes: r.Prefix, Pattern: r.Pattern, Regex: r.Regex, MinSize: r.MinSize})
}

// kafkaOptions is stream's options of a sources[].kafka section; the
// section's max_message_bytes goes to the target (messageBound).
func kafkaOptions(k config.KafkaSource) stream.KafkaOptions {
	return stream.KafkaOptions{
		Brokers: k.Brokers, Topics: k.Topics, Group: k.Group, Format: k.Format, Start: k.Start, Metadata: k.Metadata,
		MaxPollRecords: k.MaxPollRecords, FetchMaxBytes: k.FetchMaxBytes, SessionTimeout: k.SessionTimeout, InstanceID: k.InstanceID,
		Linger: k.Linger, Changes: kafkaChanges(k.Changes),
	}
}

// kafkaChanges is stream's change stream options of a sources[].kafka
// section's changes (nil: not a change stream).
func kafkaChanges(c *config.KafkaChanges) *stream.Changes {
	if c == nil {
		return nil
	}
	return &stream.Changes{Format: c.Format, Field: c.Field, Delete: c.Delete, KeyColumn: c.KeyColumn}
}

// natsOptions is stream's options of a sources[].nats section; the
// section's max_message_bytes goes to the target (messageBound).
func natsOptions(n config.NATSSource) stream.NATSOptions {
	return stream.NATSOptions{
		URL: n.URL, Stream: n.Stream, Subject: n.Subject, Durable: n.Durable, Format: n.Format, Start: n.Start,
		Metadata: n.Metadata, MaxBatch: n.MaxBatch, FetchWait: n.FetchWait,
	}
}
