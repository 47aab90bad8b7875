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

// conform converts the values of schema columns to their types where that
// loses nothing (numbers to int64/float64, RFC 3339 strings and unix seconds
// to time.Time, ...). A value that does not convert is left alone: the table
// rejects it with an error naming the row and column.
func conform(row Row, schema map[string]compute.Type) {
	if len(schema) == 0 {
		return
	}
	for k, v := range row {
		t, ok := schema[k]
		if !ok || v == nil {
			continue
		}
		if s, isStr := v.(string); isStr && t == compute.Timestamp {
			if tm, err := parseTime(s); err == nil {
				row[k] = tm
			}
			continue
		}
		if t == compute.Int32 {
			t = compute.Int64
		}
		if c, err := compute.Coerce(v, t); err == nil {
			row[k] = c
		}
	}
}
