//go:build luajit && cgo

package server

import (
	"strings"
	"testing"
)

// A table's computed column on the LuaJIT engine: rows come back with it,
// and /metrics has the engine's per-script counters.
func TestLuaJITColumn(t *testing.T) {
	s := startServer(t, strings.Replace(testConfig, `      - name: double
        type: int64
`, `      - name: double
        type: int64
        engine: luajit
`, 1), "")
	nd := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}
{"user":"bob","ts":"2024-05-01T11:00:00Z","n":21}
`
	code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd))
	if code != 200 || res["accepted"] != 2.0 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	code, body := get(t, s.url+"/v1/tables/events/query?hash=bob&from=2024-05-01T00:00:00Z&to=2024-05-02T00:00:00Z&columns=user,n,double")
	rows := lines(body)
	if code != 200 || len(rows) != 1 || rows[0]["double"] != 42.0 {
		t.Fatalf("query: %d %q", code, body)
	}
	code, body = get(t, s.url+"/metrics")
	if code != 200 || !strings.Contains(body, `luajit_rows_total{script="double"} 2`) {
		t.Errorf("metrics lack luajit_rows_total for the column:\n%s", body)
	}
}
