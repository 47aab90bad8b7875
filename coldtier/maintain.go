package coldtier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"github.com/google/uuid"

	coldcat "github.com/sluicedb/sluice/coldtier/catalog"
	"github.com/sluicedb/sluice/coldtier/coldread"
)

// Maintenance of a long-running Iceberg table (docs/cold-tier.md,
// "Maintenance"): every run of every node adds data files (one or more per
// day partition), a manifest and a snapshot, so a table that commits every
// few seconds collects small files, manifests and snapshots without bound.
// Maintain rewrites each day partition's small files into large ones,
// merges the manifests and expires old snapshots (deleting the files only
// they referenced), each step in its own atomic catalog commit; the orphan
// cleanup (DeleteOrphanFiles) deletes what a killed step left behind.

// maintenance is a Compactor's maintenance state: Maintain calls of one
// process run one at a time (compaction runs go on meanwhile), and their
// totals for /metrics.
type maintenance struct {
	mu sync.Mutex
	// marker names the pass's in-flight marker (inflight.go), rewritten
	// before each step writes files; stepStarted is when. REQUIRES: mu.
	marker      string
	stepStarted time.Time

	runs, filesRewritten, snapshotsExpired, filesDeleted atomic.Int64
	groupsMerged                                         atomic.Int64
}

// MaintainCounters are the totals of a Compactor's Maintain calls.
type MaintainCounters struct {
	Runs, FilesRewritten, SnapshotsExpired, FilesDeleted int64
	// GroupsMerged counts the groups the rewrite wrote in the table's
	// sort order by its k-way merge (the others went in file order).
	GroupsMerged int64
}

// MaintainCounters returns the totals of the Maintain calls so far.
func (c *Compactor) MaintainCounters() MaintainCounters {
	return MaintainCounters{Runs: c.maint.runs.Load(), FilesRewritten: c.maint.filesRewritten.Load(),
		SnapshotsExpired: c.maint.snapshotsExpired.Load(), FilesDeleted: c.maint.filesDeleted.Load(),
		GroupsMerged: c.maint.groupsMerged.Load()}
}

// Snapshot summary properties of a maintenance commit.
const (
	propRewrite = "sluice.rewrite" // the rewrite's id (a UUID), one per day partition group
)

// Defaults of MaintainOptions.
const (
	DefaultTargetFileBytes  = 128 << 20
	DefaultMinInputFiles    = 2
	DefaultKeepSnapshots    = 100
	DefaultSnapshotAge      = time.Hour
	DefaultMetadataVersions = 100
)

// MaintainOptions configure one Maintain call; zero fields take the
// defaults above.
type MaintainOptions struct {
	// TargetFileBytes is the size of the files a rewrite writes; a data
	// file under 3/4 of it is small, one over 9/5 of it is never rewritten.
	TargetFileBytes int64
	// MinInputFiles: a day partition is rewritten when it has at least
	// this many small files.
	MinInputFiles int
	// KeepSnapshots: the newest snapshots of the table's history that are
	// always kept.
	KeepSnapshots int
	// SnapshotAge: an older snapshot is kept while it was the table's
	// current one less than this long ago (a reader that planned on it
	// may still be reading its files).
	SnapshotAge time.Duration
	// MetadataVersions is how many earlier metadata files the table keeps
	// (write.metadata.previous-versions-max); older ones are deleted at
	// each commit (write.metadata.delete-after-commit.enabled).
	MetadataVersions int
	// NoRewrite, NoManifests, NoExpire skip a step.
	NoRewrite, NoManifests, NoExpire bool
}

func (o *MaintainOptions) defaults() {
	if o.TargetFileBytes <= 0 {
		o.TargetFileBytes = DefaultTargetFileBytes
	}
	if o.MinInputFiles <= 0 {
		o.MinInputFiles = DefaultMinInputFiles
	}
	if o.KeepSnapshots <= 0 {
		o.KeepSnapshots = DefaultKeepSnapshots
	}
	if o.SnapshotAge <= 0 {
		o.SnapshotAge = DefaultSnapshotAge
	}
	if o.MetadataVersions <= 0 {
		o.MetadataVersions = DefaultMetadataVersions
	}
}

