package server

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
)

// TestIcebergOrphanCleanup: with compact.iceberg (a local warehouse and the
// default SQLite catalog), the scheduler deletes unreferenced files older
// than orphan_age every orphan_interval and counts them in /metrics, while
// younger unreferenced files (maybe another node's upload in flight) and
// the committed data files stay; POST /v1/tables/{t}/orphans?older_than=
// runs the cleanup on demand, and refuses (400, naming the floor) an age
// below the table's orphan_age, whoever asks.
func TestIcebergOrphanCleanup(t *testing.T) {
	wh := t.TempDir()
	cfg := strings.Replace(testConfig, "    on_bad_line: reject\n", "    on_bad_line: reject\n"+
		"    compact:\n      after: 1h\n      remove: true\n      iceberg:\n        warehouse: "+wh+"\n"+
		"        orphan_interval: 50ms\n        orphan_age: 8h\n", 1)
	s := startServer(t, cfg, "")
	nd := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}
{"user":"bob","ts":"2024-05-02T11:00:00Z","n":2}
`
	if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd)); code != 200 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	if code, res, _ := post(t, s.url+"/v1/tables/events/compact", "application/json", nil); code != 200 || res["rows"] != float64(2) {
		t.Fatalf("compact: %d %v", code, res)
	}
	dataDir := filepath.Join(wh, "sluice", "events", "data")
	committed := parquetFiles(t, dataDir)
	if len(committed) == 0 {
		t.Fatalf("no data files under %s after the compaction", dataDir)
	}
	// Two unreferenced files, as a run killed before its commit leaves them.
	old, young := filepath.Join(dataDir, "orphan-old.parquet"), filepath.Join(dataDir, "orphan-young.parquet")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("PAR1 not referenced PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-9 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}

	var metrics string
	for i := 0; i < 400; i++ {
		_, metrics = get(t, s.url+"/metrics")
		if strings.Contains(metrics, `sluice_coldtier_orphan_files_deleted_total{table="events"} 1`) {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !strings.Contains(metrics, `sluice_coldtier_orphan_files_deleted_total{table="events"} 1`) {
		t.Fatalf("the scheduler did not delete the old orphan:\n%s", grep(metrics, "orphan"))
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old orphan still there: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("the young unreferenced file was deleted (it could be an upload in flight): %v", err)
	}
	for _, f := range committed {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("committed data file deleted: %v", err)
		}
	}

	// On demand: no younger than the table's orphan_age (8h).
	for _, age := range []string{"0s", "1ns", "30s", "7h59m"} {
		code, res, _ := post(t, s.url+"/v1/tables/events/orphans?older_than="+age, "application/json", nil)
		if msg, _ := res["error"].(string); code != 400 || !strings.Contains(msg, "is below 8h0m0s (the table's compact.iceberg.orphan_age, never below 7h0m0s") {
			t.Errorf("POST orphans?older_than=%s: %d %v; want 400 naming the floor", age, code, res)
		}
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatalf("a refused cleanup deleted the young file: %v", err)
	}
	older := time.Now().Add(-10 * time.Hour)
	if err := os.Chtimes(young, older, older); err != nil {
		t.Fatal(err)
	}
	code, res, _ := post(t, s.url+"/v1/tables/events/orphans?older_than=8h", "application/json", nil)
	deleted, _ := res["deleted"].([]any)
	if code != 200 || len(deleted) > 1 {
		t.Fatalf("POST orphans?older_than=8h: %d %v; want the young file deleted (unless the scheduler got it first)", code, res)
	}
	if got := parquetFiles(t, dataDir); len(got) != len(committed) {
		t.Errorf("data files after the cleanup: %v, want the committed %v", got, committed)
	}
	_, body := get(t, s.url+"/v1/tables/events/query?from=2024-05-01T00:00:00Z&to=2024-05-03T00:00:00Z")
	if got := len(lines(body)); got != 2 {
		t.Errorf("query over the cold tier after the cleanup: %d rows, want 2:\n%s", got, body)
	}

	for _, c := range []struct {
		path string
		code int
	}{
		{"/v1/tables/loose/orphans", 400},
		{"/v1/tables/nope/orphans", 404},
		{"/v1/tables/events/orphans?older_than=soon", 400},
	} {
		if code, res, _ := post(t, s.url+c.path, "application/json", nil); code != c.code {
			t.Errorf("POST %s: %d %v, want %d", c.path, code, res, c.code)
		}
	}
}

func parquetFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestOrphanFloorCoversLeases: the orphan_age floor counts the longest
// lease this server grants (a lease holds every node's commits).
func TestOrphanFloorCoversLeases(t *testing.T) {
	if MaxLeaseTTL > config.MaxLeaseTTL {
		t.Errorf("leases may live %v, the orphan_age floor counts %v (config.MaxLeaseTTL)", MaxLeaseTTL, config.MaxLeaseTTL)
	}
	if got := orphanFloor(&config.Iceberg{}); got != config.DefaultOrphanAge {
		t.Errorf("floor of a table with the default orphan_age: %v, want %v", got, config.DefaultOrphanAge)
	}
	if got := orphanFloor(&config.Iceberg{OrphanAge: time.Hour}); got != config.MinOrphanAge {
		t.Errorf("floor of an orphan_age under the minimum (a config not checked): %v, want %v", got, config.MinOrphanAge)
	}
}
