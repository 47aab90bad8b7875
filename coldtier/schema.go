package coldtier

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/table"
)

// ErrIncompatibleWidening is returned when the sluice schema widened a
// column in a way Iceberg's schema evolution cannot follow (Iceberg
// promotes int to long and float to double, never long to double or
// anything to string).
var ErrIncompatibleWidening = errors.New("coldtier: column type changed in a way Iceberg cannot evolve")

// icebergType maps a sluice column type to its Iceberg type. Timestamps are
// timestamptz with microseconds (the Parquet unit every engine reads; the
// sub-microsecond digits are dropped), JSON is a string holding the JSON
// text.
func icebergType(t table.Type) (iceberg.Type, error) {
	switch t {
	case table.Int64:
		return iceberg.PrimitiveTypes.Int64, nil
	case table.Float64:
		return iceberg.PrimitiveTypes.Float64, nil
	case table.String, table.JSON:
		return iceberg.PrimitiveTypes.String, nil
	case table.Bool:
		return iceberg.PrimitiveTypes.Bool, nil
	case table.Timestamp:
		return iceberg.PrimitiveTypes.TimestampTz, nil
	}
	return nil, fmt.Errorf("coldtier: sluice type %v has no Iceberg mapping", t)
}

// arrowType is the Arrow type iceberg-go writes an Iceberg type from.
func arrowType(t table.Type) arrow.DataType {
	switch t {
	case table.Int64:
		return arrow.PrimitiveTypes.Int64
	case table.Float64:
		return arrow.PrimitiveTypes.Float64
	case table.Bool:
		return arrow.FixedWidthTypes.Boolean
	case table.Timestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	}
	return arrow.BinaryTypes.String
}

// newSchema is the Iceberg schema of a sluice table created now: every
// column optional, field ids in the sluice schema's order.
func newSchema(cols []table.Column) (*iceberg.Schema, error) {
	fields := make([]iceberg.NestedField, len(cols))
	for i, c := range cols {
		typ, err := icebergType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		fields[i] = iceberg.NestedField{ID: i + 1, Name: c.Name, Type: typ}
	}
	return iceberg.NewSchema(0, fields...), nil
}

// evolve stages, in tx, the columns the sluice schema has and the Iceberg
// schema lacks (added as optional columns at the end: older files read
// them as null). It reports whether it changed anything.
func evolve(tx *itable.Transaction, current *iceberg.Schema, cols []table.Column) (bool, error) {
	upd := tx.UpdateSchema(true, false)
	changed := false
	for _, c := range cols {
		typ, err := icebergType(c.Type)
		if err != nil {
			return false, fmt.Errorf("column %q: %w", c.Name, err)
		}
		f, ok := current.FindFieldByName(c.Name)
		if !ok {
			upd.AddColumn([]string{c.Name}, typ, "", false, nil)
			changed = true
			continue
		}
		if !f.Type.Equals(typ) {
			return false, fmt.Errorf("%w: %q is %v in the Iceberg table and %v (%v) in sluice; compact into a new table",
				ErrIncompatibleWidening, c.Name, f.Type, typ, c.Type)
		}
	}
	if !changed {
		return false, nil
	}
	return true, upd.Commit()
}
