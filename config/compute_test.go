package config

import (
	"strings"
	"testing"
)

// TestComputeS3KeysChecked: a computed column's or a filter's s3 keys are
// secrets that config checks where it checks every secret, each problem at
// its place: a key without the other, a variable that is unset.
func TestComputeS3KeysChecked(t *testing.T) {
	const yaml = `
tables:
  - name: events
    computed:
      - {name: a, type: string, func: "s3://b/a.lua", s3: {endpoint: "http://127.0.0.1:1", access_key: {env: SLUICE_TEST_KEY}}}
      - {name: b, type: string, func: "s3://b/b.lua", s3: {access_key: {env: SLUICE_TEST_KEY}, secret_key: {env: SLUICE_TEST_KEY}}}
    filters:
      - {name: f, func: "s3://b/f.lua", s3: {access_key: {env: SLUICE_TEST_KEY}, secret_key: {env: SLUICE_TEST_UNSET_KEY}}}
`
	t.Setenv("SLUICE_TEST_KEY", "x") // secrets are read from the process's environment
	_, err := Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`tables[0] "events": computed[0] "a": s3: set access_key and secret_key together`,
		`tables[0] "events": filters[0] "f": s3.secret_key: environment variable SLUICE_TEST_UNSET_KEY is unset or empty`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `computed[1]`) {
		t.Errorf("a column with both keys set is reported:\n%v", err)
	}
}
