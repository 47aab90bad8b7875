package config

import (
	"strings"
	"testing"
	"time"
)

// TestIcebergMaintain: compact.iceberg.maintain parses, takes environment
// overrides, applies its interval's default, and rejects negative values
// naming the key.
func TestIcebergMaintain(t *testing.T) {
	src := icebergConfig + "        maintain:\n          target_file_bytes: 67108864\n          keep_snapshots: 20\n          snapshot_age: 30m\n"
	env := map[string]string{"SLUICE_TABLES_EVENTS_COMPACT_ICEBERG_MAINTAIN_MIN_INPUT_FILES": "4"}
	cfg, err := Parse([]byte(src), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Tables[0].Compact.Iceberg.Maintain
	if m.TargetFileBytes != 64<<20 || m.KeepSnapshots != 20 || m.SnapshotAge != 30*time.Minute || m.MinInputFiles != 4 {
		t.Fatalf("maintain section %+v", m)
	}
	if got := m.MaintainInterval(); got != DefaultMaintainInterval {
		t.Errorf("default interval %v, want %v", got, DefaultMaintainInterval)
	}
	if got := (&IcebergMaintain{Interval: -time.Second}).MaintainInterval(); got != 0 {
		t.Errorf("negative interval gives %v, want 0 (never)", got)
	}
	bad := icebergConfig + "        maintain:\n          target_file_bytes: 1000\n          keep_snapshots: -1\n          snapshot_age: -1h\n"
	_, err = Parse([]byte(bad), func(string) (string, bool) { return "", false })
	for _, want := range []string{"maintain.target_file_bytes", "maintain.keep_snapshots", "maintain.snapshot_age"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