// MaintainStats say what one Maintain call did.
type MaintainStats struct {
	// Partitions is the number of file groups (each within one day
	// partition) rewritten, each in its own replace commit.
	Partitions int
	// FilesRewritten were replaced by FilesWritten; RowsRewritten is
	// their rows, BytesRewritten and BytesWritten their sizes.
	FilesRewritten, FilesWritten int
	// PartitionsDeferred is the number of groups whose rewrite gave way
	// because another writer deleted rows of their files meanwhile; the
	// next pass rewrites them.
	PartitionsDeferred            int
	RowsRewritten                 int64
	BytesRewritten, BytesWritten  int64
	ManifestsMerged, ManifestsNew int
	// SnapshotsExpired were removed from the table's metadata;
	// FilesDeleted is what their removal deleted (data files, manifests,
	// manifest lists only they referenced).
	SnapshotsExpired, FilesDeleted int
	// Snapshots, DataFiles and Manifests are what the table (its current
	// snapshot) has at the end.
	Snapshots, DataFiles, Manifests int
}

// Maintain runs the table's maintenance now: the rewrite of small files,
// the manifest merge, the snapshot expiry, in that order. Each is one
// catalog commit (one per rewritten group), so a reader sees the table
// before or after it, never half of it; a process killed within a step
// leaves the table as before that commit, plus files no snapshot
// references, which the orphan cleanup deletes (DeleteOrphanFiles: its age
// must exceed a rewrite's duration too). Compaction runs of this and other
// nodes go on meanwhile: a commit that loses the race to one is redone on
// the fresh table with the files already written.
func (c *Compactor) Maintain(ctx context.Context, opts MaintainOptions) (MaintainStats, error) {
	opts.defaults()
	c.maint.mu.Lock()
	defer c.maint.mu.Unlock()
	var st MaintainStats
	name := strings.Join(c.ident, ".")
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return st, nil // nothing compacted yet
	}
	if err != nil {
		return st, fmt.Errorf("coldtier: load %s: %w", name, err)
	}
	c.maint.marker = "maintain-" + uuid.NewString()
	defer func(loaded *itable.Table) {
		// The pass's files are committed or abandoned now. A marker left
		// by a failed removal is honoured for markerBound, then ignored.
		_ = c.removeMarker(context.WithoutCancel(ctx), loaded, c.maint.marker)
	}(tbl)
	if !opts.NoRewrite {
		if tbl, err = c.rewrite(ctx, tbl, opts, &st); err != nil {
			return st, fmt.Errorf("coldtier: %s: rewrite small files: %w", name, err)
		}
	}
	if !opts.NoManifests {
		if tbl, err = c.mergeManifests(ctx, tbl, &st); err != nil {
			return st, fmt.Errorf("coldtier: %s: merge manifests: %w", name, err)
		}
	}
	if !opts.NoExpire {
		if tbl, err = c.expire(ctx, tbl, opts, &st); err != nil {
			return st, fmt.Errorf("coldtier: %s: expire snapshots: %w", name, err)
		}
	}
	st.Snapshots = len(tbl.Metadata().Snapshots())
	if snap := tbl.CurrentSnapshot(); snap != nil && snap.Summary != nil {
		st.DataFiles, _ = strconv.Atoi(snap.Summary.Properties["total-data-files"])
		if fs, err := tbl.FS(ctx); err == nil {
			if mans, err := snap.Manifests(fs); err == nil {
				st.Manifests = len(mans)
			}
		}
	}
	c.maint.runs.Add(1)
	return st, nil
}

