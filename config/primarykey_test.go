package config

import (
	"slices"
	"strings"
	"testing"
)

func TestPrimaryKey(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := Parse([]byte("tables: [{name: state, sortBy: ts, primary_key: [tenant, id]}]"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Tables[0].PrimaryKey; !slices.Equal(got, []string{"tenant", "id"}) {
		t.Errorf("primary_key = %q", got)
	}
	// A continuous cold tier is the keyed table's Iceberg join, in both
	// retention modes.
	// A uuid key in the store alone is a key like any other.
	if _, err := Parse([]byte("tables: [{name: s, sortBy: ts, schema: [{name: ts, type: timestamp}, {name: id, type: uuid}], primary_key: [id]}]"), noEnv); err != nil {
		t.Errorf("keyed table with a uuid key and no cold tier: %v", err)
	}
	for _, remove := range []string{"true", "false"} {
		keyed := "tables: [{name: s, primary_key: [id], compact: {interval: 1m, remove: " + remove +
			", iceberg: {continuous: true, warehouse: s3://lake/x, catalog: {type: sql, uri: /tmp/c.db}}}}]"
		if _, err := Parse([]byte(keyed), noEnv); err != nil {
			t.Errorf("keyed table with a continuous cold tier (remove: %s): %v", remove, err)
		}
	}
	for _, c := range []struct{ yaml, want string }{
		{"{name: s, primary_key: [id, id]}", `column "id" twice`},
		{"{name: s, primary_key: ['']}", "an empty column name"},
		{"{name: s, primary_key: [_sluice_op]}", "cannot be a key"},
		{"{name: s, sortBy: ts, schema: [{name: ts, type: timestamp}], primary_key: [id]}", `column "id" is neither in the schema`},
		{"{name: s, primary_key: [id], compact: {interval: 1m, dir: /tmp/x}}", "compact.dir is not supported on a keyed table"},
		{"{name: s, primary_key: [id], compact: {interval: 1m, remove: true, iceberg: {warehouse: s3://lake/x, catalog: {type: sql, uri: /tmp/c.db}}}}", "compact.iceberg needs continuous: true on a keyed table"},
		{"{name: s, primary_key: [id], sources: [{s3: {bucket: b, endpoint: 'http://127.0.0.1:1'}}]}", "sources[0].s3 is not supported on a keyed table"},
		{"{name: s, sortBy: ts, schema: [{name: ts, type: timestamp}, {name: id, type: uuid}], primary_key: [id], compact: {interval: 1m, iceberg: {continuous: true, warehouse: s3://lake/x, catalog: {type: sql, uri: /tmp/c.db}}}}", `column "id" of type uuid cannot be the key of a table with compact.iceberg`},
	} {
		_, err := Parse([]byte("tables: ["+c.yaml+"]"), noEnv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.yaml, err, c.want)
		}
	}
}
