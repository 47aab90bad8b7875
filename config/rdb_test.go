package config

import (
	"slices"
	"strings"
	"testing"
)

func TestRDBSectionParsed(t *testing.T) {
	yaml := `
tables:
  - name: keys
    rdb:
      db: [0, 3]
      type: [hash, zset]
      prefix: ["user:", "a,b:"]
      pattern: "user:*"
      regex: '^user:\d+$'
      min_size: 100000
      batch: 500
  - name: other
`
	cfg, err := Parse([]byte(yaml), func(k string) (string, bool) {
		if k == "SLUICE_TABLES_KEYS_RDB_DB" {
			return "1, 2", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	// The filter built from it: server's TestRDBFilterOfTheSection.
	keys, _ := cfg.Table("keys")
	r := keys.RDB
	if !slices.Equal(r.DB, []int{1, 2}) || !slices.Equal(r.Type, []string{"hash", "zset"}) ||
		!slices.Equal(r.Prefix, []string{"user:", "a,b:"}) || r.Pattern != "user:*" || r.Regex != `^user:\d+$` ||
		r.MinSize != 100000 || r.Batch != 500 {
		t.Fatalf("rdb section %+v", r)
	}
	other, _ := cfg.Table("other")
	if r := other.RDB; r.DB != nil || r.Type != nil || r.Prefix != nil || r.Pattern != "" || r.Batch != 0 {
		t.Fatalf("table without an rdb section: %+v", other.RDB)
	}
}

func TestRDBSectionProblemsReported(t *testing.T) {
	bad := `
tables:
  - name: keys
    ttl: -1h
    rdb:
      db: [0, -2]
      type: [hash, tree]
      prefix: [""]
      pattern: "user:[a"
      regex: "(unclosed"
      min_size: -1
      batch: 2000000
  - name: more
    rdb: {batch: -5, colour: red}
`
	_, err := Parse([]byte(bad), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown field in rdb: not reported: %v", err)
	}
	bad = strings.Replace(bad, ", colour: red", "", 1)
	_, err = Parse([]byte(bad), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("bad rdb sections accepted")
	}
	for _, want := range []string{
		`tables[0] "keys": ttl: negative`, // the other problems of the table too
		`tables[0] "keys": rdb.db[1]: negative database number -2`,
		`tables[0] "keys": rdb.prefix[0]: empty`,
		`tables[0] "keys": rdb.min_size: negative`,
		// type[1] "tree", the pattern and the regex are rdbtool's to find
		// (server.ValidateOptions): cmd/internal/cli's
		// TestValidateReportsEveryLayersProblems runs this config whole
		`tables[0] "keys": rdb.batch: 2000000`,
		`tables[1] "more": rdb.batch: -5`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
