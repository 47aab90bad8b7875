package coldtier

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/coldtier/coldread"
	"github.com/sluicedb/sluice/table"
)

// icebergType maps a sluice column type to its Iceberg type. Timestamps are
// timestamptz with microseconds (the Parquet unit every engine reads; the
// sub-microsecond digits are dropped), JSON is a string holding the JSON
// text; date, time_of_day, uuid, bytes and decimal(p,s) are Iceberg's date,
// time, uuid, binary and decimal(p,s).
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
	case table.Date:
		return iceberg.PrimitiveTypes.Date, nil
	case table.TimeOfDay:
		return iceberg.PrimitiveTypes.Time, nil
	case table.UUID:
		return iceberg.PrimitiveTypes.UUID, nil
	case table.Bytes:
		return iceberg.PrimitiveTypes.Binary, nil
	}
	if t.IsDecimal() {
		return iceberg.DecimalTypeOf(t.Precision(), t.Scale()), nil
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
	case table.Date:
		return arrow.FixedWidthTypes.Date32
	case table.TimeOfDay:
		return arrow.FixedWidthTypes.Time64us
	case table.UUID:
		// The extension type, not plain fixed_size_binary[16]: pqarrow
		// writes it with Parquet's UUID logical type, as Iceberg's uuid
		// asks (and as iceberg-go reads one).
		return extensions.NewUUIDType()
	case table.Bytes:
		return arrow.BinaryTypes.Binary
	}
	if t.IsDecimal() {
		return &arrow.Decimal128Type{Precision: int32(t.Precision()), Scale: int32(t.Scale())}
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

// evolve stages, in tx, the Iceberg schema that takes the sluice schema
// cols. It reports whether it changed anything. No sluice column stops the
// table's commits:
//   - a column the Iceberg schema lacks is added (optional, at the end:
//     older files read it as null);
//   - a column whose Iceberg type promotes to the sluice one (int to long,
//     float to double: iceberg.PromoteType) is promoted in place, and older
//     files read as the wider type;
//   - a column whose Iceberg type cannot become the sluice one (a long
//     column that a store written by an older sluice widened to double or
//     string) is retired: the Iceberg column keeps its field id and its
//     files' values under a new name (retiredName, its doc saying whose
//     values it holds: coldread.RetiredDoc), and a column of the sluice
//     type takes the name. Engines read the old values under the retired
//     name; sluice's cold read takes them for the column (coldread
//     converts them as the store converts older blocks).
func evolve(tx *itable.Transaction, current *iceberg.Schema, cols []table.Column) (bool, error) {
	upd := tx.UpdateSchema(true, false)
	changed := false
	type column struct {
		name string
		typ  iceberg.Type
	}
	var retired []column
	for _, c := range cols {
		typ, err := icebergType(c.Type)
		if err != nil {
			return false, fmt.Errorf("column %q: %w", c.Name, err)
		}
		f, ok := current.FindFieldByName(c.Name)
		switch {
		case !ok:
			upd.AddColumn([]string{c.Name}, typ, "", false, nil)
		case f.Type.Equals(typ):
			continue
		case promotes(f.Type, typ):
			upd.UpdateColumn([]string{c.Name}, itable.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Valid: true, Val: typ}})
		default:
			upd.UpdateColumn([]string{c.Name}, itable.ColumnUpdate{
				Name: iceberg.Optional[string]{Valid: true, Val: retiredName(current, c.Name, f.Type)},
				Doc:  iceberg.Optional[string]{Valid: true, Val: coldread.RetiredDoc(c.Name)},
			})
			retired = append(retired, column{c.Name, typ})
		}
		changed = true
	}
	if !changed {
		return false, nil
	}
	// In the same update, after their renames: a column may take the name
	// a renamed one gave up (one schema change, one requirement on the
	// schema the transaction started from).
	for _, c := range retired {
		upd.AddColumn([]string{c.name}, c.typ, "", false, nil)
	}
	if err := upd.Commit(); err != nil {
		return false, fmt.Errorf("evolve the Iceberg schema: %w", err)
	}
	return true, nil
}

// promotes reports whether Iceberg's schema evolution turns a column of
// type from into one of type to in place (int to long, float to double).
func promotes(from, to iceberg.Type) bool {
	_, err := iceberg.PromoteType(from, to)
	return err == nil
}

// retiredName is the name a column gives up for one of another type: its
// name and its Iceberg type ("amount__long"), numbered when taken already
// (a column retired twice from the same type).
func retiredName(schema *iceberg.Schema, name string, typ iceberg.Type) string {
	base := name + "__" + typ.String()
	retired := base
	for i := 2; ; i++ {
		if _, taken := schema.FindFieldByName(retired); !taken {
			return retired
		}
		retired = fmt.Sprintf("%s_%d", base, i)
	}
}
