package compute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// TestFile is a file of unit tests for columns and filters, the way Vector
// and Redpanda Connect let users test transforms:
//
//	config: computed.yaml        # relative to this file
//	tests:
//	  - name: adds the upper-case name
//	    input: {name: ada}        # or input_json: '{"big": 9007199254740993}'
//	    expect: {name: ada, upper: ADA}          # the whole output row, or
//	    expect_columns: {upper: ADA}             # only these fields
//	  - name: drops test events
//	    input: {name: test}
//	    expect_dropped: true
//	  - name: a bad age is an error
//	    input: {age: "x"}
//	    expect_error: {column: age_days, contains: "wrong result type"}
type TestFile struct {
	Config string     `yaml:"config"`
	Tests  []TestCase `yaml:"tests"`
}

// TestCase is one input row and what must come out of it.
type TestCase struct {
	Name          string         `yaml:"name"`
	Input         map[string]any `yaml:"input"`
	InputJSON     string         `yaml:"input_json"`
	Expect        map[string]any `yaml:"expect"`
	ExpectColumns map[string]any `yaml:"expect_columns"`
	ExpectDropped bool           `yaml:"expect_dropped"`
	ExpectError   *ExpectedError `yaml:"expect_error"`
}

// ExpectedError matches an error of a column or filter.
type ExpectedError struct {
	Column   string `yaml:"column"`
	Contains string `yaml:"contains"`
}

// TestResult is the outcome of one TestCase; Err is nil when it passed.
type TestResult struct {
	Name string
	Err  error
}

// LoadTestFile reads a test file; Config is made relative to its directory.
func LoadTestFile(path string) (TestFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return TestFile{}, err
	}
	var tf TestFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&tf); err != nil && !errors.Is(err, io.EOF) {
		return TestFile{}, fmt.Errorf("%s: %w", path, err)
	}
	if tf.Config != "" && !filepath.IsAbs(tf.Config) {
		tf.Config = filepath.Join(filepath.Dir(path), tf.Config)
	}
	for i, tc := range tf.Tests {
		if tc.Name == "" {
			tf.Tests[i].Name = fmt.Sprintf("test %d", i+1)
		}
	}
	return tf, nil
}

// RunTests runs every case through p, one row per batch.
func RunTests(ctx context.Context, p *Processor, cases []TestCase) []TestResult {
	out := make([]TestResult, 0, len(cases))
	for _, tc := range cases {
		out = append(out, TestResult{Name: tc.Name, Err: runTest(ctx, p, tc)})
	}
	return out
}

// runTest runs tc through both of p's paths, rows as maps (Process) and
// rows held by column (ProcessColumns, what the server's ingest takes), and
// wants the case to pass on both.
func runTest(ctx context.Context, p *Processor, tc TestCase) error {
	row, err := tc.inputRow()
	if err != nil {
		return err
	}
	b, err := p.Process(ctx, []map[string]any{row})
	if err := checkTest(tc, b, err); err != nil {
		return err
	}
	if row, err = tc.inputRow(); err != nil {
		return err
	}
	cb := columnsOf([]map[string]any{row})
	cols, err := p.ProcessColumns(ctx, cb)
	b = Batch{Rows: cb.Rows(), DeadLetters: cols.DeadLetters, Errors: cols.Errors}
	if err != nil {
		b.Rows = nil
	}
	if err := checkTest(tc, b, err); err != nil {
		return fmt.Errorf("rows by column: %w", err)
	}
	return nil
}

// checkTest compares what Process (or ProcessColumns) gave with tc.
func checkTest(tc TestCase, b Batch, err error) error {
	var errs []*Error
	errs = append(errs, b.Errors...)
	if err != nil {
		var fe *Error
		if !errors.As(err, &fe) {
			return err
		}
		if len(errs) == 0 || errs[len(errs)-1] != fe {
			errs = append(errs, fe)
		}
	}
	if tc.ExpectError != nil {
		for _, e := range errs {
			if (tc.ExpectError.Column == "" || e.Column == tc.ExpectError.Column) && strings.Contains(e.Error(), tc.ExpectError.Contains) {
				return nil
			}
		}
		return fmt.Errorf("want an error of %q containing %q, got %v", tc.ExpectError.Column, tc.ExpectError.Contains, errs)
	}
	if len(errs) > 0 {
		return fmt.Errorf("unexpected error: %v", errors.Join(asErrors(errs)...))
	}
	if tc.ExpectDropped {
		if len(b.Rows) != 0 {
			return fmt.Errorf("want the row dropped, got %s", mustJSON(b.Rows[0]))
		}
		return nil
	}
	if len(b.Rows) != 1 {
		return fmt.Errorf("the row was dropped (%d dead letters)", len(b.DeadLetters))
	}
	got, err := canonical(b.Rows[0])
	if err != nil {
		return err
	}
	if tc.Expect != nil {
		want, err := canonical(tc.Expect)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("output row\n  got  %s\n  want %s", mustJSON(got), mustJSON(want))
		}
	}
	if tc.ExpectColumns != nil {
		want, err := canonical(tc.ExpectColumns)
		if err != nil {
			return err
		}
		gotMap := got.(map[string]any)
		for k, w := range want.(map[string]any) {
			g, ok := gotMap[k]
			if !ok {
				return fmt.Errorf("column %q missing from %s", k, mustJSON(got))
			}
			if !reflect.DeepEqual(g, w) {
				return fmt.Errorf("column %q\n  got  %s\n  want %s", k, mustJSON(g), mustJSON(w))
			}
		}
	}
	if tc.Expect == nil && tc.ExpectColumns == nil {
		return errors.New("the case expects nothing: give expect, expect_columns, expect_dropped or expect_error")
	}
	return nil
}

func asErrors(es []*Error) []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func (tc TestCase) inputRow() (map[string]any, error) {
	if tc.InputJSON != "" {
		if tc.Input != nil {
			return nil, errors.New("give input or input_json, not both")
		}
		return DecodeRow([]byte(tc.InputJSON))
	}
	// Through JSON, so the row has the types a JSON line would give.
	b, err := json.Marshal(yamlToJSON(tc.Input))
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	if tc.Input == nil {
		b = []byte("{}")
	}
	return DecodeRow(b)
}

// yamlToJSON turns YAML's map[any]any (nested keys) into map[string]any.
func yamlToJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = yamlToJSON(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = yamlToJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = yamlToJSON(e)
		}
		return out
	}
	return v
}

// canonical turns a value into its JSON tree with numbers in one form, so
// that an expected 1 equals a computed 1.0 and a YAML map equals a json column.
func canonical(v any) (any, error) {
	var b []byte
	var err error
	if m, ok := v.(map[string]any); ok {
		b, err = AppendJSONRow(nil, m, nil)
	} else {
		b, err = json.Marshal(yamlToJSON(v))
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return canonNumbers(out), nil
}

// canonNumber is a JSON number in one textual form, distinct from strings.
type canonNumber string

func (n canonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

func canonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return canonNumber(strconv.FormatInt(i, 10))
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return canonNumber(strconv.FormatInt(int64(f), 10))
			}
			return canonNumber(strconv.FormatFloat(f, 'g', -1, 64))
		}
		return canonNumber(x)
	case map[string]any:
		for k, e := range x {
			x[k] = canonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonNumbers(e)
		}
	}
	return v
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