// rewrite replaces, per day partition, the small data files with files of
// about opts.TargetFileBytes: iceberg-go's bin-pack planner picks the
// groups, the merge (maintain_merge.go) writes each group's rows in the
// table's sort order into the new files, and one replace snapshot per group
// deletes the old files and adds the new ones.
//
// The merge leaves out the rows the group's position delete files delete,
// and the replace snapshot drops the delete files that name only replaced
// files. A group the merge does not handle (equality deletes or deletion
// vectors, no sort order, files without field ids) is read by iceberg-go
// (deletes applied) and written in file order, each batch sorted by the table's sort order: a key's rows
// are then in every row group of the new file, and key-filtered reads
// prune fewer row groups than in a file one compaction run wrote
// (docs/cold-tier.md).
func (c *Compactor) rewrite(ctx context.Context, tbl *itable.Table, opts MaintainOptions, st *MaintainStats) (*itable.Table, error) {
	if tbl.CurrentSnapshot() == nil {
		return tbl, nil
	}
	scan := tbl.Scan()
	tasks, err := scan.PlanFiles(ctx)
	scan.Close()
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	// Every group's merge applies the delete files of this snapshot.
	planSeq := tbl.CurrentSnapshot().SequenceNumber
	cfg := compaction.DefaultConfig()
	cfg.TargetFileSizeBytes = opts.TargetFileBytes
	cfg.MinFileSizeBytes = opts.TargetFileBytes * 3 / 4
	cfg.MaxFileSizeBytes = opts.TargetFileBytes * 9 / 5
	cfg.MinInputFiles = uint(opts.MinInputFiles)
	plan, err := cfg.PlanCompaction(tasks)
	if err != nil {
		return nil, err
	}
	for _, g := range plan.Groups {
		if err := c.maintStep(ctx, tbl); err != nil {
			return nil, err
		}
		group := itable.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes}
		// The new files (up to target bytes) go up in small parts, few
		// at a time: the upload is what grows with the file.
		wtbl := itable.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), coldcat.LeanUploads(tbl.FS), c.cat)
		// The merge (maintain_merge.go) writes the group's rows in the
		// table's sort order, one page per column of each input at a time;
		// a group it cannot read (equality deletes or deletion vectors, no sort order, another
		// engine's types) is rewritten in file order by iceberg-go, one
		// file at a time, in batches of at most maxBatchRows rows with two
		// batches queued. Either way the memory is that of a compaction run
		// (plus the upload of a large file in parts), whatever the group's
		// size.
		res, err := c.mergeGroup(ctx, wtbl, group, opts.TargetFileBytes, c.rewriteDir())
		if errors.Is(err, errNoMerge) {
			res, err = itable.ExecuteCompactionGroup(ctx, wtbl, group,
				itable.WithCompactionTargetFileSize(opts.TargetFileBytes),
				itable.WithCompactionScanConcurrency(1),
				itable.WithCompactionArrowBatchSize(maxBatchRows),
				itable.WithCompactionRecordBatchBufferSize(2))
		} else if err == nil {
			c.maint.groupsMerged.Add(1)
		}
		if err == nil {
			// The delete files the new files make useless go in the same
			// commit; those that still apply to other files stay.
			res.SafePosDeletes, err = safeDeletes(ctx, wtbl, res)
		}
		if err != nil {
			c.removeFiles(ctx, tbl, res.NewDataFiles)
			return nil, fmt.Errorf("day partition %s: %w", g.PartitionKey, err)
		}
		if len(res.OldDataFiles) == 0 {
			continue
		}
		fault("maintain-after-upload")
		id := uuid.NewString()
		props := iceberg.Properties{propRewrite: id, propNode: c.cfg.Node}
		committed, err := c.commitRewrite(ctx, tbl, planSeq, res, props)
		if errors.Is(err, errRewriteStale) {
			// Another node rewrote or removed these files meanwhile, or
			// deleted rows of them: the files written here are not
			// needed (or would bring the rows back).
			c.removeFiles(ctx, tbl, res.NewDataFiles)
			if errors.Is(err, errRewriteDeleted) {
				st.PartitionsDeferred++
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("day partition %s: %w", g.PartitionKey, err)
		}
		tbl = committed
		st.Partitions++
		st.FilesRewritten += len(res.OldDataFiles)
		st.FilesWritten += len(res.NewDataFiles)
		st.BytesRewritten += res.BytesBefore
		st.BytesWritten += res.BytesAfter
		for _, df := range res.OldDataFiles {
			st.RowsRewritten += df.Count()
		}
		c.maint.filesRewritten.Add(int64(len(res.OldDataFiles)))
	}
	return tbl, nil
}

// rewriteDir is the local directory of a rewrite's temporary files (the
// copies of its input files and the merge's intermediate files), emptied
// when a group starts and when it ends: a pass killed meanwhile leaves it
// to the next one.
func (c *Compactor) rewriteDir() string {
	dir := c.cfg.StateDir
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "coldtier-rewrite-"+c.t.Name())
}

// expiryCommitted runs after an expiry's commit, before its deletion (a
// test deletes files there, as another node's orphan cleanup may).
var expiryCommitted = func() {}

