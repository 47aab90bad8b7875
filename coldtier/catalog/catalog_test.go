package catalog_test

import (
	"testing"

	"github.com/sluicedb/sluice/coldtier/catalog"
)

func TestSQLBackendOf(t *testing.T) {
	for uri, want := range map[string]catalog.SQLBackend{
		"/var/lib/sluice/iceberg-catalog.db":       catalog.SQLite,
		"file:/tmp/c.db?_pragma=busy_timeout(100)": catalog.SQLite,
		"catalog.db":                              catalog.SQLite,
		"postgres://u@db.example.com/iceberg":     catalog.PostgreSQL,
		"postgresql:///iceberg":                   catalog.PostgreSQL,
		"host=/var/run/postgresql dbname=iceberg": catalog.PostgreSQL,
		" dbname = iceberg":                       catalog.PostgreSQL,
		"service=lake":                            catalog.PostgreSQL,
		"weird=name.db":                           catalog.SQLite, // not a libpq keyword
	} {
		got, err := catalog.SQLBackendOf(uri)
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", uri, got, err, want)
		}
	}
}
