package coldread_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/coldtier/coldread"
	"github.com/sluicedb/sluice/table"
)

// BenchmarkColdReadPositionDeletes reads every row of a local table of
// 400k rows (two day files) with 10 % of them (n ending in 3) deleted by
// v2 position delete files: through the parquet-go path, which applies
// them itself, and through iceberg-go's Arrow path, where such files went
// before; and the same table before the delete, through parquet-go.
// docs/perf/upserts-iceberg.md has the figures.
func BenchmarkColdReadPositionDeletes(b *testing.B) {
	const rows = 400_000
	dir := b.TempDir()
	_, tb := openReadTable(b, dir, []table.Column{
		{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
		{Name: "note", Type: table.String},
	})
	ctx := context.Background()
	batch := make([]table.Row, 0, 10_000)
	for i := range rows {
		batch = append(batch, table.Row{"user": fmt.Sprintf("u%d", i%64), "ts": readDay0.Add(time.Duration(i%2)*24*time.Hour + time.Duration(i)*100*time.Millisecond),
			"n": int64(i), "note": fmt.Sprintf("note %d", i)})
		if len(batch) == cap(batch) {
			if err := tb.Append(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	c := localCompactor(b, dir, tb, 0)
	if _, err := c.Compact(ctx, readDay0.Add(48*time.Hour), coldtier.Options{Remove: true}); err != nil {
		b.Fatal(err)
	}
	before, err := c.cat.LoadTable(ctx, c.Identifier())
	if err != nil {
		b.Fatal(err)
	}
	var gone []int64
	for n := range int64(rows) {
		if n%10 == 3 {
			gone = append(gone, n)
		}
	}
	tx := before.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{itable.WriteDeleteModeKey: itable.WriteModeMergeOnRead}); err != nil {
		b.Fatal(err)
	}
	if err := tx.Delete(ctx, iceberg.IsIn(iceberg.Reference("n"), gone...), nil); err != nil {
		b.Fatal(err)
	}
	after, err := tx.Commit(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cols, err := tb.Columns(table.Query{})
	if err != nil {
		b.Fatal(err)
	}
	read := func(b *testing.B, tbl *itable.Table, arrow bool, want int) {
		*coldread.ForceArrow = arrow
		defer func() { *coldread.ForceArrow = false }()
		for range b.N {
			n, st, err := coldread.Query(ctx, tbl, tb, table.Query{}, cols, func([]table.Column, []any) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
			if n != want || (st.ArrowFiles != 0) != arrow {
				b.Fatalf("%d rows (%+v), want %d", n, st, want)
			}
		}
		b.ReportMetric(float64(want*b.N)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("no-deletes", func(b *testing.B) { read(b, before, false, rows) })
	b.Run("deletes-parquet-go", func(b *testing.B) { read(b, after, false, rows-len(gone)) })
	b.Run("deletes-arrow", func(b *testing.B) { read(b, after, true, rows-len(gone)) })
}
