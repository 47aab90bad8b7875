package server

import (
	"context"

	"github.com/sluicedb/sluice/ingest"
)

// NewBatch makes stagedAppender an ingest.BatchAppender: each part of an
// atomic RDB snapshot is staged as the pipeline adds it, so that the rows
// the table leaves out (a value that does not fit its column's fixed type,
// a row past the column limit: table.TypeMismatchError,
// table.ColumnLimitError) go to the dead letters and the rest of the part
// is staged, as on every other ingest path, instead of refusing the whole
// snapshot. Nothing is visible until the stage is published, once the
// whole snapshot is read (rdbingest.go), so the snapshot stays all or
// nothing.
func (a stagedAppender) NewBatch() (ingest.AppendBatch, error) { return stagedBatch{a}, nil }

// stagedBatch is a part of a snapshot staged at once: Add stages it (a
// refused Add stages nothing of its rows and leaves the stage usable);
// the stage's Publish, not Commit, makes it visible.
type stagedBatch struct{ a stagedAppender }

func (b stagedBatch) Add(ctx context.Context, rows []ingest.Row) error {
	return b.a.stage.Append(ctx, b.a.t, rows)
}

func (stagedBatch) Commit(context.Context) error { return nil }
func (stagedBatch) Close()                       {}
