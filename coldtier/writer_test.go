package coldtier_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/sluicedb/sluice/coldtier"
)

// TestWriterSettings: the Parquet files a run writes have row groups of at
// most RowGroupRows rows, also when RowGroupRows changed after the Iceberg
// table was created (the table's writer properties follow the config), and
// no page (data or dictionary) is larger than zstd's 128 KiB block, above
// which arrow-go's pooled zstd encoders each allocate a 16 MiB history
// (docs/cold-tier.md, "Measured"). With iceberg-go's defaults (1 MiB pages
// of up to 20000 rows, 2 MiB dictionaries) the 20000 distinct int64 of a
// day make a 160 KB dictionary page.
func TestWriterSettings(t *testing.T) {
	dir := t.TempDir()
	cfg := coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "local"}
	st, tb := openTable(t, dir, staticSchema)
	defer st.Close()
	ctx := context.Background()
	compact := func(cfg coldtier.Config, wm time.Time) []string {
		t.Helper()
		c, err := coldtier.Open(ctx, cfg, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Compact(ctx, wm, coldtier.Options{Remove: true}); err != nil {
			t.Fatal(err)
		}
		files, err := c.DataFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	fill(t, tb, 0, 20000, 1)
	first := compact(cfg, day0.Add(24*time.Hour))
	checkParquet(t, first, 1<<17) // the default

	cfg.RowGroupRows = 4000
	fill(t, tb, 20000, 20000, 2) // half of them late rows of day 0
	var second []string
	for _, f := range compact(cfg, day0.Add(48*time.Hour)) {
		if !slices.Contains(first, f) {
			second = append(second, f)
		}
	}
	if len(second) != 2 {
		t.Fatalf("second run wrote %v, want 2 files", second)
	}
	checkParquet(t, second, 4000)
}

// checkParquet checks the row group sizes and the largest uncompressed page
// of Parquet files.
func checkParquet(t *testing.T, files []string, rowGroupRows int64) {
	t.Helper()
	const zstdBlock = 128 << 10
	for _, f := range files {
		path := strings.TrimPrefix(f, "file://")
		rdr, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Close()
		var rows int64
		for i := range rdr.NumRowGroups() {
			rg := rdr.RowGroup(i)
			n := rg.NumRows()
			rows += n
			if n > rowGroupRows {
				t.Errorf("%s: row group %d has %d rows, want at most %d", filepath.Base(path), i, n, rowGroupRows)
			}
			for col := range rg.NumColumns() {
				pages, err := rg.GetColumnPageReader(col)
				if err != nil {
					t.Fatal(err)
				}
				for pages.Next() {
					if size := len(pages.Page().Data()); size > zstdBlock {
						t.Errorf("%s: row group %d, column %s: a %v page of %d bytes, want at most %d",
							filepath.Base(path), i, rdr.MetaData().Schema.Column(col).Name(), pages.Page().Type(), size, zstdBlock)
					}
				}
				if err := pages.Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rows == 0 {
			t.Errorf("%s: no rows", path)
		}
	}
}
