package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompactMaintain: two ingest + compact rounds leave two small files
// per day; `sluice compact --maintain` rewrites them into one per day and
// prints what it did; the query over both tiers is unchanged.
func TestCompactMaintain(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
storage: {dir: %q}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    compact:
      after: 24h
      remove: true
      iceberg: {warehouse: %q}
`, filepath.Join(dir, "data"), filepath.Join(dir, "warehouse"))), 0o644); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		var lines strings.Builder
		for i := range 20 {
			n := round*100 + i
			fmt.Fprintf(&lines, `{"user":"u%d","ts":"2024-05-0%dT10:00:00Z","n":%d}`+"\n", i%3, 1+i%2, n)
		}
		input := filepath.Join(dir, fmt.Sprintf("events%d.jsonl", round))
		if err := os.WriteFile(input, []byte(lines.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		runCmd(t, ingestCmd, "--config", cfg, "--table", "events", input)
		runCmd(t, compactCmd, "--config", cfg, "--table", "events")
	}
	before := runCmd(t, queryCmd, "--config", cfg, "--table", "events", "--columns", "n,user,ts")
	var res struct {
		FilesRewritten int `json:"files_rewritten"`
		FilesWritten   int `json:"files_written"`
		DataFiles      int `json:"data_files"`
	}
	out := runCmd(t, compactCmd, "--config", cfg, "--table", "events", "--maintain")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("compact --maintain output %q: %v", out, err)
	}
	if res.FilesRewritten != 4 || res.FilesWritten != 2 || res.DataFiles != 2 {
		t.Fatalf("compact --maintain: %s; want 4 files rewritten into 2", out)
	}
	if after := runCmd(t, queryCmd, "--config", cfg, "--table", "events", "--columns", "n,user,ts"); sortedLines(after) != sortedLines(before) {
		t.Errorf("query after maintenance:\n%s\nwant:\n%s", after, before)
	}
}
