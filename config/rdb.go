package config

import "fmt"

// RDB are a table's defaults for the Redis RDB snapshots sent to it
// (`sluice ingest --format rdb`, application/x-redis-rdb bodies): the
// parser's filters and the batch size. A request's own filters (query
// parameters, CLI flags) combine with them as docs/rdb.md says: db, type,
// prefix and min_size narrow the table's selection, pattern, regex and
// batch replace the table's.
type RDB struct {
	// DB keeps the keys of these databases.
	DB []int `yaml:"db"`
	// Type keeps the keys of these types (string, list, set, zset, hash,
	// stream, module).
	Type []string `yaml:"type"`
	// Prefix keeps the keys starting with one of these.
	Prefix []string `yaml:"prefix"`
	// Pattern keeps the keys matching this Redis glob (KEYS/SCAN MATCH).
	Pattern string `yaml:"pattern"`
	// Regex keeps the keys matching this Go regular expression (RE2).
	Regex string `yaml:"regex"`
	// MinSize keeps the keys whose estimated memory is at least this many
	// bytes.
	MinSize int64 `yaml:"min_size"`
	// Batch is the rows per batch (0: the default, 1000).
	Batch int `yaml:"batch"`
}

// MaxRDBBatch bounds RDB.Batch and a request's batch parameter.
const MaxRDBBatch = 1_000_000

// validate returns r's problems, each prefixed with where: those it can
// find alone. The type names, the glob and the regular expression are
// checked where the filter is built (rdbtool.NewFilter, from the server's
// ValidateOptions), with the same prefix.
func (r *RDB) validate(where string) []error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(where+": rdb."+format, args...))
	}
	for i, db := range r.DB {
		if db < 0 {
			add("db[%d]: negative database number %d", i, db)
		}
	}
	for i, p := range r.Prefix {
		if p == "" {
			add("prefix[%d]: empty (it would keep every key)", i)
		}
	}
	if r.MinSize < 0 {
		add("min_size: negative (%d)", r.MinSize)
	}
	if r.Batch < 0 || r.Batch > MaxRDBBatch {
		add("batch: %d, want 1 to %d rows (or 0 for the default)", r.Batch, MaxRDBBatch)
	}
	return errs
}
