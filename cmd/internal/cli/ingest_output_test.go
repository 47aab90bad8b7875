package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/freeport"
)

// TestFailedIngestOrQueryPrintsOnlyTheError: when a source cannot be ingested
// (no server there, an unknown table, a malformed line), `sluice ingest`
// prints no result line on stdout, only the error on stderr, and exits
// non-zero; when batches were stored before the failure, the error says how
// many rows. `sluice query` likewise.
func TestFailedIngestOrQueryPrintsOnlyTheError(t *testing.T) {
	events, err := filepath.Abs("../../../examples/server/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := filepath.Abs("../../../examples/server/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rdbFile, err := filepath.Abs("../../../rdb/testdata/redis/redis-7.0.15.rdb")
	if err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Port() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := startTestServer(t, string(yaml))
	// Two good lines, then one that is not JSON: with --batch 2 the first
	// batch is stored before the bad line rejects the second.
	partial := filepath.Join(t.TempDir(), "partial.jsonl")
	lines := `{"time":"2024-05-01T10:00:00Z","user":"ann","action":"buy","amount":1}` + "\n" +
		`{"time":"2024-05-01T10:00:01Z","user":"bob","action":"buy","amount":2}` + "\n" +
		"not json\n"
	if err := os.WriteFile(partial, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // in stderr
	}{
		{"no server", []string{"--server", "http://127.0.0.1:" + strconv.Itoa(port), "--table", "events", events}, []string{"connection refused"}},
		{"unknown table through a server", []string{"--server", url, "--table", "nosuch", events}, []string{"nosuch"}},
		{"unknown table in a store", []string{"--config", cfg, "--data", t.TempDir(), "--table", "nosuch", events}, []string{"unknown table", "nosuch"}},
		{"bad line after a stored batch", []string{"--server", url, "--table", "events", "--batch", "2", partial}, []string{"line 3", "2 rows were accepted and stored before the error"}},
		{"rdb: no server", []string{"--server", "http://127.0.0.1:" + strconv.Itoa(port), "--table", "keys", "--format", "rdb", rdbFile}, []string{"connection refused"}},
		{"rdb: unknown table in a store", []string{"--config", cfg, "--data", t.TempDir(), "--table", "nosuch", "--format", "rdb", rdbFile}, []string{"unknown table", "nosuch"}},
		{"query: no server", []string{"query", "--server", "http://127.0.0.1:" + strconv.Itoa(port), "--table", "events"}, []string{"connection refused"}},
		{"query: unknown table through a server", []string{"query", "--server", url, "--table", "nosuch"}, []string{"nosuch"}},
		{"query: unknown table in a store", []string{"query", "--config", cfg, "--data", t.TempDir(), "--table", "nosuch"}, []string{"unknown table", "nosuch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args[0] != "query" {
				args = append([]string{"ingest"}, args...)
			}
			stdout, stderr, code := runCLI(t, args...)
			if code == 0 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want a non-zero exit and nothing on stdout", code, stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not say %q", stderr, w)
				}
			}
		})
	}
}
