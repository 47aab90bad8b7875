package coldtier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icat "github.com/apache/iceberg-go/catalog"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/catalog"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// TestPositionDeletesEngines is the measure behind the choice of delete
// format (docs/upserts-iceberg.md): in one REST catalog on the S3 server,
// table events is written by sluice's runs, the second deleting 200 of the
// first's 2000 rows by v2 position delete files in its commit (100 rows
// added); table merged the same, then rewritten by maintenance (the
// deleted rows left out, the delete files dropped); and table dv is a format-version 3 table whose 100 of 1000 rows
// are deleted by iceberg-go's merge-on-read delete (a deletion vector).
// pyiceberg, DuckDB's iceberg_scan, Spark 3.5 (Iceberg 1.10) and Trino
// each count them. The v2 tables must read right in every engine; what
// the v3 table gives is logged (the engines that need v3 for it).
func TestPositionDeletesEngines(t *testing.T) {
	if raceEnabled {
		// Four engines' processes (a REST catalog, Spark and Trino JVMs)
		// check a file format, not a race, and would sit on the race
		// phase's longest package.
		t.Skip("scripts/test runs this test without -race, beside the memory bounds")
	}
	coldtest.Require(t, s3Err)
	coldtest.Require(t, pyErr)
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir,
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO", "CATALOG_S3_ENDPOINT="+s3.Endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true", "CATALOG_CLIENT_REGION="+coldtest.Region)
	coldtest.Require(t, err)
	defer rest.Stop()
	cfg := coldtier.Config{
		Warehouse: "s3://" + coldtest.Bucket + "/posdel-engines",
		S3:        coldtier.S3{Endpoint: s3.Endpoint, Region: coldtest.Region, PathStyle: true},
		Catalog:   coldtier.Catalog{Type: "rest", URI: rest.URI},
		Node:      "posdel-node",
		StateDir:  dir,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	// v2: sluice's runs, the second with position deletes, into events and
	// into merged, which maintenance then rewrites (the deleted rows left
	// out, the delete files dropped).
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	tbMerged, err := st.Table(table.Config{Name: "merged", HashBy: "user", SortBy: "ts", Columns: staticSchema})
	if err != nil {
		t.Fatal(err)
	}
	var compactors []*coldtier.Compactor
	for _, tbl := range []*table.Table{tb, tbMerged} {
		fill(t, tbl, 0, 2000, 3)
		c, err := coldtier.Open(ctx, cfg, tbl)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		opts := coldtier.Options{Remove: true, Continuous: true}
		if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
			t.Fatal(err)
		}
		fill(t, tbl, 5000, 100, 3)
		coldtier.SetRunDeletes(c, deleteWhere(deletedN))
		if _, err := c.Compact(ctx, day0.Add(72*time.Hour), opts); err != nil {
			t.Fatal(err)
		}
		compactors = append(compactors, c)
	}
	if _, err := compactors[1].Maintain(ctx, coldtier.MaintainOptions{NoExpire: true}); err != nil {
		t.Fatal(err)
	}
	if _, deletes, err := coldtier.FileCounts(ctx, compactors[1]); err != nil || deletes != 0 {
		t.Fatalf("merged keeps %d delete files after maintenance (%v), want none", deletes, err)
	}
	var added []int64
	for n := range int64(100) {
		added = append(added, 5000+n)
	}
	want := map[string][]int64{"events": wantAfterDeletes(2000, added), "merged": wantAfterDeletes(2000, added), "dv": wantAfterDeletes(1000, nil)}
	tables := []string{"events", "merged", "dv"}

	// v3: a deletion vector written by iceberg-go.
	writeDVTable(ctx, t, cfg)

	type verdict struct{ engine, table, got string }
	var verdicts []verdict
	judge := func(engine, tbl string, ns []int64, readErr error) {
		t.Helper()
		v := verdict{engine: engine, table: tbl}
		switch {
		case readErr != nil:
			v.got = "error: " + readErr.Error()
		case fmt.Sprint(ns) == fmt.Sprint(want[tbl]):
			v.got = fmt.Sprintf("right (%d rows)", len(ns))
		default:
			v.got = fmt.Sprintf("WRONG: %d rows, want %d", len(ns), len(want[tbl]))
		}
		verdicts = append(verdicts, v)
		if tbl != "dv" && !strings.HasPrefix(v.got, "right") {
			t.Errorf("%s reads the v2 table %s: %s", engine, tbl, v.got)
		}
	}
	defer func() {
		for _, v := range verdicts {
			t.Logf("%-20s %-7s %s", v.engine, v.table, v.got)
		}
	}()

	// pyiceberg and DuckDB.
	script, err := os.ReadFile("testdata/deletes_readers.py")
	if err != nil {
		t.Fatal(err)
	}
	pyCtx, pyCancel := context.WithTimeout(ctx, 3*time.Minute)
	out, err := coldtest.RunPython(pyCtx, python, string(script), rest.URI, s3.Endpoint, coldtest.AccessKey, coldtest.SecretKey,
		"sluice.events", "sluice.merged", "sluice.dv")
	pyCancel()
	if err != nil {
		t.Fatal(err)
	}
	var py map[string]map[string]json.RawMessage
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatalf("deletes_readers.py: %v: %.500s", err, out)
	}
	for _, tbl := range tables {
		for _, engine := range []string{"pyiceberg", "duckdb"} {
			raw := py["sluice."+tbl][engine]
			if string(raw) == "null" {
				t.Logf("DuckDB iceberg_scan not run: the duckdb-extension wheels are missing")
				continue
			}
			var ns []int64
			if err := json.Unmarshal(raw, &ns); err != nil {
				judge(engine, tbl, nil, fmt.Errorf("%s", raw))
				continue
			}
			judge(engine, tbl, ns, nil)
		}
	}

	t.Run("spark", func(t *testing.T) {
		spark := sharedSpark.Require(t)
		conf := strings.Join([]string{
			"spark.sql.extensions org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
			"spark.sql.catalog.sluice org.apache.iceberg.spark.SparkCatalog",
			"spark.sql.catalog.sluice.type rest",
			"spark.sql.catalog.sluice.uri " + rest.URI,
			"spark.sql.catalog.sluice.io-impl org.apache.iceberg.aws.s3.S3FileIO",
			"spark.sql.catalog.sluice.s3.endpoint " + s3.Endpoint,
			"spark.sql.catalog.sluice.s3.path-style-access true",
			"spark.sql.catalog.sluice.client.region " + coldtest.Region,
		}, "\n")
		confPath := filepath.Join(dir, "spark-defaults.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithTimeout(ctx, 6*time.Minute)
		defer scancel()
		for _, tbl := range tables {
			// One statement a request: a table Spark cannot read fails
			// its request alone.
			out, err := spark.Run(sctx, confPath, "SELECT n FROM sluice.sluice."+tbl+" ORDER BY n")
			if err != nil {
				judge("spark", tbl, nil, firstLine(err))
				continue
			}
			ns, err := sparkNs(out)
			judge("spark", tbl, ns, err)
		}
	})

	t.Run("trino", func(t *testing.T) {
		props := strings.Join([]string{
			"connector.name=iceberg", "iceberg.catalog.type=rest", "iceberg.rest-catalog.uri=" + rest.URI,
			"fs.native-s3.enabled=true", "s3.endpoint=" + s3.Endpoint, "s3.path-style-access=true", "s3.region=" + coldtest.Region,
		}, "\n")
		trino := sharedTrino.Require(t)
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
		defer tcancel()
		trino.AddCatalog(tctx, t, "deletes", props)
		for _, tbl := range tables {
			_, rows, err := trino.Query(tctx, "SELECT n FROM deletes.sluice."+tbl+" ORDER BY n")
			if err != nil {
				judge("trino", tbl, nil, firstLine(err))
				continue
			}
			ns := make([]int64, 0, len(rows))
			for _, r := range rows {
				n, err := r[0].(json.Number).Int64()
				if err != nil {
					t.Fatalf("Trino n %v: %v", r[0], err)
				}
				ns = append(ns, n)
			}
			judge("trino", tbl, ns, nil)
		}
	})
}

