package coldtier

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/table"
)

// TestRowReaderHoldsTwoBatches streams one day of 60000 rows in batches of
// 1000 into iceberg-go's clustered WriteRecords, as a run does (a local warehouse): every row arrives, at
// most two batches are alive at any time (the one being written and the one
// being built) although iceberg-go's Append would queue up to 64, and no wait for a
// release timed out (which would mean a batch's buffers were never freed).
func TestRowReaderHoldsTwoBatches(t *testing.T) {
	dir := t.TempDir()
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cols := []table.Column{{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp},
		{Name: "n", Type: table.Int64}, {Name: "note", Type: table.String}}
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	const total = 60000
	rows := make([]table.Row, 0, total)
	for i := range total {
		rows = append(rows, table.Row{"user": "u" + strconv.Itoa(i%13), "ts": day.Add(time.Duration(i) * time.Second),
			"n": int64(i), "note": "note " + strconv.Itoa(i*7919)})
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "test"}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	cat, err := openCatalog(ctx, &cfg, &Counters{})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := newSchema(tb.Schema())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := loadOrCreate(ctx, cat, &cfg, "events", schema, "ts", "user")
	if err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { releaseWait = d }(releaseWait)
	releaseWait = 10 * time.Second
	rdr := newRowReader(ctx, tb, tb.Schema(), day, day.Add(24*time.Hour), rowSel{}, 1000, 2, true)
	defer rdr.Release()
	for _, err := range itable.WriteRecords(ctx, tbl, rdr.Schema(), handOver(rdr), itable.WithClusteredWrite()) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := rdr.rows.Load(); n != total {
		t.Fatalf("%d rows read, want %d", n, total)
	}
	if held := rdr.maxHeld.Load(); held > 2 {
		t.Errorf("%d batches alive at once, want at most 2", held)
	}
	if s := rdr.stalls.Load(); s != 0 {
		t.Errorf("%d waits for a batch's release timed out", s)
	}
	t.Logf("at most %d batches alive", rdr.maxHeld.Load())
}
