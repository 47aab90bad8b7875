package coldtier

import (
	"context"

	"github.com/apache/iceberg-go"
)

// SetDayWriter turns the day writers on or off (off: iceberg-go's
// WriteRecords writes every run) and returns the function that restores
// the setting.
func SetDayWriter(on bool) (restore func()) {
	old := dayWriterOff
	dayWriterOff = !on
	return func() { dayWriterOff = old }
}

// DataFileEntries are the data files of c's Iceberg table's current
// snapshot, as its manifests hold them.
func DataFileEntries(ctx context.Context, c *Compactor) ([]iceberg.DataFile, error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return nil, err
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	files := make([]iceberg.DataFile, len(tasks))
	for i, t := range tasks {
		files[i] = t.File
	}
	return files, nil
}

// CreateIcebergTable creates c's Iceberg table with schema (as another
// engine, or an older writer, would have), before c's first run.
func CreateIcebergTable(ctx context.Context, c *Compactor, schema *iceberg.Schema) error {
	sortKey := c.t.HashBy()
	if c.cfg.Unsorted {
		sortKey = ""
	}
	_, err := loadOrCreate(ctx, c.cat, &c.cfg, c.t.Name(), schema, c.t.SortBy(), sortKey)
	return err
}
