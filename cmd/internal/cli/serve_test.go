package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runServeCLI runs a fresh instance of the command args[0] (flags do not carry
// over between runs as they would on the shared rootCmd) and returns its
// stdout.
func runServeCLI(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := map[string]func() *cobra.Command{"ingest": ingestCmd, "query": queryCmd}[args[0]]()
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args[1:])
	if err := cmd.Execute(); err != nil {
		t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

// TestIngestThenQueryExample is the README's "ingest a file and query it
// back" on the bundled example config, straight into a store directory.
func TestIngestThenQueryExample(t *testing.T) {
	data := t.TempDir()
	cfg := "../../../examples/server/sluice.yaml"
	out := runServeCLI(t, "ingest", "--config", cfg, "--data", data, "--table", "events", "../../../examples/server/events.jsonl", "../../../examples/server/events.csv")
	if !strings.Contains(out, `events.jsonl: {"accepted":5,"filtered":1,"failed":0}`) || !strings.Contains(out, `events.csv: {"accepted":2,`) {
		t.Fatalf("ingest output:\n%s", out)
	}
	out = runServeCLI(t, "query", "--config", cfg, "--data", data, "--table", "events", "--hash", "ann", "--from", "2024-05-01T00:00:00Z", "--to", "2024-05-02T00:00:00Z", "--columns", "time,action,amount_cents")
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != 2 || got[0]["amount_cents"] != 1250.0 || got[1]["amount_cents"] != nil || got[0]["action"] != "buy" {
		t.Fatalf("query output:\n%s", out)
	}
	out = runServeCLI(t, "query", "--config", cfg, "--data", data, "--table", "events", "--format", "csv", "--columns", "user,amount_cents", "--where", "amount_cents>=2000")
	if !sameSet(out, "user,amount_cents\ncid,9999\nbob,2000\n") {
		t.Fatalf("csv query:\n%s", out)
	}
}

func sameSet(a, b string) bool {
	la, lb := strings.Split(strings.TrimSpace(a), "\n"), strings.Split(strings.TrimSpace(b), "\n")
	if len(la) != len(lb) || la[0] != lb[0] {
		return false
	}
	m := map[string]bool{}
	for _, l := range la {
		m[l] = true
	}
	for _, l := range lb {
		if !m[l] {
			return false
		}
	}
	return true
}

// TestValidateServerConfig: `sluice validate` takes a server config too, and
// reports every broken column of every table at once.
func TestValidateServerConfig(t *testing.T) {
	var out bytes.Buffer
	cmd := validateCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--config", "../../../examples/server/sluice.yaml"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("validate of the bundled server config: %v", err)
	}
	if !strings.Contains(out.String(), "ok: 1 tables") {
		t.Fatalf("validate output: %q", out.String())
	}

	bad := t.TempDir() + "/bad.yaml"
	const cfg = `tables:
  - name: x
    computed:
      - name: first
        type: int64
        func: "function main(r) return 1"
      - name: second
        type: int64
        func: "function main(r) return end end"
`
	if err := os.WriteFile(bad, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = validateCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--config", bad})
	err := cmd.Execute()
	if err == nil {
		t.Fatal("validate accepted a config with two broken scripts")
	}
	for _, want := range []string{`column "first"`, `column "second"`, "syntax error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validate error does not mention %s: %v", want, err)
		}
	}
}
