package coldtier_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testenv"
)

// duckDBDocMarker is the Python block of docs/cold-tier.md ("Reading the
// table from other engines") that TestDocDuckDBIcebergScan runs as a user
// would paste it, so the documented way to read the table from DuckDB
// cannot drift from what DuckDB accepts.
const duckDBDocMarker = "<!-- python: duckdb-iceberg-scan, run by coldtier/duckdb_doc_test.go -->"

// TestDocDuckDBIcebergScan compacts rows into an Iceberg table on S3
// (versitygw, the SQLite catalog) and runs the docs' DuckDB snippet on it,
// its placeholders replaced by this test's catalog, endpoint and keys: the
// count it prints must be every row.
func TestDocDuckDBIcebergScan(t *testing.T) {
	coldtest.Require(t, pyErr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	probe := "import duckdb_extension_iceberg, duckdb_extension_avro, duckdb_extension_httpfs"
	if out, err := coldtest.RunPython(ctx, python, probe); err != nil {
		testenv.Missing(t, "the duckdb-extension-* wheels in the readers' venv (scripts/install-iceberg-readers): %v %s", err, out)
	}

	doc, err := os.ReadFile("../docs/cold-tier.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte(duckDBDocMarker))
	_, after, ok2 := bytes.Cut(after, []byte("```python\n"))
	script, _, ok3 := bytes.Cut(after, []byte("\n```"))
	if !ok || !ok2 || !ok3 {
		t.Fatalf("docs/cold-tier.md: no python block after %q", duckDBDocMarker)
	}

	dir := t.TempDir()
	cfg := testConfig(t, dir, "docduckdb")
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const rows, days = 1000, 2
	fill(t, tb, 0, rows, days)
	if _, err := c.Compact(ctx, day0.Add(days*24*time.Hour), coldtier.Options{Remove: true}); err != nil {
		t.Fatal(err)
	}

	snippet := string(script)
	host := strings.TrimPrefix(s3.Endpoint, "http://")
	for _, r := range [][2]string{
		{"/var/lib/sluice/iceberg-catalog.db", cfg.Catalog.URI},
		{"http://127.0.0.1:7070", s3.Endpoint},
		{"127.0.0.1:7070", host},
		{"ACCESS_KEY", coldtest.AccessKey},
		{"SECRET_KEY", coldtest.SecretKey},
	} {
		if !strings.Contains(snippet, r[0]) {
			t.Fatalf("the docs' snippet no longer has the placeholder %q; update the test", r[0])
		}
		snippet = strings.ReplaceAll(snippet, r[0], r[1])
	}
	out, err := coldtest.RunPython(ctx, python, snippet)
	if err != nil {
		t.Fatalf("the docs' DuckDB snippet: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "[(1000,)]"; got != want {
		t.Errorf("the docs' DuckDB snippet printed %s, want %s", got, want)
	}
}
