package coldtier

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"
)

// orphansWaiting runs when an orphan cleanup finds this compactor's
// maintenance pass or another cleanup under way, before it waits for it
// (tests learn so that the cleanup waits, without sleeping).
var orphansWaiting = func() {}

// orphansPlanned runs after a cleanup listed its candidates, before it
// reads the in-flight markers (tests run another writer's step there).
var orphansPlanned = func() {}

// DeleteOrphanFiles deletes the files under the table's location that no
// snapshot references and that are older than olderThan: the files of runs
// and maintenance steps killed before their commit. It never deletes a
// file whose commit is still to come, on this node or another, whatever
// olderThan (inflight.go): the files of a step whose in-flight marker is
// live are kept, and so are the files committed while the cleanup ran.
// olderThan only spares what other writers (another engine, a step
// without markers) may have in flight; the server bounds it from below
// (config.MinOrphanAge).
//
// Cleanups of one compactor run one at a time, and not during its
// maintenance pass (a rewrite's files uploaded before the cleanup loaded
// the table and committed after it, and the files an expiry committed and
// is about to delete, would look orphan) nor during its runs. A file that
// is gone when the cleanup deletes it (another node's cleanup or expiry
// got there first) is done, not an error. It lists the whole table
// location (twice when a marker is live), so call it rarely.
func (c *Compactor) DeleteOrphanFiles(ctx context.Context, olderThan time.Duration) ([]string, error) {
	if !c.maint.mu.TryLock() {
		hook(c.hooks.OrphansWaiting, orphansWaiting)
		c.maint.mu.Lock()
	}
	defer c.maint.mu.Unlock()
	if !c.runMu.TryLock() {
		hook(c.hooks.OrphansWaiting, orphansWaiting)
		c.runMu.Lock()
	}
	defer c.runMu.Unlock()
	name := strings.Join(c.ident, ".")
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return nil, fmt.Errorf("coldtier: load %s: %w", name, err)
	}
	plan, err := tbl.PlanOrphanFiles(ctx, itable.WithFilesOlderThan(olderThan))
	if err != nil {
		return nil, fmt.Errorf("coldtier: list orphan files of %s: %w", name, err)
	}
	markers := normPath(inflightDir(tbl.Location())) + "/"
	var candidates []string
	for _, p := range plan.Files() {
		if !strings.HasPrefix(normPath(p), markers) {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return []string{}, nil
	}
	hook(c.hooks.OrphansPlanned, orphansPlanned)
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("coldtier: %s: %w", name, err)
	}
	oldest, live, err := oldestLiveMarker(fsys, tbl.Location(), time.Now())
	if err != nil {
		return nil, fmt.Errorf("coldtier: %s: list in-flight markers: %w", name, err)
	}
	fresh, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return nil, fmt.Errorf("coldtier: reload %s: %w", name, err)
	}
	committed, err := committedSince(fsys, tbl, fresh)
	if err != nil {
		return nil, fmt.Errorf("coldtier: %s: files committed during the cleanup: %w", name, err)
	}
	var stamps map[string]time.Time
	if live {
		if stamps, err = fileStamps(fsys, tbl.Location()); err != nil {
			return nil, fmt.Errorf("coldtier: %s: list files: %w", name, err)
		}
	}
	deleted := []string{}
	for _, p := range candidates {
		key := normPath(p)
		if committed[key] {
			continue
		}
		if live {
			stamp, ok := stamps[key]
			if !ok {
				continue // gone already
			}
			if !stamp.Before(oldest.Add(-markerSkew)) {
				continue // maybe a file of a step in flight
			}
		}
		if err := fsys.Remove(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // another cleanup or an expiry deleted it first
			}
			c.counters.OrphanFiles.Add(int64(len(deleted)))
			return deleted, fmt.Errorf("coldtier: delete orphan file %s of %s: %w", p, name, err)
		}
		deleted = append(deleted, p)
	}
	c.counters.OrphanFiles.Add(int64(len(deleted)))
	return deleted, nil
}

// committedSince is the files that fresh references and old does not
// know of: the metadata files, and the manifest lists, manifests and
// data files of the snapshots committed since old was loaded. (Files of
// the snapshots old has are not orphans of old's plan.)
func committedSince(fsys icebergio.IO, old, fresh *itable.Table) (map[string]bool, error) {
	files := map[string]bool{normPath(fresh.MetadataLocation()): true}
	for entry := range fresh.Metadata().PreviousFiles() {
		files[normPath(entry.MetadataFile)] = true
	}
	known := map[int64]bool{}
	for _, s := range old.Metadata().Snapshots() {
		known[s.SnapshotID] = true
	}
	for _, s := range fresh.Metadata().Snapshots() {
		if known[s.SnapshotID] {
			continue
		}
		files[normPath(s.ManifestList)] = true
		mans, err := s.Manifests(fsys)
		if err != nil {
			return nil, fmt.Errorf("snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range mans {
			files[normPath(m.FilePath())] = true
			if known[m.SnapshotID()] {
				continue // its files are referenced by a snapshot old has
			}
			for e, err := range m.Entries(fsys, false) {
				if err != nil {
					return nil, fmt.Errorf("manifest %s: %w", m.FilePath(), err)
				}
				files[normPath(e.DataFile().FilePath())] = true
			}
		}
	}
	return files, nil
}

// fileStamps is the stamp (modification time) of every file under
// location.
func fileStamps(fsys icebergio.IO, location string) (map[string]time.Time, error) {
	stamps := map[string]time.Time{}
	err := walkFiles(fsys, location, func(path string, info fs.FileInfo) {
		stamps[normPath(path)] = info.ModTime()
	})
	return stamps, err
}

// normPath is path as a local listing and the metadata both spell it: a
// local path without its file:// scheme.
func normPath(path string) string {
	if rest, ok := strings.CutPrefix(path, "file://"); ok {
		return filepath.Clean(rest)
	}
	if rest, ok := strings.CutPrefix(path, "file:"); ok {
		return filepath.Clean(rest)
	}
	if strings.HasPrefix(path, "/") {
		return filepath.Clean(path)
	}
	return path
}
