package compute

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
computed:
  - name: data
    type: json
    func: |
      local json = require("json")
      function main(row)
        return json.encode(row)
      end
  - name: id
    type: string
    func: make://identifier
    on_error: reject
    timeout: 50ms
filters:
  - name: keep
    func: plugins/keep.so
    funcname: Keep
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Computed) != 2 || len(cfg.Filters) != 1 {
		t.Fatalf("got %+v", cfg)
	}
	if c := cfg.Computed[1]; c.Name != "id" || c.OnError != "reject" || c.Timeout != 50*time.Millisecond {
		t.Errorf("computed[1] = %+v", c)
	}
	if !strings.Contains(cfg.Computed[0].Func, "json.encode(row)") {
		t.Errorf("computed[0].Func = %q", cfg.Computed[0].Func)
	}
}

func TestParseConfigReportsEveryProblem(t *testing.T) {
	_, err := ParseConfig([]byte(`
computed:
  - name: a
    type: jsonb
    func: make://identifier
  - name: a
    type: int64
    func: gs://bucket/x.lua
  - name: p
    type: string
    func: x.so
    on_error: explode
filters:
  - name: f
    func: "function main(r) return true end"
    on_error: "null"
`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`computed[0] "a": unknown type "jsonb"`, `computed[1] "a": duplicate column name`, `gs://bucket/x.lua`, `needs funcname`, `unknown on_error "explode"`, `filters[0] "f": unknown on_error "null" for a filter`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestParseConfigUnknownField(t *testing.T) {
	_, err := ParseConfig([]byte("computed:\n  - name: a\n    type: int64\n    fucn: make://timestamp\n"))
	if err == nil || !strings.Contains(err.Error(), "fucn") || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("err = %v; want the unknown field and its line", err)
	}
}
