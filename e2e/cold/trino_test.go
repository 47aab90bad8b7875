package cold

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// The Trino catalog file of docs/cold-tier.md, run as it is documented
// (placeholders replaced, like the Spark blocks).
const trinoRESTMarker = "<!-- trino-catalog: rest, read by e2e/cold/trino_test.go -->"

// trinoTypes is how Trino names the Iceberg types sluice's types map to.
var trinoTypes = map[table.Type]string{
	table.Int64: "bigint", table.Float64: "double", table.Bool: "boolean", table.String: "varchar",
	table.JSON: "varchar", table.Timestamp: "timestamp(6) with time zone",
}

// TestTrinoReadsIcebergTable compacts the same rows as the Spark test (two
// runs, the second widening the schema) into an Iceberg table on the S3
// server registered in Iceberg's REST catalog server, adds the catalog
// file docs/cold-tier.md shows (Trino's Iceberg connector) to the
// package's Trino and checks every row, value and type against sluice's query, the
// day partitions ($partitions) and the sluice.* snapshot properties
// ($snapshots).
func TestTrinoReadsIcebergTable(t *testing.T) {
	coldtest.Require(t, s3Err)
	coldtest.Require(t, coldtest.FindTrino())
	dir := t.TempDir()
	tl, restURI := compactRESTLake(t, dir, "s3://"+coldtest.Bucket+"/trino-rest", "trino-node")
	tl.catalog, tl.ident = "iceberg", "iceberg.sluice.events"
	props := docBlock(t, trinoRESTMarker, [][2]string{
		{"http://catalog:8181", restURI},
		{"http://127.0.0.1:7070", s3.Endpoint},
		{"us-east-1", coldtest.Region},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The package's Trino, with the documented file as its catalog.
	tr := sharedTrino.Require(t)
	tr.AddCatalog(ctx, t, "iceberg", props)

	query := func(sql string) ([]coldtest.TrinoColumn, []map[string]any) {
		t.Helper()
		cols, rows, err := tr.Query(ctx, sql)
		if err != nil {
			log, _ := os.ReadFile(tr.Log)
			t.Fatalf("%v\nTrino log (end): %s", err, log[max(0, len(log)-3000):])
		}
		var out []map[string]any
		for _, r := range rows {
			m := map[string]any{}
			for i, c := range cols {
				m[c.Name] = r[i]
			}
			out = append(out, m)
		}
		return cols, out
	}
	queried := time.Now()
	cols, rows := query("SELECT * FROM " + tl.ident + " ORDER BY n")
	v := engineView{engine: "Trino", types: map[string]any{}, rows: rows}
	for _, c := range cols {
		v.types[c.Name] = c.Type
	}
	// Timestamps come as text: date, time with its fraction, zone.
	for _, r := range v.rows {
		for _, c := range tl.cols {
			if c.Type != table.Timestamp {
				continue
			}
			r[c.Name+"__micros"] = nil
			if s, ok := r[c.Name].(string); ok {
				ts, err := time.Parse("2006-01-02 15:04:05 MST", s)
				if err != nil || !strings.HasSuffix(s, " UTC") {
					t.Fatalf("Trino timestamp %q: %v", s, err)
				}
				r[c.Name+"__micros"] = ts
			}
		}
	}
	_, v.partitions = query(`SELECT CAST(partition.ts_day AS varchar) AS day, record_count FROM iceberg.sluice."events$partitions" ORDER BY 1`)
	_, v.snapshots = query(`SELECT CAST(snapshot_id AS varchar) AS snapshot_id, summary FROM iceberg.sluice."events$snapshots" ORDER BY committed_at, snapshot_id`)
	t.Logf("Trino answered 3 queries in %v", time.Since(queried).Round(time.Millisecond))
	tl.check(t, v, trinoTypes)

}
