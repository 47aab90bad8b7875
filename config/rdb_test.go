package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/rdb"
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
	keys, _ := cfg.Table("keys")
	f := keys.RDB.Filter()
	if !slices.Equal(f.DBs, []int{1, 2}) || !slices.Equal(f.Types, []rdb.Type{rdb.Hash, rdb.ZSet}) ||
		!slices.Equal(f.Prefixes, []string{"user:", "a,b:"}) || f.Pattern != "user:*" || f.Regex != `^user:\d+$` ||
		f.MinSize != 100000 || keys.RDB.Batch != 500 {
		t.Fatalf("rdb section %+v, filter %+v", keys.RDB, f)
	}
	other, _ := cfg.Table("other")
	if f := other.RDB.Filter(); f.DBs != nil || f.Types != nil || f.Prefixes != nil || f.Pattern != "" || other.RDB.Batch != 0 {
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
		`tables[0] "keys": rdb.type[1] "tree"`,
		`tables[0] "keys": rdb.prefix[0]: empty`,
		`tables[0] "keys": rdb.pattern: `,
		`tables[0] "keys": rdb.regex "(unclosed"`,
		`tables[0] "keys": rdb.min_size: negative`,
		`tables[0] "keys": rdb.batch: 2000000`,
		`tables[1] "more": rdb.batch: -5`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
