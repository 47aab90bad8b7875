package coldtier_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/table"
)

// TestRESTCatalog compacts through an Iceberg REST catalog (Apache
// Iceberg's own REST catalog server, a Java process) into a local
// warehouse, in two runs, and reads the rows back over both tiers; a
// restart (a new Compactor) sees the committed watermark.
func TestRESTCatalog(t *testing.T) {
	dir := t.TempDir()
	rest, err := coldtest.StartREST(dir)
	coldtest.Require(t, err)
	defer rest.Stop()
	cfg := coldtier.Config{
		Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "rest",
		Catalog: coldtier.Catalog{Type: "rest", URI: rest.URI},
	}
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	fill(t, tb, 0, 1200, 4)
	ctx := context.Background()
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	want := tieredRows(t, c, table.Query{})
	for _, wm := range []time.Time{day0.Add(48 * time.Hour), day0.Add(96 * time.Hour)} {
		if _, err := c.Compact(ctx, wm, coldtier.Options{Remove: true}); err != nil {
			log, _ := os.ReadFile(rest.Log)
			t.Fatalf("%v\nREST catalog log (last 3000 bytes): %s", err, log[max(0, len(log)-3000):])
		}
	}
	c.Close()
	c, err = coldtier.Open(ctx, cfg, tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if left := normRows(t, tb, table.Query{}); len(left) != 0 {
		t.Fatalf("%d rows left in the store", len(left))
	}
	if got := tieredRows(t, c, table.Query{}); !reflect.DeepEqual(got, want) {
		t.Errorf("%d rows through the REST catalog, want %d", len(got), len(want))
	}
	files, err := c.DataFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("%d data files, want one per day (4)", len(files))
	}
}
