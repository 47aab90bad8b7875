package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func runCmd(t *testing.T, newCmd func() *cobra.Command, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := newCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%s %s: %v", cmd.Name(), strings.Join(args, " "), err)
	}
	return out.String()
}

// TestCompactToIcebergThenQuery: `sluice compact --table T` on a table
// whose compact section names an Iceberg table in a local warehouse moves
// the old rows there (removing them from the store), and `sluice query`
// still returns every row, from both tiers.
func TestCompactToIcebergThenQuery(t *testing.T) {
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
	var lines strings.Builder
	for i := range 50 {
		fmt.Fprintf(&lines, `{"user":"u%d","ts":"2024-05-0%dT10:00:00Z","n":%d}`+"\n", i%3, 1+i%4, i)
	}
	input := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(input, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runCmd(t, ingestCmd, "--config", cfg, "--table", "events", input)
	before := runCmd(t, queryCmd, "--config", cfg, "--table", "events", "--columns", "n,user,ts")

	var res struct {
		Rows  int64 `json:"rows"`
		Files int64 `json:"files"`
	}
	out := runCmd(t, compactCmd, "--config", cfg, "--table", "events")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("compact output %q: %v", out, err)
	}
	if res.Rows != 50 || res.Files != 4 {
		t.Fatalf("compact: %+v, want 50 rows in 4 day files", res)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "warehouse", "sluice", "events", "data", "*", "*.parquet"))
	if len(files) != 4 {
		t.Errorf("%d Parquet files in the warehouse, want 4", len(files))
	}
	after := runCmd(t, queryCmd, "--config", cfg, "--table", "events", "--columns", "n,user,ts")
	if sortedLines(after) != sortedLines(before) {
		t.Errorf("query after compaction:\n%s\nwant:\n%s", after, before)
	}
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
