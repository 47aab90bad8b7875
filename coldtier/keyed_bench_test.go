package coldtier_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/table"
)

// BenchmarkKeyedQuery times a two-tier query of the whole table: 100,000
// keys committed to a local-directory warehouse by a continuous run (the
// store keeps them), then changed keys not committed yet (upserts, a tenth
// of them deletes), against the same 100,000 rows in an append-only
// table. The keyed query reads the changed keys from the store and leaves
// their Iceberg rows out. With source, every change is a stream batch of
// one source partition: the rows carry their source position into Iceberg,
// and a query with changed keys reads it from both tiers to order the
// store's change against the Iceberg row.
//
//	go test -run '^$' -bench KeyedQuery -benchtime 20x ./coldtier/
func BenchmarkKeyedQuery(b *testing.B) {
	const keys = 100_000
	for _, bc := range []struct {
		keyed   bool
		changed int
		source  bool
	}{{false, 0, false}, {true, 0, false}, {true, 1000, false}, {true, 10_000, false}, {true, 0, true}, {true, 1000, true}, {true, 10_000, true}} {
		b.Run(fmt.Sprintf("keyed=%v/changed=%d/source=%v", bc.keyed, bc.changed, bc.source), func(b *testing.B) {
			dir := b.TempDir()
			cfg := table.Config{Name: "events", HashBy: "user", SortBy: "ts", Columns: staticSchema}
			if bc.keyed {
				cfg.PrimaryKey = []string{"n"}
			}
			st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			tb, err := st.Table(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			c, err := coldtier.Open(ctx, coldtier.Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "bench"}, tb)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			state := keyState{}
			var src []*int64
			if bc.source {
				src = []*int64{new(int64)}
			}
			for first := int64(0); first < keys; first += 10_000 {
				state.upsert(b, tb, span(first, first+10_000), "v1", src...)
			}
			if _, err := c.Compact(ctx, time.Now(), coldtier.Options{Continuous: true}); err != nil {
				b.Fatal(err)
			}
			if bc.changed > 0 {
				step := int64(keys / bc.changed)
				var ups, dels []int64
				for i := range int64(bc.changed) {
					if i%10 == 0 {
						dels = append(dels, i*step)
					} else {
						ups = append(ups, i*step)
					}
				}
				state.upsert(b, tb, ups, "v2", src...)
				state.remove(b, tb, dels, src...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for b.Loop() {
				err := c.QueryValues(ctx, table.Query{}, true, func(_ []table.Column, _ []any) error { n++; return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			if n != len(state)*b.N {
				b.Fatalf("%d rows in %d queries, want %d each", n, b.N, len(state))
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