// rewriteStaged runs after a rewrite's replace snapshot is staged, before
// its commit (a test commits another writer's run there).
var rewriteStaged = func() {}

// errRewriteStale: a file the rewrite replaces is no longer in the table,
// or rows of it were deleted since the rewrite read it (newDeletesFor).
var errRewriteStale = errors.New("a rewritten file is no longer in the table")

// errRewriteDeleted: another writer deleted rows of a file the rewrite
// replaces since the snapshot the rewrite read (a keyed table's run names
// the rows of an updated key by their position in the file). The new files
// hold those rows, and no delete names them there: committed, the replace
// would bring the rows back. It gives way, as Iceberg's RewriteFiles does
// (validateNoNewDeletesForDataFiles); the next pass rewrites the files with
// the deletes applied.
var errRewriteDeleted = fmt.Errorf("%w: rows of a rewritten file were deleted since the rewrite read it", errRewriteStale)

// commitRewrite stages res as one replace snapshot on the table as it is
// now (the merge took a while: tbl is older) and commits it; when another
// writer committed first, it stages the same files again on the fresh
// table.
//
// The commit pins main's head (Transaction.AssertRefSnapshotID), so
// iceberg-go does not replay the staged snapshot on a conflict: its replay
// rebuilds the manifest list on the new head but keeps the timestamp the
// snapshot was staged with, older than the snapshots committed meanwhile,
// and the snapshot log then goes back in time. Apache Iceberg's REST server
// refuses that once it exceeds a minute ("[BUG] Expected sorted snapshot
// log entries"), which a rewrite replayed over hundreds of manifests
// against writers committing every second reached. Staged again here, the
// snapshot is stamped after the head it is staged on.
//
// planSeq is the sequence number of the snapshot whose delete files the
// merge applied: a delete file committed after it that may name rows of a
// replaced file makes the rewrite give way (errRewriteDeleted). The check
// runs on the table the commit is pinned to, so a delete committed after
// it fails the commit and is seen at the next attempt.
func (c *Compactor) commitRewrite(ctx context.Context, tbl *itable.Table, planSeq int64, res itable.CompactionGroupResult, props iceberg.Properties) (*itable.Table, error) {
	if fresh, err := c.cat.LoadTable(ctx, c.ident); err == nil {
		tbl = fresh
	}
	for attempt := 1; ; attempt++ {
		deleted, err := newDeletesFor(ctx, tbl, planSeq, res.OldDataFiles)
		if err != nil {
			return nil, fmt.Errorf("look for deletes since the rewrite's snapshot: %w", err)
		}
		if deleted {
			return nil, errRewriteDeleted
		}
		tx := tbl.NewTransaction()
		if err := tx.AssertRefSnapshotID(""); err != nil {
			return nil, fmt.Errorf("pin the head: %w", err)
		}
		rw := tx.NewRewrite(props)
		rw.ApplyResult(res)
		if err := rw.Commit(ctx); err != nil {
			if !liveFiles(ctx, tbl, res.OldDataFiles) {
				return nil, errRewriteStale
			}
			return nil, fmt.Errorf("stage: %w", err)
		}
		hook(c.hooks.RewriteStaged, rewriteStaged)
		if err := c.maintDeadline(); err != nil {
			return nil, err
		}
		committed, err := tx.Commit(ctx)
		if err == nil {
			return committed, nil
		}
		if !conflict(err) || attempt >= maxCommitAttempts {
			// The commit may have happened all the same (iceberg-go:
			// any error but ErrCommitFailed leaves it unknown), or
			// iceberg-go's replay found a replaced file gone: look.
			if fresh, lerr := c.cat.LoadTable(ctx, c.ident); lerr == nil {
				if snapshotWith(fresh, propRewrite, props[propRewrite]) != nil {
					return fresh, nil
				}
				if !liveFiles(ctx, fresh, res.OldDataFiles) {
					return nil, errRewriteStale
				}
			}
			return nil, fmt.Errorf("commit: %w", err)
		}
		c.counters.CommitRetries.Add(1)
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
		if tbl, err = c.cat.LoadTable(ctx, c.ident); err != nil {
			return nil, fmt.Errorf("reload after conflict: %w", err)
		}
		if snapshotWith(tbl, propRewrite, props[propRewrite]) != nil {
			return tbl, nil // the conflicting commit was ours after all
		}
		if !liveFiles(ctx, tbl, res.OldDataFiles) {
			return nil, errRewriteStale
		}
	}
}

