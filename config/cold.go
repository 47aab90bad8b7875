package config

import (
	"fmt"
	"strings"
)

// Iceberg sends a table's compaction to an Apache Iceberg table (package
// coldtier, docs/cold-tier.md) instead of loose Parquet files under
// compact.dir.
type Iceberg struct {
	// Warehouse is "s3://bucket/prefix" or a local directory; the table's
	// files go under <warehouse>/<namespace>/<table>.
	Warehouse string `yaml:"warehouse"`
	// S3 is the object store of an s3:// warehouse. Credentials come from
	// the AWS environment variables, AWS_PROFILE or ~/.aws/credentials.
	S3 IcebergS3 `yaml:"s3"`
	// Catalog registers the table; default: a SQL catalog in the SQLite
	// file <storage.dir>/iceberg-catalog.db.
	Catalog IcebergCatalog `yaml:"catalog"`
	// Node names this server in the snapshots it commits (default: the
	// host name); nodes sharing a table need distinct names.
	Node string `yaml:"node"`
	// RowGroupRows bounds the rows per Parquet row group (default 131072);
	// a run's memory is bounded apart (docs/cold-tier.md).
	RowGroupRows int `yaml:"row_group_rows"`
}

// IcebergS3 is an S3-compatible endpoint.
type IcebergS3 struct {
	Endpoint  string `yaml:"endpoint"`   // e.g. http://127.0.0.1:7070; empty: AWS
	Region    string `yaml:"region"`     // default us-east-1
	PathStyle bool   `yaml:"path_style"` // bucket in the URL path (self-hosted servers)
}

// IcebergCatalog is an Iceberg catalog: "sql" (a SQLite file) or "rest".
type IcebergCatalog struct {
	Type       string            `yaml:"type"`
	URI        string            `yaml:"uri"`
	Name       string            `yaml:"name"`
	Namespace  string            `yaml:"namespace"`
	Properties map[string]string `yaml:"properties"`
}

func (i *Iceberg) validate(where string) []error {
	if i == nil {
		return nil
	}
	var errs []error
	if i.Warehouse == "" {
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.warehouse: empty (s3://bucket/prefix or a directory)", where))
	}
	if strings.HasPrefix(i.Warehouse, "s3://") && len(strings.TrimPrefix(i.Warehouse, "s3://")) == 0 {
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.warehouse %q: no bucket", where, i.Warehouse))
	}
	switch i.Catalog.Type {
	case "", "sql":
	case "rest":
		if i.Catalog.URI == "" {
			errs = append(errs, fmt.Errorf("%s: compact.iceberg.catalog.uri: required for a rest catalog", where))
		}
	default:
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.catalog.type %q: want sql or rest", where, i.Catalog.Type))
	}
	if i.RowGroupRows < 0 {
		errs = append(errs, fmt.Errorf("%s: compact.iceberg.row_group_rows: negative", where))
	}
	return errs
}
