package server

import (
	"strings"
	"testing"
)

// TestHugeStringOverHTTP: `string.rep("-", row.width)` with width 2^40 sent
// over HTTP killed the server with a fatal out of memory without the limits.
// Now that row's column fails (null policy) and the server keeps serving.
func TestHugeStringOverHTTP(t *testing.T) {
	cfg := `
tables:
  - name: w
    computed:
      - {name: bar, type: string, nullable: true, func: "function main(row) return string.rep('-', row.width) end"}
`
	s := startServer(t, cfg, "")
	body := `{"width":1099511627776}` + "\n" + `{"width":3}` + "\n"
	if code, res, _ := post(t, s.url+"/v1/tables/w/rows", "application/x-ndjson", strings.NewReader(body)); code != 200 {
		t.Fatalf("ingest: %d %v", code, res)
	}
	_, out := get(t, s.url+"/v1/tables/w/query?columns=bar,width&limit=10")
	if !strings.Contains(out, `"bar":"---"`) {
		t.Fatalf("the row after the huge one was not computed:\n%s", out)
	}
	_, m := get(t, s.url+"/v1/tables/w")
	if !strings.Contains(m, "string size limit") {
		t.Fatalf("the failed row's error is not reported:\n%s", m)
	}
}