// newDeletesFor reports whether tbl's current snapshot holds a delete file
// with a data sequence number past since that may name rows of one of
// files: a position delete file that references one of them, or whose
// file_path bounds (when written) enclose one of their paths; any equality
// delete file (its rows are found by value, not by file). Manifests added
// at or before since are not read: their entries are that old too.
func newDeletesFor(ctx context.Context, tbl *itable.Table, since int64, files []iceberg.DataFile) (bool, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil || snap.SequenceNumber <= since || len(files) == 0 {
		return false, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return false, err
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return false, fmt.Errorf("manifest list %s: %w", snap.ManifestList, err)
	}
	paths := make(map[string]bool, len(files))
	for _, df := range files {
		paths[df.FilePath()] = true
	}
	for _, mf := range manifests {
		if mf.ManifestContent() != iceberg.ManifestContentDeletes || mf.SequenceNum() <= since {
			continue
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		for e, err := range mf.Entries(fs, true) {
			if err != nil {
				return false, fmt.Errorf("manifest %s: %w", mf.FilePath(), err)
			}
			df := e.DataFile()
			if e.SequenceNum() <= since || df.Count() == 0 {
				continue
			}
			switch df.ContentType() {
			case iceberg.EntryContentEqDeletes:
				return true, nil
			case iceberg.EntryContentPosDeletes:
			default:
				continue
			}
			if ref := df.ReferencedDataFile(); ref != nil && *ref != "" {
				if paths[*ref] {
					return true, nil
				}
				continue
			}
			lower, upper := df.LowerBoundValues(), df.UpperBoundValues()
			for p := range paths {
				if coldread.DeleteMayName(lower, upper, p) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// liveFiles reports whether every file of files is in tbl's current
// snapshot.
func liveFiles(ctx context.Context, tbl *itable.Table, files []iceberg.DataFile) bool {
	if tbl.CurrentSnapshot() == nil {
		return false
	}
	scan := tbl.Scan()
	defer scan.Close()
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return true // let the commit say what is wrong
	}
	live := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		live[t.File.FilePath()] = true
	}
	for _, df := range files {
		if !live[df.FilePath()] {
			return false
		}
	}
	return true
}

// removeFiles deletes files written by a rewrite that will not be
// committed (best effort: the orphan cleanup deletes what is left).
func (c *Compactor) removeFiles(ctx context.Context, tbl *itable.Table, files []iceberg.DataFile) {
	if len(files) == 0 {
		return
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return
	}
	for _, df := range files {
		fs.Remove(df.FilePath())
	}
}

// mergeManifests merges the current snapshot's small manifests (one per
// compaction run) into target-sized ones (iceberg-go's RewriteManifests,
// commit.manifest.target-size-bytes, 8 MiB by default) in one replace
// snapshot that changes no data file.
func (c *Compactor) mergeManifests(ctx context.Context, tbl *itable.Table, st *MaintainStats) (*itable.Table, error) {
	if err := c.maintStep(ctx, tbl); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		if tbl.CurrentSnapshot() == nil {
			return tbl, nil
		}
		tx := tbl.NewTransaction()
		// Pinned, as a rewrite is (commitRewrite): a conflict stages the
		// merge again on the fresh table, stamped after its head.
		if err := tx.AssertRefSnapshotID(""); err != nil {
			return nil, fmt.Errorf("pin the head: %w", err)
		}
		res, err := tx.RewriteManifests(ctx)
		if err != nil {
			return nil, err
		}
		if res.IsNoOp() {
			return tbl, nil
		}
		if err := c.maintDeadline(); err != nil {
			return nil, err
		}
		committed, err := tx.Commit(ctx)
		if err == nil {
			st.ManifestsMerged += len(res.RewrittenManifests)
			st.ManifestsNew += len(res.AddedManifests)
			return committed, nil
		}
		if !conflict(err) || attempt >= maxCommitAttempts {
			return nil, fmt.Errorf("commit: %w", err)
		}
		c.counters.CommitRetries.Add(1)
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
		if tbl, err = c.cat.LoadTable(ctx, c.ident); err != nil {
			return nil, fmt.Errorf("reload after conflict: %w", err)
		}
	}
}

// expire removes the snapshots of the main branch's history that no rule
// keeps, in one commit, then deletes the files only they referenced
// (iceberg-go's snapshot removal: data files, manifests, manifest lists
// that no kept snapshot references). Kept are:
//
//   - the newest opts.KeepSnapshots snapshots of the history;
//   - every snapshot that was the current one less than opts.SnapshotAge
//     ago (its successor is younger than that): a reader that planned on it
//     may still read its files. sluice's own query reads under the
//     compactor's read lock, and the deletion takes it exclusively;
//   - every node's newest compaction snapshot (sluice.run): a node killed
//     between its commit and its local step finds its run by that snapshot
//     when it restarts (Compactor.recover), however long it was down, and
//     a node runs nothing else before that;
//   - the snapshot of this node's recorded run in flight, if any;
//   - snapshots of other branches and tags (sluice writes only to main).
//
// The table also gets write.metadata.delete-after-commit.enabled and
// write.metadata.previous-versions-max = opts.MetadataVersions, so the
// metadata files stay bounded too.
func (c *Compactor) expire(ctx context.Context, tbl *itable.Table, opts MaintainOptions, st *MaintainStats) (*itable.Table, error) {
	if err := c.maintStep(ctx, tbl); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		head := tbl.CurrentSnapshot()
		if head == nil {
			return tbl, nil
		}
		ids := c.expirable(tbl, opts, time.Now())
		want := iceberg.Properties{
			itable.MetadataDeleteAfterCommitEnabledKey: "true",
			itable.MetadataPreviousVersionsMaxKey:      strconv.Itoa(opts.MetadataVersions),
		}
		stale := staleProps(tbl.Properties(), want)
		if len(ids) == 0 && len(stale) == 0 {
			return tbl, nil
		}
		var updates []itable.Update
		if len(stale) > 0 {
			updates = append(updates, itable.NewSetPropertiesUpdate(stale))
		}
		remove := itable.NewRemoveSnapshotsUpdate(ids, true)
		if len(ids) > 0 {
			updates = append(updates, remove)
		}
		headID := head.SnapshotID
		reqs := []itable.Requirement{itable.AssertTableUUID(tbl.Metadata().TableUUID()), itable.AssertRefSnapshotID(itable.MainBranch, &headID)}
		if err := c.maintDeadline(); err != nil {
			return nil, err
		}
		meta, loc, err := c.cat.CommitTable(ctx, c.ident, reqs, updates)
		if err != nil {
			if !conflict(err) || attempt >= maxCommitAttempts {
				return nil, fmt.Errorf("commit: %w", err)
			}
			c.counters.CommitRetries.Add(1)
			time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
			if tbl, err = c.cat.LoadTable(ctx, c.ident); err != nil {
				return nil, fmt.Errorf("reload after conflict: %w", err)
			}
			continue
		}
		post := itable.New(c.ident, meta, loc, tbl.FS, c.cat)
		st.SnapshotsExpired += len(ids)
		c.maint.snapshotsExpired.Add(int64(len(ids)))
		if len(ids) == 0 {
			return post, nil
		}
		fault("maintain-after-expire-commit")
		hook(c.hooks.ExpiryCommitted, expiryCommitted)
		// The files only the removed snapshots referenced go now; a query
		// of this process that planned on one of them holds the read lock
		// until it has read its files. A kill before or during the
		// deletion leaves unreferenced files for the orphan cleanup.
		deleted, err := c.deleteExpired(ctx, tbl, post, remove)
		st.FilesDeleted += deleted
		if err != nil {
			return post, fmt.Errorf("expired %d snapshots; deleting the files only they referenced: %w (the orphan cleanup deletes what is left)", len(ids), err)
		}
		return post, nil
	}
}

// deleteExpired runs the snapshot removal's file deletion (its
// PostCommit) under the exclusive lock and returns how many files it
// deleted.
func (c *Compactor) deleteExpired(ctx context.Context, pre, post *itable.Table, remove itable.Update) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n atomic.Int64
	fsys := func(ctx context.Context) (icebergio.IO, error) {
		fs, err := pre.FS(ctx)
		if err != nil {
			return nil, err
		}
		return countingIO{fs, &n}, nil
	}
	counted := itable.New(pre.Identifier(), pre.Metadata(), pre.MetadataLocation(), fsys, c.cat)
	err := remove.PostCommit(ctx, counted, post)
	c.maint.filesDeleted.Add(n.Load())
	return int(n.Load()), err
}

