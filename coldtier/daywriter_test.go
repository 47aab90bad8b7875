package coldtier_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/sluicedb/sluice/coldtier"
)

// TestDayWriterMatchesIcebergGo: the files a run writes itself (the day
// writer) and those iceberg-go's WriteRecords writes from the same rows
// are the same files to a reader: the same partition directories and
// values, sizes, row counts and column metrics (sizes, value and null
// counts, bounds) in their manifest entries. A 2-day run of row groups of
// 4000 rows.
func TestDayWriterMatchesIcebergGo(t *testing.T) {
	ctx := context.Background()
	write := func(dayWriter bool) map[string]iceberg.DataFile {
		t.Helper()
		defer coldtier.SetDayWriter(dayWriter)()
		dir := t.TempDir()
		st, tb := openTable(t, dir, staticSchema)
		defer st.Close()
		fill(t, tb, 0, 30000, 2)
		c, err := coldtier.Open(ctx, coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "local", RowGroupRows: 4000}, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Compact(ctx, day0.Add(48*time.Hour), coldtier.Options{Remove: true}); err != nil {
			t.Fatal(err)
		}
		files, err := coldtier.DataFileEntries(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		// The key: the partition directory and the file's place in it
		// (its name's last part counts the day's files).
		byKey := map[string]iceberg.DataFile{}
		for _, f := range files {
			path := f.FilePath()
			dirName := filepath.Base(filepath.Dir(path))
			name := filepath.Base(path)
			byKey[dirName+"/"+name[strings.LastIndex(name, "-")+1:]] = f
		}
		return byKey
	}
	want, got := write(false), write(true)
	if len(got) != len(want) || len(got) < 2 {
		t.Fatalf("day writer: %d files %v, iceberg-go: %d files %v", len(got), keys(got), len(want), keys(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: iceberg-go wrote it, the day writer did not (%v)", k, keys(got))
			continue
		}
		check := func(what string, a, b any) {
			if !equalAny(a, b) {
				t.Errorf("%s: %s: day writer %v, iceberg-go %v", k, what, a, b)
			}
		}
		check("partition", g.Partition(), w.Partition())
		check("record count", g.Count(), w.Count())
		check("file size", g.FileSizeBytes(), w.FileSizeBytes())
		check("column sizes", g.ColumnSizes(), w.ColumnSizes())
		check("value counts", g.ValueCounts(), w.ValueCounts())
		check("null counts", g.NullValueCounts(), w.NullValueCounts())
		check("lower bounds", g.LowerBoundValues(), w.LowerBoundValues())
		check("upper bounds", g.UpperBoundValues(), w.UpperBoundValues())
		check("split offsets", g.SplitOffsets(), w.SplitOffsets())
		check("sort order", g.SortOrderID(), w.SortOrderID())
		check("spec", g.SpecID(), w.SpecID())
	}
}

func keys(m map[string]iceberg.DataFile) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// equalAny compares two metrics by their printed form (maps print sorted
// by key; byte slices as bytes).
func equalAny(a, b any) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}
