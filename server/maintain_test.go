package server

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIcebergMaintain: ten compactions of a few rows each leave ten small
// files per day; POST /v1/tables/events/maintain rewrites them into one per
// day, merges the manifests, expires the snapshots the configured
// keep_snapshots and snapshot_age allow and deletes the replaced files;
// the query over both tiers reads every row once; /metrics counts it; and
// the scheduler (interval 50ms) runs it too.
func TestIcebergMaintain(t *testing.T) {
	wh := t.TempDir()
	cfg := strings.Replace(testConfig, "    on_bad_line: reject\n", "    on_bad_line: reject\n"+
		"    compact:\n      after: 1h\n      remove: true\n      iceberg:\n        warehouse: "+wh+"\n"+
		"        maintain:\n          interval: -1s\n          keep_snapshots: 2\n          snapshot_age: 1ms\n", 1)
	s := startServer(t, cfg, "")
	const runs = 10
	for r := range runs {
		nd := fmt.Sprintf(`{"user":"ann","ts":"2024-05-01T10:00:%02dZ","n":%d}
{"user":"bob","ts":"2024-05-02T11:00:%02dZ","n":%d}
`, r, 2*r, r, 2*r+1)
		if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd)); code != 200 {
			t.Fatalf("ingest: %d %v", code, res)
		}
		if code, res, _ := post(t, s.url+"/v1/tables/events/compact", "application/json", nil); code != 200 || res["rows"] != float64(2) {
			t.Fatalf("compact: %d %v", code, res)
		}
	}
	dataDir := filepath.Join(wh, "sluice", "events", "data")
	if n := len(parquetFiles(t, dataDir)); n != 2*runs {
		t.Fatalf("%d data files after %d runs, want %d", n, runs, 2*runs)
	}
	time.Sleep(5 * time.Millisecond)
	code, res, _ := post(t, s.url+"/v1/tables/events/maintain", "application/json", nil)
	if code != 200 || res["files_rewritten"] != float64(2*runs) || res["files_written"] != float64(2) || res["data_files"] != float64(2) {
		t.Fatalf("POST maintain: %d %v; want 20 files rewritten into 2", code, res)
	}
	if res["snapshots"].(float64) > 3 || res["snapshots_expired"].(float64) == 0 {
		t.Errorf("POST maintain: %v; want at most 3 snapshots (keep_snapshots 2 + the node's newest run)", res)
	}
	_, body := get(t, s.url+"/v1/tables/events/query?from=2024-05-01T00:00:00Z&to=2024-05-03T00:00:00Z")
	seen := map[string]int{}
	for _, l := range lines(body) {
		seen[fmt.Sprint(l["n"])]++
	}
	if len(seen) != 2*runs || len(lines(body)) != 2*runs {
		t.Errorf("query after maintenance: %d rows (%d distinct), want %d:\n%s", len(lines(body)), len(seen), 2*runs, body)
	}
	_, metrics := get(t, s.url+"/metrics")
	for _, want := range []string{`sluice_coldtier_maintain_runs_total{table="events"} 1`, `sluice_coldtier_files_rewritten_total{table="events"} 20`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(metrics, "coldtier"))
		}
	}
	for _, c := range []struct {
		path string
		code int
	}{
		{"/v1/tables/loose/maintain", 400},
		{"/v1/tables/nope/maintain", 404},
	} {
		if code, res, _ := post(t, s.url+c.path, "application/json", nil); code != c.code {
			t.Errorf("POST %s: %d %v, want %d", c.path, code, res, c.code)
		}
	}
}

// TestIcebergMaintainScheduled: with maintain.interval the server runs the
// maintenance by itself.
func TestIcebergMaintainScheduled(t *testing.T) {
	wh := t.TempDir()
	cfg := strings.Replace(testConfig, "    on_bad_line: reject\n", "    on_bad_line: reject\n"+
		"    compact:\n      after: 1h\n      remove: true\n      iceberg:\n        warehouse: "+wh+"\n"+
		"        maintain:\n          interval: 50ms\n", 1)
	s := startServer(t, cfg, "")
	for r := range 3 {
		nd := fmt.Sprintf(`{"user":"ann","ts":"2024-05-01T10:00:%02dZ","n":%d}`+"\n", r, r)
		if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd)); code != 200 {
			t.Fatalf("ingest: %d %v", code, res)
		}
		if code, res, _ := post(t, s.url+"/v1/tables/events/compact", "application/json", nil); code != 200 {
			t.Fatalf("compact: %d %v", code, res)
		}
	}
	// The scheduler may run between the compactions too (so the count is
	// 2 to 4); the replaced files stay on disk for snapshot_age (1h).
	var metrics string
	for range 400 {
		_, metrics = get(t, s.url+"/metrics")
		if strings.Contains(metrics, `sluice_coldtier_files_rewritten_total{table="events"} `) &&
			!strings.Contains(metrics, `sluice_coldtier_files_rewritten_total{table="events"} 0`) {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("the scheduler did not rewrite the small files:\n%s", grep(metrics, "coldtier"))
}