// countingIO counts the files it removes. It hides the wrapped IO's bulk
// deletion, so iceberg-go removes file by file.
//
// A file already gone counts as removed: once the expiry's commit is in,
// the files it deletes are referenced by no snapshot, so another node's
// orphan cleanup may delete them first (iceberg-go's S3 and local IO
// report a missing file, S3's NoSuchKey included, as fs.ErrNotExist).
type countingIO struct {
	icebergio.IO
	n *atomic.Int64
}

func (f countingIO) Remove(name string) error {
	err := f.IO.Remove(name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		f.n.Add(1)
		return nil
	}
	return err
}

// expirable lists the snapshots expire removes at now (see expire).
func (c *Compactor) expirable(tbl *itable.Table, opts MaintainOptions, now time.Time) []int64 {
	meta := tbl.Metadata()
	keep := map[int64]bool{}
	for name, ref := range meta.Refs() {
		keep[ref.SnapshotID] = true
		if name == itable.MainBranch {
			continue
		}
		for _, snap := range itable.AncestorsOf(ref.SnapshotID, meta.SnapshotByID) {
			keep[snap.SnapshotID] = true
		}
	}
	// The newest compaction snapshot of each node, and the run this node
	// has in flight.
	// (The snapshot list is in commit order; sequence numbers are all 0
	// in a format v1 table.)
	newest := map[string]itable.Snapshot{}
	for _, snap := range meta.Snapshots() {
		if snap.Summary == nil || snap.Summary.Properties[propRun] == "" {
			continue
		}
		node := snap.Summary.Properties[propNode]
		if cur, ok := newest[node]; !ok || snap.TimestampMs >= cur.TimestampMs {
			newest[node] = snap
		}
	}
	for _, snap := range newest {
		keep[snap.SnapshotID] = true
	}
	if run := c.pendingRun(); run != "" {
		if snap := snapshotWith(tbl, propRun, run); snap != nil {
			keep[snap.SnapshotID] = true
		}
	}
	var ids []int64
	cutoff := now.Add(-opts.SnapshotAge).UnixMilli()
	// The history, newest first: the snapshots in commit order (the
	// metadata's list), not the head's ancestry, which stops at the first
	// parent an earlier expiry removed. Each snapshot's successor is the
	// one before it in this list (it replaced it as the current one).
	history := slices.Clone(meta.Snapshots())
	slices.Reverse(history)
	for i, snap := range history {
		switch {
		case i < opts.KeepSnapshots:
		case history[i-1].TimestampMs >= cutoff:
		case keep[snap.SnapshotID]:
		default:
			ids = append(ids, snap.SnapshotID)
		}
	}
	return ids
}

