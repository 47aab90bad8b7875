package coldtier

import (
	"context"

	itable "github.com/apache/iceberg-go/table"
)

// RowRef names a row of the Iceberg table (its data file and position).
type RowRef = rowRef

// SetRunDeletes makes every run of c delete the rows f names in its
// commit (the entry the key index's join calls in the package).
func SetRunDeletes(c *Compactor, f func(ctx context.Context, tbl *itable.Table) ([]RowRef, error)) {
	c.runDeletes = f
}
