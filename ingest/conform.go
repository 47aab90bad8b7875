package ingest

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/compute"
)

// timeLayouts are the string forms accepted for timestamp columns.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05", "2006-01-02"}

// parseTime reads an RFC 3339 time (or a close variant, UTC when no zone is
// given) or unix seconds.
func parseTime(s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		v, err := compute.Coerce(f, compute.Timestamp)
		if err == nil {
			return v.(time.Time), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (want RFC 3339 or unix seconds)", s)
}