// pendingRun is the id of this node's recorded run in flight ("" when
// none, or when the record cannot be read: recovery reports that).
func (c *Compactor) pendingRun() string {
	buf, err := os.ReadFile(c.pendingPath())
	if err != nil {
		return ""
	}
	var p pending
	if json.Unmarshal(buf, &p) != nil {
		return ""
	}
	return p.Run
}

// snapshotWith is tbl's snapshot whose summary has key = value, or nil.
func snapshotWith(tbl *itable.Table, key, value string) *itable.Snapshot {
	snaps := tbl.Metadata().Snapshots()
	for i := range snaps {
		if snaps[i].Summary != nil && snaps[i].Summary.Properties[key] == value {
			return &snaps[i]
		}
	}
	return nil
}

// maintStep (re)writes the pass's in-flight marker before a step writes
// its files: the files of the step before are committed or abandoned by
// then, so the marker need only cover this step's. REQUIRES: maint.mu.
func (c *Compactor) maintStep(ctx context.Context, tbl *itable.Table) error {
	started, err := c.writeMarker(ctx, tbl, c.maint.marker, "maintain")
	if err != nil {
		return err
	}
	c.maint.stepStarted = started
	return nil
}

// maintDeadline is ErrRunTooLong once the step has run for longer than
// MaxRunDuration: its commit would come after cleanups may stop honouring
// its marker. REQUIRES: maint.mu.
func (c *Compactor) maintDeadline() error {
	if time.Since(c.maint.stepStarted) > MaxRunDuration {
		return ErrRunTooLong
	}
	return nil
}
