package compute

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunTests(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(`
filters:
  - {name: f, func: "function main(row) return row.skip ~= true end"}
computed:
  - {name: half, type: float64, func: "function main(row) return row.n / 2 end"}
  - {name: doc, type: json, func: "make://json?omit=skip"}
  - {name: strict, type: int64, on_error: reject, func: "function main(row) if row.n == 0 then error('zero') end return row.n end"}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "cases.yaml"), []byte(`
config: c.yaml
tests:
  - name: pass, numbers by value
    input: {n: 4}
    expect: {n: 4, half: 2.0, doc: {n: 4, half: 2}, strict: 4}
  - name: pass, big int through input_json, untouched
    input_json: '{"n":9007199254740993}'
    expect_columns: {n: 9007199254740993}
  - name: fail, a big int read by Lua is rounded
    input_json: '{"n":9007199254740993}'
    expect_columns: {strict: 9007199254740993}
  - name: pass, dropped
    input: {skip: true}
    expect_dropped: true
  - name: pass, reject is an error
    input: {n: 0}
    expect_error: {column: strict, contains: zero}
  - name: fail, wrong value
    input: {n: 4}
    expect_columns: {half: 3}
  - name: fail, string is not a number
    input: {n: 4}
    expect_columns: {strict: "4"}
  - name: fail, expected drop
    input: {n: 4}
    expect_dropped: true
  - name: fail, expects nothing
    input: {n: 4}
  - name: fail, unexpected error
    input: {n: 0}
    expect_columns: {strict: 0}
`), 0o644)
	tf, err := LoadTestFile(filepath.Join(dir, "cases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := OpenFile(context.Background(), tf.Config, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	results := RunTests(context.Background(), p, tf.Tests)
	if len(results) != 10 {
		t.Fatalf("%d results", len(results))
	}
	for _, r := range results {
		pass := strings.HasPrefix(r.Name, "pass")
		if pass != (r.Err == nil) {
			t.Errorf("%s: err = %v", r.Name, r.Err)
		}
	}
	if err := results[5].Err; err == nil || !strings.Contains(err.Error(), `column "half"`) {
		t.Errorf("wrong value message: %v", err)
	}
}
