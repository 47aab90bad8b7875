package coldtier

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/iceberg-go/metrics"

	"github.com/sluicedb/sluice/table"
)

// TestCommitRetriesReachTheirCompactor: each Compactor's catalog hands its
// tables the Compactor's own reporter (no registry of sluice's between
// them), so the attempts iceberg-go reports for a commit count as retries
// in that Compactor's counters and in no other's, also for two tables in
// one catalog file.
func TestCommitRetriesReachTheirCompactor(t *testing.T) {
	dir := t.TempDir()
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var cs []*Compactor
	for _, name := range []string{"a", "b"} {
		tb, err := st.Table(table.Config{Name: name, HashBy: "user", SortBy: "ts"})
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.Append(ctx, []table.Row{{"user": "u", "ts": day, "n": int64(1)}}); err != nil {
			t.Fatal(err)
		}
		c, err := Open(ctx, Config{Warehouse: filepath.Join(dir, "warehouse"), StateDir: dir, Node: "test"}, tb)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Compact(ctx, day.Add(24*time.Hour), Options{Remove: true}); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for i, c := range cs {
		tbl, err := c.cat.LoadTable(ctx, c.ident)
		if err != nil {
			t.Fatal(err)
		}
		rep, ok := tbl.MetricsReporter().(retryReporter)
		if !ok || rep.counters != c.counters {
			t.Fatalf("table %s reports to %#v, want its Compactor's retryReporter", c.ident, tbl.MetricsReporter())
		}
		rep.Report(ctx, metrics.CommitReport{TableName: "sluice." + c.t.Name(), Metrics: metrics.CommitMetricsResult{Attempts: &metrics.CounterResult{Value: int64(3 + i)}}})
	}
	if a, b := cs[0].Counters().CommitRetries.Load(), cs[1].Counters().CommitRetries.Load(); a != 2 || b != 3 {
		t.Errorf("commit retries %d and %d, want 2 and 3 (attempts 3 and 4)", a, b)
	}
}
