package server

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCompactionScheduler: with compact.interval set, the scheduler writes
// old data to Parquet under compact.dir/table/year=/month=/day=/, counts the
// runs and rows in /metrics, and (remove: true) the hot store no longer
// returns the compacted rows.
func TestCompactionScheduler(t *testing.T) {
	out := t.TempDir()
	cfg := strings.Replace(testConfig, "    on_bad_line: reject\n", "    on_bad_line: reject\n    compact: {interval: 50ms, after: 1h, remove: true, dir: "+out+"}\n", 1)
	s := startServer(t, cfg, "")
	nd := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}
{"user":"bob","ts":"2024-05-02T11:00:00Z","n":2}
`
	if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd)); code != 200 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	var files []string
	for i := 0; i < 400 && len(files) < 2; i++ {
		time.Sleep(25 * time.Millisecond)
		files = files[:0]
		filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".parquet") {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(files) != 2 {
		t.Fatalf("parquet files: %v", files)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(out, f)
		if !strings.HasPrefix(rel, filepath.Join("events", "year=2024", "month=05")) {
			t.Errorf("file %s not partitioned by date", rel)
		}
	}
	// The files are renamed into place before Compact returns and the
	// counters move: poll.
	var body string
	for i := 0; i < 400; i++ {
		_, body = get(t, s.url+"/metrics")
		if strings.Contains(body, `sluice_compaction_rows_total{table="events"} 2`) && strings.Contains(body, `sluice_compaction_lag_seconds{table="events"}`) {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !strings.Contains(body, `sluice_compaction_rows_total{table="events"} 2`) || !strings.Contains(body, `sluice_compaction_lag_seconds{table="events"}`) {
		t.Errorf("compaction metrics:\n%s", grep(body, "compaction"))
	}
	if _, body := get(t, s.url+"/v1/tables/events/query"); len(lines(body)) != 0 {
		t.Errorf("compacted rows still in the hot store: %s", body)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
