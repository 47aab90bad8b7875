package cli

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/testregistry"
)

// TestIngestFramedFileStraightIntoStore: `sluice ingest --format
// avro-framed` of a file of framed Avro messages (written here in Avro's
// binary encoding, their schema in a registry) into a store: each message
// is a row; with --server the format is refused (the registry is the
// server's).
func TestIngestFramedFileStraightIntoStore(t *testing.T) {
	reg, err := testregistry.Start(testregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	id := reg.Register("events-value", testregistry.Schema{Schema: `{"type":"record","name":"E","fields":[{"name":"n","type":"long"},{"name":"ts","type":"string"}]}`})
	var file []byte
	for n := range 3 {
		msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
		msg = binary.AppendVarint(msg, int64(n))
		ts := fmt.Sprintf("2026-03-01T10:00:0%dZ", n)
		msg = binary.AppendVarint(msg, int64(len(ts)))
		msg = append(msg, ts...)
		file = binary.BigEndian.AppendUint32(file, uint32(len(msg)))
		file = append(file, msg...)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "events.framed")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("tables:\n  - name: events\n    sortBy: ts\n    schema_registry: {urls: [%s]}\n", reg.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	out := runServeCLI(t, "ingest", "--config", cfg, "--data", data, "--table", "events", "--format", "avro-framed", "--batch", "2", path)
	if rep := ingestReport(t, out); rep["accepted"] != 3.0 {
		t.Fatalf("report %v: want 3 rows", rep)
	}
	out = runServeCLI(t, "query", "--config", cfg, "--data", data, "--table", "events")
	for n := range 3 {
		if !strings.Contains(out, fmt.Sprintf(`"n":%d`, n)) {
			t.Errorf("row n=%d missing: %s", n, out)
		}
	}
	cmd := ingestCmd()
	cmd.SetArgs([]string{"--server", "127.0.0.1:1", "--table", "events", "--format", "avro-framed", path})
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "not with --server") {
		t.Errorf("--server with a framed file: %v, want refused", err)
	}
}
