package config

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

const icebergConfig = `
tables:
  - name: events
    sortBy: ts
    compact:
      interval: 1m
      remove: true
      iceberg:
        warehouse: s3://lake/sluice
        s3: {endpoint: "http://127.0.0.1:7070", path_style: true}
        catalog: {type: sql, uri: /tmp/catalog.db}
        row_group_rows: 4096
        orphan_interval: 6h
        unsorted: true
`

// TestIcebergSection: compact.iceberg parses, replaces compact.dir, and its
// fields take environment overrides like every other field.
func TestIcebergSection(t *testing.T) {
	env := map[string]string{"SLUICE_TABLES_EVENTS_COMPACT_ICEBERG_S3_ENDPOINT": "http://10.0.0.1:9000"}
	cfg, err := Parse([]byte(icebergConfig), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	ic := cfg.Tables[0].Compact.Iceberg
	if ic == nil || ic.Warehouse != "s3://lake/sluice" || !ic.S3.PathStyle || ic.Catalog.URI != "/tmp/catalog.db" || ic.RowGroupRows != 4096 {
		t.Fatalf("iceberg section %+v", ic)
	}
	if !ic.Unsorted {
		t.Error("unsorted: true not read")
	}
	if every, age := ic.Orphans(); every != 6*time.Hour || age != DefaultOrphanAge {
		t.Errorf("orphan cleanup every %v, age %v; want 6h and the default age", every, age)
	}
	if ic.S3.Endpoint != "http://10.0.0.1:9000" {
		t.Errorf("endpoint %q: the environment override was not applied", ic.S3.Endpoint)
	}
}

func TestIcebergSectionErrors(t *testing.T) {
	bad := strings.NewReplacer("warehouse: s3://lake/sluice", "warehouse: s3://", "type: sql", "type: hive", "row_group_rows: 4096", "row_group_rows: -1", "orphan_interval: 6h", "orphan_age: -1h").Replace(icebergConfig)
	_, err := Parse([]byte(bad), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`warehouse "s3://": no bucket`, `catalog.type "hive"`, "row_group_rows: negative", "orphan_age: negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

// TestIcebergCatalogURI: a SQL catalog's uri is a SQLite path or a
// PostgreSQL connection string; another scheme is refused, naming it.
func TestIcebergCatalogURI(t *testing.T) {
	for uri, wantErr := range map[string]string{
		"/var/lib/sluice/catalog.db":                         "",
		"postgres://sluice@db.example.com:5432/iceberg":      "",
		"postgresql://a:5432,b:5432/iceberg?sslmode=require": "",
		"host=/var/run/postgresql dbname=iceberg":            "",
		"mysql://sluice:s3cret@db.example.com/iceberg":       `catalog.uri: unknown scheme "mysql"`,
		"sqlite:///var/lib/sluice/catalog.db":                `catalog.uri: unknown scheme "sqlite"`,
	} {
		doc := strings.Replace(icebergConfig, "uri: /tmp/catalog.db", "uri: "+strconv.Quote(uri), 1)
		_, err := Parse([]byte(doc), func(string) (string, bool) { return "", false })
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%s: %v", uri, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%s: %v, want an error with %q", uri, err, wantErr)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: the error shows the password: %v", uri, err)
		}
	}
}

// TestOrphanAgeFloor: an orphan_age that does not exceed the longest read
// lease plus the longest compaction run is refused, naming the bound; one
// just above it, or none (the default), is taken.
func TestOrphanAgeFloor(t *testing.T) {
	parse := func(age string) error {
		cfg := strings.Replace(icebergConfig, "orphan_interval: 6h", "orphan_interval: 6h\n        orphan_age: "+age, 1)
		_, err := Parse([]byte(cfg), func(string) (string, bool) { return "", false })
		return err
	}
	for _, age := range []string{"30s", "1h", "7h"} {
		err := parse(age)
		if err == nil || !strings.Contains(err.Error(), "orphan_age "+mustDuration(t, age).String()+": must exceed 7h0m0s, the longest read lease (1h0m0s) plus the longest compaction run (6h0m0s)") {
			t.Errorf("orphan_age %s: %v; want the floor named", age, err)
		}
	}
	for _, age := range []string{"7h1m", "72h"} {
		if err := parse(age); err != nil {
			t.Errorf("orphan_age %s: %v", age, err)
		}
	}
	if DefaultOrphanAge <= MinOrphanAge {
		t.Errorf("the default orphan_age %v does not exceed MinOrphanAge %v", DefaultOrphanAge, MinOrphanAge)
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
