package table

import (
	"testing"
	"time"
)

// checkUTCTime: whatever parseUTCTime reads, time.Parse(RFC3339Nano) and
// timeNanos read the same (what parseTimeString did before it).
func checkUTCTime(t *testing.T, s string) {
	t.Helper()
	ns, ok := parseUTCTime(s)
	if !ok {
		return
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("parseUTCTime(%q) = %d, but time.Parse fails: %v", s, ns, err)
	}
	want, err := timeNanos(tm)
	if err != nil || want != ns {
		t.Fatalf("parseUTCTime(%q) = %d, time.Parse and timeNanos = %d, %v", s, ns, want, err)
	}
}

var utcTimeCases = []struct {
	s  string
	ok bool // parseUTCTime takes it
}{
	{"2024-05-01T00:00:00Z", true},
	{"2024-05-01T10:11:12.037Z", true},
	{"2024-05-01T10:11:12.123456789Z", true},
	{"2024-05-01T10:11:12.1Z", true},
	{"2024-02-29T23:59:59Z", true},
	{"2000-02-29T00:00:00Z", true},
	{"1678-01-01T00:00:00Z", true},
	{"2261-12-31T23:59:59.999999999Z", true},
	{"2023-02-29T00:00:00Z", false}, // no such day: time.Parse's error
	{"1900-02-29T00:00:00Z", false},
	{"2024-04-31T00:00:00Z", false},
	{"2024-13-01T00:00:00Z", false},
	{"2024-05-01T24:00:00Z", false},
	{"2024-05-01T23:60:00Z", false},
	{"2024-05-01T23:59:60Z", false},
	{"1677-12-31T23:59:59Z", false}, // outside int64 nanoseconds: timeNanos's error
	{"2262-01-01T00:00:00Z", false},
	{"2024-05-01T10:11:12.Z", false},
	{"2024-05-01T10:11:12.1234567891Z", false},
	{"2024-05-01T10:11:12,5Z", false},
	{"2024-05-01T10:11:12+02:00", false},
	{"2024-05-01t10:11:12Z", false},
	{"2024-05-01T10:11:12z", false},
	{" 2024-05-01T10:11:12Z", false},
	{"2024-05-01T1a:11:12Z", false},
	{"+024-05-01T10:11:12Z", false},
	{"2024-05-01T10:11:12.-1Z", false},
	{"1714557072", false},
}

func TestParseUTCTime(t *testing.T) {
	for _, c := range utcTimeCases {
		if _, ok := parseUTCTime(c.s); ok != c.ok {
			t.Errorf("parseUTCTime(%q) ok = %v, want %v", c.s, ok, c.ok)
		}
		checkUTCTime(t, c.s)
	}
}

func FuzzParseUTCTime(f *testing.F) {
	for _, c := range utcTimeCases {
		f.Add(c.s)
	}
	f.Fuzz(checkUTCTime)
}

// TestParseUTCTimeEveryDay: every day parseUTCTime takes, at the first and
// the last nanosecond of the day, is time.Parse's (the date arithmetic
// replaced time.Date: leap days, century years, the ends of the range).
func TestParseUTCTimeEveryDay(t *testing.T) {
	for d := time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2262; d = d.AddDate(0, 0, 1) {
		checkUTCTime(t, d.Format("2006-01-02T15:04:05Z"))
		checkUTCTime(t, d.Format("2006-01-02")+"T23:59:59.999999999Z")
	}
}
