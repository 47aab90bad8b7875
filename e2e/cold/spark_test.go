package cold

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// The documented Spark configuration is the one the test runs: it reads the
// blocks of spark-defaults.conf lines that follow these markers in
// docs/cold-tier.md and replaces the doc's example locations (the pairs
// given to docBlock in the test) with the test's; a placeholder the doc no longer has fails the
// test, so the doc and the test cannot drift apart.
const (
	sparkJDBCMarker = "<!-- spark-defaults: jdbc, read by e2e/cold/spark_test.go -->"
	sparkRESTMarker = "<!-- spark-defaults: rest, read by e2e/cold/spark_test.go -->"
)

// sparkTypes is how Spark names the Iceberg types sluice's types map to
// (Iceberg's Spark type mapping: long → bigint ("long" in a schema's JSON),
// timestamptz → timestamp, string → string).
var sparkTypes = map[table.Type]string{
	table.Int64: "long", table.Float64: "double", table.Bool: "boolean", table.String: "string",
	table.JSON: "string", table.Timestamp: "timestamp",
}

// sparkResult is one statement's output from the Spark server.
type sparkResult struct {
	Schema struct {
		Fields []struct {
			Name string `json:"name"`
			Type any    `json:"type"` // a name, or an object for struct and map types
		} `json:"fields"`
	} `json:"schema"`
	Rows []map[string]any `json:"rows"`
}

func parseSpark(t *testing.T, out []byte, want int) []sparkResult {
	t.Helper()
	var res []sparkResult
	for _, line := range strings.Split(string(out), "\n") {
		js, ok := strings.CutPrefix(line, "SPARKQ ")
		if !ok {
			continue
		}
		d := json.NewDecoder(strings.NewReader(js))
		d.UseNumber()
		var r sparkResult
		if err := d.Decode(&r); err != nil {
			t.Fatalf("Spark output %.300q: %v", js, err)
		}
		res = append(res, r)
	}
	if len(res) != want {
		t.Fatalf("%d Spark results, want %d: %.2000s", len(res), want, out)
	}
	return res
}

// sparkStatements are what Spark runs against one lake: every row (the
// event time also as unix microseconds, exact), the partitions metadata
// table (day partitioning), the snapshots with their summaries.
func (l *lake) statements() []string {
	micros := ""
	for _, c := range l.cols {
		if c.Type == table.Timestamp {
			micros += fmt.Sprintf(", unix_micros(%s) AS %s__micros", c.Name, c.Name)
		}
	}
	return []string{
		"SELECT *" + micros + " FROM " + l.ident + " ORDER BY n",
		"SELECT CAST(partition.ts_day AS STRING) AS day, record_count, file_count FROM " + l.ident + ".partitions ORDER BY day",
		"SELECT snapshot_id, summary FROM " + l.ident + ".snapshots ORDER BY committed_at, snapshot_id",
	}
}

// sparkView is Spark's results for l as an engineView.
func sparkView(res []sparkResult) engineView {
	v := engineView{engine: "Spark", types: map[string]any{}, rows: res[0].Rows, partitions: res[1].Rows, snapshots: res[2].Rows}
	for _, f := range res[0].Schema.Fields {
		if !strings.HasSuffix(f.Name, "__micros") {
			v.types[f.Name] = f.Type
		}
	}
	return v
}

// TestSparkReadsIcebergTable compacts rows of every type, in two runs (the
// second widens the schema), into two Iceberg tables on the S3 server, one
// registered in the SQLite catalog and one in Iceberg's REST catalog
// server, then starts one Apache Spark 3.5 JVM with Iceberg's SparkCatalog
// configured as docs/cold-tier.md says (JdbcCatalog on the same SQLite
// file; the REST catalog; S3FileIO) and checks that Spark returns every
// row, value and type sluice's own query returns, the day partitions, and
// the sluice.* snapshot properties, for both.
func TestSparkReadsIcebergTable(t *testing.T) {
	coldtest.Require(t, s3Err)
	spark := sharedSpark.Require(t)
	dir := t.TempDir()

	jdbcDir := filepath.Join(dir, "jdbc")
	jdbc := compactLake(t, jdbcDir, coldtier.Config{
		Warehouse: "s3://" + coldtest.Bucket + "/spark-jdbc",
		S3:        coldtier.S3{Endpoint: s3.Endpoint, Region: coldtest.Region, PathStyle: true},
		Catalog:   coldtier.Catalog{URI: filepath.Join(jdbcDir, "iceberg-catalog.db")},
		Node:      "spark-node",
		StateDir:  jdbcDir,
	})
	jdbc.catalog, jdbc.ident = "sluice", "sluice.sluice.events"
	conf := docBlock(t, sparkJDBCMarker, [][2]string{
		{"/var/lib/sluice/iceberg-catalog.db", jdbc.cfg.Catalog.URI},
		{"s3://lake/sluice", jdbc.cfg.Warehouse},
		{"http://127.0.0.1:7070", s3.Endpoint},
		{"us-east-1", coldtest.Region},
	})
	lakes := []*lake{jdbc}

	// The same through Iceberg's REST catalog server, its warehouse on the
	// same S3 server (it writes the metadata files of the commits sluice
	// sends it); in the same Spark session as a second catalog.
	restDir := filepath.Join(dir, "rest")
	if err := os.MkdirAll(restDir, 0o755); err != nil {
		t.Fatal(err)
	}
	restLake, restURI := compactRESTLake(t, restDir, "s3://"+coldtest.Bucket+"/spark-rest", "spark-rest-node")
	// A second catalog in the one session needs a name of its own.
	restLake.catalog, restLake.ident = "sluice_rest", "sluice_rest.sluice.events"
	conf += "\n" + docBlock(t, sparkRESTMarker, [][2]string{
		{"spark.sql.catalog.sluice", "spark.sql.catalog.sluice_rest"},
		{"http://catalog:8181", restURI},
		{"http://127.0.0.1:7070", s3.Endpoint},
		{"us-east-1", coldtest.Region},
	})
	lakes = append(lakes, restLake)

	confPath := filepath.Join(dir, "spark-defaults.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, l := range lakes {
		stmts = append(stmts, l.statements()...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	out, err := spark.Run(ctx, confPath, stmts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Spark (the package's server, %d statements) took %v", len(stmts), time.Since(started).Round(time.Millisecond))
	res := parseSpark(t, out, len(stmts))
	for _, l := range lakes {
		n := len(l.statements())
		l.check(t, sparkView(res[:n]), sparkTypes)
		res = res[n:]
	}
}
