package compute

import (
	"errors"
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

// TestParseConfigRefusesS3Keys: `sluice compute`'s YAML never holds an S3
// key (it reads them from the environment), though the s3 section is the
// server's, where keys are secrets; the endpoint alone is fine.
func TestParseConfigRefusesS3Keys(t *testing.T) {
	_, err := ParseConfig([]byte(`
computed:
  - {name: a, type: string, func: "s3://b/a.lua", s3: {endpoint: "http://127.0.0.1:1", access_key: AKIA-inline}}
  - {name: b, type: string, func: "s3://b/b.lua", s3: {endpoint: "http://127.0.0.1:1"}}
filters:
  - {name: f, func: "s3://b/f.lua", s3: {secret_key: {env: SLUICE_TEST_NO_SUCH_VAR}}}
`))
	if !errors.Is(err, ErrS3KeysInYAML) {
		t.Fatalf("err = %v, want ErrS3KeysInYAML", err)
	}
	for _, want := range []string{`computed[0] "a": s3: access_key`, `filters[0] "f": s3: access_key`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `computed[1]`) || strings.Contains(err.Error(), "AKIA-inline") {
		t.Errorf("error names a column without keys, or shows a key:\n%v", err)
	}
}
