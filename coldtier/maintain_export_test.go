package coldtier

import (
	"context"
	"slices"

	itable "github.com/apache/iceberg-go/table"
)

// SetMergeFanIn sets how many runs one merge of the rewrite reads at once
// and returns the function that restores it (tests force the merge
// through its temporary files with a small one).
func SetMergeFanIn(n int) (restore func()) {
	old := mergeFanIn
	mergeFanIn = n
	return func() { mergeFanIn = old }
}

// SetRewriteStaged sets the function run after a rewrite's replace
// snapshot is staged, before its commit, and returns the function that
// restores it.
func SetRewriteStaged(f func()) (restore func()) {
	old := rewriteStaged
	rewriteStaged = f
	return func() { rewriteStaged = old }
}

// SnapshotLog loads c's Iceberg table and returns its snapshot log and
// its snapshots by id.
func SnapshotLog(ctx context.Context, c *Compactor) ([]itable.SnapshotLogEntry, map[int64]itable.Snapshot, error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return nil, nil, err
	}
	snaps := map[int64]itable.Snapshot{}
	for _, s := range tbl.Metadata().Snapshots() {
		snaps[s.SnapshotID] = s
	}
	return slices.Collect(tbl.Metadata().SnapshotLogs()), snaps, nil
}

// SetExpiryCommitted sets the function run after an expiry's commit,
// before it deletes the files, and returns the function that restores it.
func SetExpiryCommitted(f func()) (restore func()) {
	old := expiryCommitted
	expiryCommitted = f
	return func() { expiryCommitted = old }
}
