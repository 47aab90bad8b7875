package coldtier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"
)

// In-flight markers: how every orphan cleanup, on any node, learns of the
// files that no snapshot references yet because their commit is still to
// come (docs/cold-tier.md, "Orphan cleanup").
//
// A compaction run, and each step of a maintenance pass, writes a marker
// object <table location>/sluice-inflight/<writer>/<id>.json before it
// writes its first file, and removes it once its files' fate is decided:
// after its commit, or when it is abandoned (a run's recovery drops a run
// that did not commit; a node's Open removes the markers of its steps that
// a kill interrupted). Every file the step writes (data files, manifests,
// manifest list) is written after its marker, so the object store stamps
// it no earlier than the marker; the cleanup keeps every unreferenced file
// stamped later than markerSkew before the oldest live marker. Stamps of
// the same store are compared, never a node's clock with the store's.
//
// The cleanup (DeleteOrphanFiles) (1) loads the table and lists its
// location (iceberg-go's orphan plan), then (2) lists the markers, then (3)
// loads the table again and keeps whatever the snapshots committed since
// (1) reference. A file listed in (1) was written before (2), and its
// marker before it: either the marker is still there at (2) and the file
// is kept, or it was removed before (2), so the step had committed by then
// (the file is kept by (3)) or was abandoned (the file is an orphan
// indeed). Whatever the cleanup's age, no file of a commit to come is
// deleted.
//
// A marker is honoured for markerBound after it was written, whether or
// not its writer still lives: a node that dies and never comes back stops
// the deletion of the orphans younger than its marker for that long, not
// forever. A step never commits later than MaxRunDuration after writing
// its marker (it abandons its files instead, and a run's rows are written
// again by the next run), so every step that may still commit is covered,
// with markerBound - MaxRunDuration to spare for a process stopped between
// that check and its commit (SIGSTOP, a paused VM).

// inflightDirName is the directory of the markers under the table's
// location; the orphan cleanup never deletes under it.
const inflightDirName = "sluice-inflight"

// MaxRunDuration bounds how long after writing its in-flight marker a run,
// or a step of a maintenance pass, may commit: past it, the step abandons
// its uploaded files (ErrRunTooLong). It includes the time the commit
// waited for read leases and holds (the longest lease, one hour, is far
// shorter). config.MinOrphanAge builds on it.
const MaxRunDuration = 6 * time.Hour

// markerBound is how long a cleanup honours a marker, written by a live
// node or by one that died.
const markerBound = 4 * MaxRunDuration

// markerSkew allows for the clocks of the object store's servers: a file
// stamped up to this long before a live marker is kept too.
const markerSkew = 5 * time.Minute

// ErrRunTooLong: the run (or maintenance step) reached its commit more
// than MaxRunDuration after it started writing; its files are abandoned
// (the rows stay in the hot store for the next run).
var ErrRunTooLong = errors.New("coldtier: the run took longer than its bound (MaxRunDuration): its files are abandoned")

// marker is the content of an in-flight marker (for people; the cleanup
// uses only its name and its stamp).
type marker struct {
	Node    string    `json:"node"`
	Writer  string    `json:"writer"`
	Kind    string    `json:"kind"` // "run" or "maintain"
	Started time.Time `json:"started"`
}

func inflightDir(location string) string {
	return strings.TrimRight(location, "/") + "/" + inflightDirName
}

// markerPath is the marker of this compactor's step id.
func (c *Compactor) markerPath(tbl *itable.Table, id string) string {
	return inflightDir(tbl.Location()) + "/" + c.writer + "/" + id + ".json"
}

// markerWritten runs after a step's marker is written, before its first
// upload (tests stop a run there).
var markerWritten = func(kind string) {}

// markerKept runs after a committed run's local step, before its marker
// is removed (tests stop a run there).
var markerKept = func() {}

// writeMarker writes (or rewrites) the marker of step id of kind before
// the step writes any file, and returns when it was written, for
// MaxRunDuration.
func (c *Compactor) writeMarker(ctx context.Context, tbl *itable.Table, id, kind string) (time.Time, error) {
	started := time.Now()
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return started, fmt.Errorf("coldtier: table %s: in-flight marker: %w", c.t.Name(), err)
	}
	w, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return started, fmt.Errorf("coldtier: table %s: in-flight marker: file IO %T cannot write files", c.t.Name(), fsys)
	}
	buf, err := json.Marshal(marker{Node: c.cfg.Node, Writer: c.writer, Kind: kind, Started: started.UTC()})
	if err != nil {
		return started, err
	}
	if err := w.WriteFile(c.markerPath(tbl, id), buf); err != nil {
		return started, fmt.Errorf("coldtier: table %s: write in-flight marker %s: %w", c.t.Name(), id, err)
	}
	if f := c.hooks.MarkerWritten; f != nil {
		f(kind)
	} else {
		markerWritten(kind)
	}
	return started, nil
}

// removeMarker removes the marker of step id (one already gone is fine).
func (c *Compactor) removeMarker(ctx context.Context, tbl *itable.Table, id string) error {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("coldtier: table %s: in-flight marker: %w", c.t.Name(), err)
	}
	if err := fsys.Remove(c.markerPath(tbl, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("coldtier: table %s: remove in-flight marker %s: %w", c.t.Name(), id, err)
	}
	return nil
}

// removeOwnMarkers removes this compactor's markers but keep's: at Open,
// no step of this writer is in flight but the recorded run (keep, whose
// recovery removes its marker once it has decided its fate); the others
// are of steps a kill interrupted, whose files are orphans.
func (c *Compactor) removeOwnMarkers(ctx context.Context, tbl *itable.Table, keep string) error {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("coldtier: table %s: in-flight markers: %w", c.t.Name(), err)
	}
	var stale []string
	keepPath := normPath(c.markerPath(tbl, keep))
	err = walkFiles(fsys, inflightDir(tbl.Location())+"/"+c.writer, func(path string, _ fs.FileInfo) {
		if keep == "" || normPath(path) != keepPath {
			stale = append(stale, path)
		}
	})
	if err != nil {
		return fmt.Errorf("coldtier: table %s: list in-flight markers: %w", c.t.Name(), err)
	}
	for _, p := range stale {
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("coldtier: table %s: remove in-flight marker %s: %w", c.t.Name(), p, err)
		}
	}
	return nil
}

// oldestLiveMarker is the stamp of the oldest marker under location
// written less than markerBound ago (ok false: none).
func oldestLiveMarker(fsys icebergio.IO, location string, now time.Time) (oldest time.Time, ok bool, err error) {
	err = walkFiles(fsys, inflightDir(location), func(_ string, info fs.FileInfo) {
		stamp := info.ModTime()
		if now.Sub(stamp) > markerBound {
			return
		}
		if !ok || stamp.Before(oldest) {
			oldest, ok = stamp, true
		}
	})
	return oldest, ok, err
}

// walkFiles calls fn for each file under root (none when root does not
// exist).
func walkFiles(fsys icebergio.IO, root string, fn func(path string, info fs.FileInfo)) error {
	walker, ok := fsys.(icebergio.ListableIO)
	if !ok {
		return fmt.Errorf("file IO %T cannot list files", fsys)
	}
	return walker.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while listed
		}
		if err != nil {
			return err
		}
		fn(path, info)
		return nil
	})
}
