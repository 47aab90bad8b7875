package rdbtool

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/sluicedb/sluice/rdb"
)

// FilterSpec is a Filter as a config file writes it (a table's rdb:
// section): the key types by name.
type FilterSpec struct {
	DBs      []int
	Types    []string // as ParseType takes them
	Prefixes []string
	Pattern  string
	Regex    string
	MinSize  int64
}

// NewFilter builds spec's Filter and checks what only building it can: the
// type names, the Redis glob and the regular expression, so that a bad one
// is found before a snapshot is read, not when a scan starts. It reports
// every problem at once, each naming its field as the config does
// (`type[1] "tree": ...`, `pattern: ...`, `regex "(": ...`); the values
// that need no rdb knowledge (negative numbers, empty prefixes) are the
// config's to check.
func NewFilter(spec FilterSpec) (Filter, error) {
	f := Filter{DBs: spec.DBs, Prefixes: spec.Prefixes, Pattern: spec.Pattern, Regex: spec.Regex, MinSize: spec.MinSize}
	var errs []error
	for i, name := range spec.Types {
		t, err := ParseType(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("type[%d] %q: want string, list, set, zset, hash, stream or module", i, name))
			continue
		}
		f.Types = append(f.Types, t)
	}
	if spec.Pattern != "" {
		if _, err := rdb.KeyPattern(spec.Pattern); err != nil {
			errs = append(errs, fmt.Errorf("pattern: %w", err))
		}
	}
	if spec.Regex != "" {
		if _, err := regexp.Compile(spec.Regex); err != nil {
			errs = append(errs, fmt.Errorf("regex %q: %w", spec.Regex, err))
		}
	}
	return f, errors.Join(errs...)
}
