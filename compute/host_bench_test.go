package compute

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedb/sluice/luavm"
)

// BenchmarkStatsInc: what a stats call per row costs, on each engine: the
// same column without it, with stats.inc("rows"), and with a labelled
// series (stats.inc("rows", 1, {kind = row.kind}), 4 values). Rows/s is per
// batch of 1000 rows through Process.
//
//	go test -tags luajit -run XXX -bench StatsInc -benchtime 200x -count 3 ./compute/
func BenchmarkStatsInc(b *testing.B) {
	const batch = 1000
	scripts := []struct{ name, body string }{
		{"none", ""},
		{"inc", `stats.inc("rows")`},
		{"inc-labels", `stats.inc("rows", 1, {kind = row.kind})`},
	}
	for _, engine := range scriptEngines() {
		for _, sc := range scripts {
			b.Run(engine+"/"+sc.name, func(b *testing.B) {
				sm := luavm.NewScriptMetrics()
				prometheus.NewRegistry().MustRegister(sm)
				yaml := fmt.Sprintf(`
computed:
  - name: n2
    type: int64
    engine: %s
    func: |
      local stats = require("stats")
      function main(row)
        %s
        return row.n * 2
      end
`, engine, sc.body)
				p := newProcessor(b, yaml, Options{ScriptMetrics: sm, Table: "bench"})
				rows := make([]map[string]any, batch)
				b.ResetTimer()
				for b.Loop() {
					for i := range rows {
						rows[i] = map[string]any{"n": int64(i), "kind": kinds[i%len(kinds)]}
					}
					if _, err := p.Process(context.Background(), rows); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

var kinds = []string{"click", "view", "buy", "scroll"}
