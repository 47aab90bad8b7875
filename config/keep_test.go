package config

import (
	"strings"
	"testing"
)

// TestTimeModeKeepRefused: compact.iceberg in time mode must remove what
// it commits (a query could not tell the store's committed rows from the
// others); continuous mode may keep them.
func TestTimeModeKeepRefused(t *testing.T) {
	keep := strings.Replace(icebergConfig, "      remove: true\n", "", 1)
	_, err := Parse([]byte(keep), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "compact.remove: false needs compact.iceberg.continuous: true") {
		t.Fatalf("time mode without remove: %v, want the refusal", err)
	}
	continuous := strings.Replace(keep, "        unsorted: true\n", "        unsorted: true\n        continuous: true\n", 1)
	if _, err := Parse([]byte(continuous), func(string) (string, bool) { return "", false }); err != nil {
		t.Fatalf("continuous without remove: %v", err)
	}
}