func firstLine(err error) error {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return fmt.Errorf("%.300s", s)
}

// sparkNs is column n of the one result the Spark server answered.
func sparkNs(out []byte) ([]int64, error) {
	for _, line := range strings.Split(string(out), "\n") {
		js, ok := strings.CutPrefix(line, "SPARKQ ")
		if !ok {
			continue
		}
		var res struct {
			Rows []struct {
				N int64 `json:"n"`
			} `json:"rows"`
		}
		if err := json.Unmarshal([]byte(js), &res); err != nil {
			return nil, err
		}
		ns := make([]int64, len(res.Rows))
		for i, r := range res.Rows {
			ns[i] = r.N
		}
		return ns, nil
	}
	return nil, fmt.Errorf("no result in Spark's output: %.300s", out)
}

// writeDVTable creates sluice.dv, a format-version 3 table of column n
// (0..999), and deletes the rows deletedN picks by iceberg-go's
// merge-on-read delete, which writes a deletion vector on v3.
func writeDVTable(ctx context.Context, t *testing.T, cfg coldtier.Config) {
	t.Helper()
	cat, err := catalog.Open(ctx, catalog.Location{Warehouse: cfg.Warehouse, S3: cfg.S3, Catalog: cfg.Catalog}, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "n", Type: iceberg.PrimitiveTypes.Int64, Required: false})
	tbl, err := cat.CreateTable(ctx, itable.Identifier{"sluice", "dv"}, schema,
		icat.WithLocation(cfg.Warehouse+"/sluice/dv"),
		icat.WithProperties(iceberg.Properties{"format-version": "3", itable.WriteDeleteModeKey: itable.WriteModeMergeOnRead}))
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	var gone []int64
	for n := range int64(1000) {
		b.Append(n)
		if deletedN(n) {
			gone = append(gone, n)
		}
	}
	col := b.NewArray()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, 1000)
	at := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer at.Release()
	tx := tbl.NewTransaction()
	if err := tx.AppendTable(ctx, at, 1000, nil); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	lits := make([]int64, len(gone))
	copy(lits, gone)
	tx = tbl.NewTransaction()
	if err := tx.Delete(ctx, iceberg.IsIn(iceberg.Reference("n"), lits...), nil); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("v3 table: snapshot summary %v", tbl.CurrentSnapshot().Summary)
}
