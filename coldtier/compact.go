package coldtier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	itable "github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/sluicedb/sluice/table"
)

// Snapshot summary properties a run records with its commit. sluice.run is
// what recovery looks for; the others say what the snapshot holds.
const (
	propRun       = "sluice.run"       // the run's id (a UUID)
	propNode      = "sluice.node"      // Config.Node
	propWatermark = "sluice.watermark" // rows before it (unix ns) are compacted
	propMaxSeq    = "sluice.max-seq"   // store blocks with sequence <= it
	propRows      = "sluice.rows"      // rows in the snapshot's new files
)

// FaultEnv names a step at which a run stops for crash tests: the process
// prints "coldtier: fault <step>" on stderr and blocks, so the test can kill
// it exactly there. Steps: "after-upload" (files written, not committed)
// and "after-commit" (committed, the hot store not changed yet).
const FaultEnv = "SLUICE_COLDTIER_FAULT"

// Options of one run.
type Options struct {
	// Remove deletes the compacted blocks from the hot store after the
	// commit. Without it the rows stay and the table's compacted-through
	// watermark moves, so each row is compacted once. With Continuous it
	// is the hot store's retention: committed blocks are deleted once
	// their time bucket ends before the watermark.
	Remove bool
	// Continuous commits by sequence instead of by time: a run commits
	// every block stored before it started that no run committed yet,
	// whatever the rows' event time, and moves the table's
	// committed-sequence mark (table.CommittedSeq) past them. The
	// watermark then only says which committed blocks Remove deletes.
	Continuous bool
}

// Stats describe one run.
type Stats struct {
	Rows          int64
	Bytes         int64     // Parquet bytes uploaded (committed files)
	Files         int64     // data files committed
	Watermark     time.Time // rows before it were compacted
	SnapshotID    int64     // the committed snapshot (0: nothing to commit)
	Recovered     bool      // this run finished a crashed run's local step first
	RecoveredRows int64     // rows of that crashed run's snapshot
	// Skipped counts the rows left out because another store committed
	// their source offsets (claims.go).
	Skipped int64
	// Deleted counts the rows of the Iceberg table the run's commit
	// deleted (position deletes, deletes.go).
	Deleted int64
	// DeleteFiles counts the position delete files the run's commit
	// added: every query reads them until maintenance applies them.
	DeleteFiles int64
}

// Counters are a Compactor's running totals, for /metrics.
type Counters struct {
	Runs, Rows, BytesUploaded, Files, CommitRetries, Recoveries atomic.Int64
	// OrphanFiles counts files deleted by DeleteOrphanFiles.
	OrphanFiles atomic.Int64
	// Skipped counts the rows runs left out because another store had
	// committed their source offsets (claims.go).
	Skipped atomic.Int64
	// LastWatermark is the unix ns of the newest watermark committed.
	LastWatermark atomic.Int64
}

// Compactor moves one sluice table's old rows into its Iceberg table.
type Compactor struct {
	cfg   Config
	cat   catalog.Catalog
	t     *table.Table
	ident itable.Identifier
	// runMu orders runs. mu keeps queries (RLock) out of the window
	// between a commit and the hot store's removal (both tiers hold the
	// rows then); a run holds it only for that window, not while it reads
	// and uploads.
	runMu    sync.Mutex
	mu       sync.RWMutex
	counters *Counters
	// writer names the store in the claims of source offsets (claims.go).
	writer string
	maint  maintenance // Maintain (maintain.go)
	// runDeletes, when set, names the rows each run deletes in its commit
	// (deletes.go): the older rows of the keys the run writes.
	runDeletes deleteSource
	// keyIdx is the table's cold key index as the last keyed run left it
	// (keyindex.go). REQUIRES: runMu held.
	keyIdx *keyIndex
	// keyed: the table has a primary key, and each run deletes the
	// Iceberg rows of the keys it changes (deletes.go).
	keyed bool
	aws   awsConfigs // the S3 file IO's AWS config (awslog.go)
	hooks stepHooks  // a test's (hooks.go)
}

// Open opens the catalog of t's cold tier (the Iceberg table is created by
// the first run) and finishes a run that crashed after its commit.
func Open(ctx context.Context, cfg Config, t *table.Table) (*Compactor, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	counters := &Counters{}
	cat, err := openCatalog(ctx, &cfg, counters)
	if err != nil {
		return nil, err
	}
	writer, err := t.Store().WriterID()
	if err != nil {
		if cl, ok := cat.(interface{ Close() error }); ok {
			cl.Close()
		}
		return nil, err
	}
	c := &Compactor{cfg: cfg, cat: cat, t: t, ident: itable.Identifier{cfg.Catalog.Namespace, t.Name()}, counters: counters, writer: writer}
	if len(t.PrimaryKey()) > 0 {
		// The runs need the store's deletes: recorded from now on, before
		// anything is ingested.
		c.keyed = true
		t.KeepDeleteLog()
	}
	ctx = c.withAWS(ctx)
	// A run that crashed after its commit left its rows in both tiers:
	// finish it before anything queries them.
	var st Stats
	if err := c.recover(ctx, &st); err != nil {
		c.Close()
		return nil, err
	}
	// No step of this writer is in flight now: the in-flight markers it
	// left are of steps a kill interrupted. Left there, they would only
	// delay the orphan cleanup (markerBound), so failing to remove them
	// does not keep the node from starting.
	if tbl, err := c.cat.LoadTable(ctx, c.ident); err == nil {
		_ = c.removeOwnMarkers(ctx, tbl, "")
	}
	return c, nil
}

// Counters returns the running totals.
func (c *Compactor) Counters() *Counters { return c.counters }

// Identifier is the Iceberg table's namespace and name.
func (c *Compactor) Identifier() []string { return c.ident }

// Close releases the catalog.
func (c *Compactor) Close() error {
	if cl, ok := c.cat.(interface{ Close() error }); ok {
		return cl.Close()
	}
	return nil
}

// pending is the record of a run between its start and the end of its
// local step, kept in Config.StateDir (written and fsynced before any file
// is uploaded).
type pending struct {
	Run       string `json:"run"`
	Watermark int64  `json:"watermark"` // unix ns
	MaxSeq    uint64 `json:"max_seq"`
	Remove    bool   `json:"remove"`
	// Continuous: the run committed the blocks with sequence <= MaxSeq
	// (from the committed-sequence mark on); its local step moves the mark
	// to MaxSeq+1 and, with Remove, deletes the committed blocks before
	// Watermark.
	Continuous bool `json:"continuous,omitempty"`
}

func (c *Compactor) pendingPath() string {
	return filepath.Join(c.cfg.StateDir, "coldtier-pending-"+c.t.Name()+".json")
}

// Compact moves the rows of the table before watermark (rounded down to the
// table's block span) into the Iceberg table, in this order:
//
//  1. finish a crashed run if its record is still there: if its snapshot
//     (sluice.run = its id) is in the Iceberg table, do its local step
//     (remove its blocks, move the watermark); if not, drop its in-flight
//     marker and its record (the files it may have uploaded are orphans no
//     snapshot references);
//  2. fix the run: its watermark and (with Remove) the highest sequence of
//     the blocks before it, and record both in the state dir (fsynced);
//     then write the run's in-flight marker to the warehouse, which keeps
//     every orphan cleanup off its files until step 5 (inflight.go);
//  3. evolve the Iceberg schema if the sluice schema gained columns;
//  4. stream the rows into Parquet files (day partitions) uploaded by
//     iceberg-go, then commit one snapshot carrying the run's id and
//     watermark (a conflict with another writer is retried by iceberg-go:
//     reload, re-validate, rebuild the manifest list);
//  5. the local step: with Remove, delete exactly the blocks read (those
//     before the watermark with sequence <= the recorded one; blocks written
//     meanwhile stay for the next run); record the watermark in the table;
//     remove the run's marker, then its record.
//
// A kill at any point leaves either no snapshot (rows still in the store,
// redone next run) or a snapshot plus a record that step 1 finishes, so
// every row ends up exactly once in the Iceberg table or the store.
func (c *Compactor) Compact(ctx context.Context, watermark time.Time, opts Options) (Stats, error) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	var st Stats
	if err := c.recover(ctx, &st); err != nil {
		return st, err
	}
	span := c.t.BlockSpan()
	wm := time.Unix(0, floorNs(watermark.UnixNano(), int64(span))).UTC()
	st.Watermark = wm
	// Blocks below the committed-sequence mark are in the Iceberg table
	// already (committed by a continuous run).
	mark, err := c.t.CommittedSeq()
	if err != nil {
		return st, err
	}
	if opts.Continuous {
		return c.compactSeqs(ctx, wm, mark, opts, st)
	}
	if c.keyed {
		return st, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), errKeyedTimeMode)
	}
	var from time.Time
	if !opts.Remove {
		from = c.t.CompactedThrough()
	}
	if !from.IsZero() && !from.Before(wm) {
		return st, nil
	}
	// The blocks this run reads are deleted at its end: keep them from
	// filling the store's block cache meanwhile.
	defer c.t.ShrinkCache(runCacheBytes)()
	first, maxSeq, blocks, err := c.t.BlockRange(ctx, wm)
	if err != nil {
		return st, err
	}
	if blocks == 0 { // no block before the watermark
		return st, c.t.SetCompactedThrough(ctx, wm)
	}
	// With Remove the run reads (and later deletes) exactly the blocks with
	// sequence <= maxSeq; in keep mode the watermark alone says what is
	// done and every block in range is read.
	sel := rowSel{seqFrom: mark}
	if opts.Remove {
		sel.seqLimit = maxSeq + 1
	}
	from = later(from, first)
	p := pending{Run: uuid.NewString(), Watermark: wm.UnixNano(), MaxSeq: maxSeq, Remove: opts.Remove}
	return c.run(ctx, p, from, wm, sel, st)
}

// compactSeqs is Compact with Options.Continuous: it commits the blocks
// with a sequence from mark up to the last one handed out when it starts,
// whatever their time, then moves the mark past them and (with Remove)
// deletes the committed blocks before wm.
func (c *Compactor) compactSeqs(ctx context.Context, wm time.Time, mark uint64, opts Options, st Stats) (Stats, error) {
	st.Watermark = time.Now().UTC() // what is committed: everything stored before now
	first, last, limit, blocks, err := c.t.SeqRange(ctx, mark)
	if err != nil {
		return st, err
	}
	if blocks == 0 && c.keyed {
		// No rows, but maybe deletes: those commit too.
		var deletes bool
		err := c.t.DeletedKeys(ctx, mark, limit, func([]any, table.Position) error { deletes = true; return errStop })
		if err != nil && !errors.Is(err, errStop) {
			return st, err
		}
		if deletes {
			// A day's start for both ends: no day to write.
			first = time.Unix(0, floorNs(time.Now().UnixNano(), int64(24*time.Hour))).UTC()
			last, blocks = first, -1
		}
	}
	if blocks == 0 {
		return st, c.retain(ctx, wm, mark, opts.Remove)
	}
	p := pending{Run: uuid.NewString(), Watermark: wm.UnixNano(), MaxSeq: limit - 1, Remove: opts.Remove, Continuous: true}
	return c.run(ctx, p, first, last, rowSel{seqFrom: mark, seqLimit: limit}, st)
}

// retain is the hot store's retention of a continuous table: with remove,
// it deletes the committed blocks (sequence below mark) whose time bucket
// ends before wm. It is idempotent.
func (c *Compactor) retain(ctx context.Context, wm time.Time, mark uint64, remove bool) error {
	if !remove || mark == 0 {
		return nil
	}
	if _, err := c.t.DeleteBlocks(ctx, wm, mark-1); err != nil {
		return fmt.Errorf("coldtier: remove committed rows of %s: %w", c.t.Name(), err)
	}
	if c.keyed {
		// A key whose row was in a deleted block still points there, and
		// its next change marks that row dead: such marks go too.
		if _, err := c.t.DeleteMarksBefore(ctx, wm, mark-1); err != nil {
			return fmt.Errorf("coldtier: remove committed rows of %s: %w", c.t.Name(), err)
		}
	}
	return nil
}

// runStaged runs after a run's files are uploaded and staged, before its
// commit (tests run another writer's commit or cleanup there).
var runStaged = func() {}

// errRewrite: another writer committed, since the run read the claims,
// offsets of a batch the run wrote; its files must be written again.
var errRewrite = errors.New("another writer claimed offsets this run wrote")

// maxRewrites bounds how often a run writes its files again after
// errRewrite (each time another writer committed overlapping offsets
// first: two nodes that both hold a message and commit at once).
const maxRewrites = 5

// run is Compact from the run's record on: it records p, writes the rows
// of [from, to) that sel selects, commits them with their claims, and does
// the local step.
func (c *Compactor) run(ctx context.Context, p pending, from, to time.Time, sel rowSel, st Stats) (Stats, error) {
	cols := c.t.Schema()
	written := visible(cols)
	if c.keyed && hasSourceColumns(cols) {
		// A keyed table's rows carry their source position into Iceberg:
		// the cold key index orders two rows of a key by it, since the
		// later commit (another node's, after a rebalance) need not be the
		// later change (docs/upserts.md, "Across nodes").
		written = append(written, sourceColumns(cols)...)
	}
	for attempt := 0; ; attempt++ {
		tx, tbl, started, err := c.begin(ctx, p, written)
		if err != nil {
			return st, err
		}
		// Past it the cleanups no longer honour the run's marker for sure
		// (inflight.go): the run abandons its files rather than commit.
		deadline := started.Add(MaxRunDuration)
		if hasSourceColumns(cols) {
			// Skip what other writers committed, and commit only if no
			// one committed anything meanwhile (commit then decides).
			known, err := readClaims(tbl.Properties())
			if err != nil {
				return st, err
			}
			sel.claims = newRunClaims(c.writer, known)
			if err := tx.AssertRefSnapshotID(""); err != nil {
				return st, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), err)
			}
		}
		props := iceberg.Properties{
			propRun: p.Run, propNode: c.cfg.Node, propWatermark: strconv.FormatInt(p.Watermark, 10),
			propMaxSeq: strconv.FormatUint(p.MaxSeq, 10),
		}
		st.Rows = 0
		var rk *runKeys
		if c.keyed && c.runDeletes == nil {
			rk = newRunKeys(c.t.PrimaryKey(), written)
			if hasSourceColumns(written) {
				// The rows of keys another node committed a later change
				// of are left out (addRows): the index at this attempt's
				// snapshot, which the commit pins.
				if rk.table, err = c.keyIndexAt(ctx, tbl, c.t.PrimaryKey()); err != nil {
					return st, fmt.Errorf("coldtier: table %s: key index: %w", c.t.Name(), err)
				}
			}
			sel.keys = rk
		}
		files, err := c.writeFiles(ctx, tx, written, from, to, sel, &st)
		if err != nil {
			return st, err
		}
		// The rows this run's rows replace, deleted in the same commit.
		var refs []rowRef
		var deletes []iceberg.DataFile
		if c.runDeletes != nil || rk != nil {
			if rk != nil {
				refs, err = c.runKeyedDeletes(ctx, tbl, rk, sel)
			} else {
				refs, err = c.runDeletes(ctx, tbl)
			}
			if err != nil {
				return st, fmt.Errorf("coldtier: table %s: rows to delete: %w", c.t.Name(), err)
			}
			refs = uniqueRefs(refs)
			if deletes, err = writeDeletes(ctx, tbl, refs); err != nil {
				return st, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), err)
			}
		}
		if sel.claims != nil && st.Rows > 0 {
			now, _ := readClaims(tbl.Properties())
			update, _ := sel.claims.update(now)
			if err := tx.SetProperties(update); err != nil {
				return st, fmt.Errorf("coldtier: table %s: claims: %w", c.t.Name(), err)
			}
		}
		if len(deletes) > 0 && sel.claims == nil {
			// The positions name rows of the table as loaded: any commit
			// meanwhile comes back to commit, which checks they still do.
			if err := tx.AssertRefSnapshotID(""); err != nil {
				return st, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), err)
			}
		}
		if err := stageFiles(ctx, tx, files, deletes, props); err != nil {
			return st, fmt.Errorf("coldtier: table %s: stage files: %w", c.t.Name(), err)
		}
		fault("after-upload")
		hook(c.hooks.RunStaged, runStaged)
		if st.Rows == 0 && len(deletes) == 0 {
			// Nothing to commit: no snapshot, only the local step (nothing
			// was read that is not in the Iceberg table already: blocks
			// without rows in range, or rows other writers committed).
			if sel.claims != nil {
				st.Skipped = sel.claims.skipped
				c.counters.Skipped.Add(st.Skipped)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			return st, c.finish(ctx, tbl, p)
		}
		c.mu.Lock()
		committed, err := c.commit(ctx, tx, written, props, files, stagedDeletes{files: deletes, refs: refs}, sel.claims, deadline)
		if errors.Is(err, errRewrite) && attempt < maxRewrites {
			c.mu.Unlock()
			c.counters.CommitRetries.Add(1)
			continue // the uploaded files are orphans now
		}
		defer c.mu.Unlock()
		if err != nil {
			return st, fmt.Errorf("coldtier: table %s: commit: %w", c.t.Name(), err)
		}
		fault("after-commit")
		if sel.claims != nil {
			st.Skipped = sel.claims.skipped
			c.counters.Skipped.Add(st.Skipped)
		}
		st.Deleted = int64(len(refs))
		c.account(&st, committed, p.Run)
		return st, c.finish(ctx, committed, p)
	}
}

// begin is steps 2 and 3 of Compact: it loads (or creates) the Iceberg
// table, records the run p in the state dir (fsynced), writes its
// in-flight marker (inflight.go) and opens the run's transaction with the
// schema evolved to cols and the writer properties brought up to date. It
// returns when the marker was written.
func (c *Compactor) begin(ctx context.Context, p pending, cols []table.Column) (*itable.Transaction, *itable.Table, time.Time, error) {
	tx, tbl, err := c.beginTx(ctx, p, cols)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	started, err := c.writeMarker(ctx, tbl, p.Run, "run")
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	return tx, tbl, started, nil
}

func (c *Compactor) beginTx(ctx context.Context, p pending, cols []table.Column) (*itable.Transaction, *itable.Table, error) {
	schema, err := newSchema(cols)
	if err != nil {
		return nil, nil, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), err)
	}
	sortKey := c.t.HashBy()
	if c.cfg.Unsorted {
		sortKey = ""
	}
	tbl, err := loadOrCreate(ctx, c.cat, &c.cfg, c.t.Name(), schema, c.t.SortBy(), sortKey)
	if err != nil {
		return nil, nil, err
	}
	if err := writeFileSync(c.pendingPath(), p); err != nil {
		return nil, nil, err
	}
	tx := tbl.NewTransaction()
	if _, err := evolve(tx, tbl.Schema(), cols); err != nil {
		return nil, nil, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), err)
	}
	// The writer settings come from the table's properties: a table
	// created by an older version, or before row_group_rows changed, gets
	// the current ones in this run's commit.
	if stale := staleProps(tbl.Properties(), writeProps(c.cfg.RowGroupRows)); len(stale) > 0 {
		if err := tx.SetProperties(stale); err != nil {
			return nil, nil, fmt.Errorf("coldtier: table %s: writer properties: %w", c.t.Name(), err)
		}
	}
	return tx, tbl, nil
}

// writeFiles is step 4 of Compact up to the commit: it writes the rows in
// [from, wm) of the blocks sel selects
// into Parquet files of the staged table, adding the rows to st.Rows.
//
// The run's files are written day by day (one day partition each) with
// iceberg-go's clustered writer: one Parquet writer open per day, fed in
// order, so a file is sorted by key across its row groups (the store is
// read in key order) and the memory of a day is two batches and one row
// group, not one per fanout worker and per buffered batch. Up to
// dayWorkers days are written at once, each by its own reader and
// writer (Parquet encoding is single-threaded per file: days are the unit
// that spreads a run over the cores). The files are staged as one
// snapshot, in day order, and committed by the caller.
func (c *Compactor) writeFiles(ctx context.Context, tx *itable.Transaction, cols []table.Column, from, wm time.Time, sel rowSel, st *Stats) ([]iceberg.DataFile, error) {
	staged, err := tx.StagedTable()
	if err != nil {
		return nil, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), err)
	}
	type dayRange struct{ lo, hi time.Time }
	var days []dayRange
	for day := floorNs(from.UnixNano(), int64(24*time.Hour)); day < wm.UnixNano(); day += int64(24 * time.Hour) {
		days = append(days, dayRange{later(from, time.Unix(0, day).UTC()), time.Unix(0, min(day+int64(24*time.Hour), wm.UnixNano())).UTC()})
	}
	procs := runtime.GOMAXPROCS(0)
	workers := min(procs, len(days), maxDayWorkers)
	// A run of one day decodes the store's blocks on workers; days
	// written at once decode theirs inline: the days use the cores, and
	// the blocks each decoder holds would multiply by the days.
	decoders := 1
	if workers <= 1 {
		decoders = min(procs, maxDecoders)
	}
	// The days at once share the batch memory of one: each reader's
	// batches are 1/workers of the size (the Arrow batches, iceberg-go's
	// copy of each and the GC's headroom over them are most of a day
	// writer's memory).
	batchRows := min(c.cfg.RowGroupRows, maxBatchRows)
	batchRows = min(batchRows, max(batchRows/max(workers, 1), minBatchRows))
	// The day writers write the files themselves (daywriter.go), unless
	// the table has settings only iceberg-go's writer follows (nil).
	plan, err := newDayPlan(ctx, staged.Table, cols, c.t.SortBy(), c.t.HashBy(), !c.cfg.Unsorted)
	if err != nil {
		return nil, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), err)
	}
	if workers <= 1 {
		var files []iceberg.DataFile
		for _, d := range days {
			if files, err = c.writeDay(ctx, staged.Table, plan, cols, d.lo, d.hi, sel, batchRows, decoders, files, st); err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	sel.claimsMu = &sync.Mutex{}
	type dayResult struct {
		files []iceberg.DataFile
		st    Stats
		err   error
	}
	results := make([]dayResult, len(days))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res := &results[i]
				res.files, res.err = c.writeDay(ctx, staged.Table, plan, cols, days[i].lo, days[i].hi, sel, batchRows, decoders, nil, &res.st)
				if res.err != nil {
					cancel() // the other days are wasted work now
				}
			}
		}()
	}
feed:
	for i := range days {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	var files []iceberg.DataFile
	for _, res := range results {
		if res.err != nil && !errors.Is(res.err, context.Canceled) {
			return nil, res.err
		}
	}
	for _, res := range results {
		if res.err != nil {
			return nil, res.err
		}
		files = append(files, res.files...)
		st.Rows += res.st.Rows
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return files, nil
}

// maxDayWorkers bounds the days a run writes at once: each holds two Arrow
// batches, a row group's pages, its decoded blocks and its file's upload
// buffer (up to targetFileBytes), so this bounds the run's memory
// whatever the cores (docs/cold-tier.md, "Compaction on many cores": 2
// days at GOMAXPROCS 8 peaked at 202-217 MB VmHWM for 2M rows on the
// loaded 2-core machine, 3 days at 224-250 MB, too close to the 256 MB
// bound; 2 days peaked at 248-264 MB before the day writers and the
// bounded zstd encoders).
const maxDayWorkers = 2

// maxDecoders bounds the store blocks one day's reader decodes at once.
const maxDecoders = 2

// writeDay writes the rows in [lo, hi) (within one day) to files of tbl,
// appending them to files and adding the rows to st.Rows: with plan, by
// a day writer; without, by iceberg-go's clustered writer.
func (c *Compactor) writeDay(ctx context.Context, tbl *itable.Table, plan *dayPlan, cols []table.Column, lo, hi time.Time, sel rowSel, batchRows, decoders int, files []iceberg.DataFile, st *Stats) ([]iceberg.DataFile, error) {
	if plan != nil {
		return c.writeDayFiles(ctx, plan, cols, lo, hi, sel, batchRows, decoders, files, st)
	}
	rdr := newRowReader(ctx, c.t, cols, lo, hi, sel, batchRows, decoders, !c.cfg.Unsorted)
	defer rdr.Release()
	if !rdr.Empty() {
		for df, err := range itable.WriteRecords(ctx, tbl, rdr.Schema(), handOver(rdr), itable.WithClusteredWrite()) {
			if err != nil {
				return nil, fmt.Errorf("coldtier: table %s: write files: %w", c.t.Name(), err)
			}
			files = append(files, df)
		}
		st.Rows += rdr.rows.Load()
	}
	if err := rdr.Err(); err != nil {
		return nil, fmt.Errorf("coldtier: table %s: read rows: %w", c.t.Name(), err)
	}
	return files, nil
}

// writeDayFiles is writeDay with a day writer: each batch is written
// into the day's open file as it comes, on this goroutine, while the
// reader builds the next.
func (c *Compactor) writeDayFiles(ctx context.Context, plan *dayPlan, cols []table.Column, lo, hi time.Time, sel rowSel, batchRows, decoders int, files []iceberg.DataFile, st *Stats) ([]iceberg.DataFile, error) {
	rdr := newRowReaderSchema(ctx, c.t, cols, plan.arrow, lo, hi, sel, batchRows, decoders, !c.cfg.Unsorted)
	defer rdr.Release()
	day := dayIndex(lo.UnixNano())
	w, err := plan.newDayWriter(day, int(day))
	if err != nil {
		return nil, fmt.Errorf("coldtier: table %s: %w", c.t.Name(), err)
	}
	defer w.abort()
	for rdr.Next() {
		if files, err = w.write(rdr.RecordBatch(), files); err != nil {
			return nil, fmt.Errorf("coldtier: table %s: write files: %w", c.t.Name(), err)
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, fmt.Errorf("coldtier: table %s: read rows: %w", c.t.Name(), err)
	}
	if files, err = w.close(files); err != nil {
		return nil, fmt.Errorf("coldtier: table %s: write files: %w", c.t.Name(), err)
	}
	st.Rows += rdr.rows.Load()
	return files, nil
}

// account adds what run's snapshot added (files, bytes) to st and the
// run to the counters.
func (c *Compactor) account(st *Stats, committed *itable.Table, run string) {
	if snap := committed.CurrentSnapshot(); snap != nil {
		st.SnapshotID = snap.SnapshotID
		for _, s := range committed.Metadata().Snapshots() {
			if s.Summary != nil && s.Summary.Properties[propRun] == run {
				b, _ := strconv.ParseInt(s.Summary.Properties["added-files-size"], 10, 64)
				f, _ := strconv.ParseInt(s.Summary.Properties["added-data-files"], 10, 64)
				d, _ := strconv.ParseInt(s.Summary.Properties["added-delete-files"], 10, 64)
				st.Bytes += b
				st.Files += f
				st.DeleteFiles += d
			}
		}
	}
	c.counters.Runs.Add(1)
	c.counters.Rows.Add(st.Rows)
	c.counters.BytesUploaded.Add(st.Bytes)
	c.counters.Files.Add(st.Files)
	c.counters.LastWatermark.Store(st.Watermark.UnixNano())
}

// recover finishes or drops a crashed run's record (step 1 of Compact).
func (c *Compactor) recover(ctx context.Context, st *Stats) error {
	var p pending
	buf, err := os.ReadFile(c.pendingPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("coldtier: read run record: %w", err)
	}
	if err := json.Unmarshal(buf, &p); err != nil {
		return fmt.Errorf("coldtier: run record %s: %w", c.pendingPath(), err)
	}
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return removeSync(c.pendingPath())
	}
	if err != nil {
		return fmt.Errorf("coldtier: recover run %s: %w", p.Run, err)
	}
	for _, snap := range tbl.Metadata().Snapshots() {
		if snap.Summary != nil && snap.Summary.Properties[propRun] == p.Run {
			st.Recovered = true
			st.RecoveredRows, _ = strconv.ParseInt(snap.Summary.Properties["added-records"], 10, 64)
			c.counters.Recoveries.Add(1)
			c.counters.LastWatermark.Store(p.Watermark)
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.finish(ctx, tbl, p)
		}
	}
	// Not committed: the rows are all still in the store, the files it
	// uploaded are orphans.
	return c.endRun(ctx, tbl, p)
}

// endRun ends the run p once its files' fate is decided (committed, or
// abandoned): its in-flight marker goes, then its record. A kill between
// the two leaves the record, whose recovery decides the same again.
func (c *Compactor) endRun(ctx context.Context, tbl *itable.Table, p pending) error {
	hook(c.hooks.MarkerKept, markerKept)
	if err := c.removeMarker(ctx, tbl, p.Run); err != nil {
		return err
	}
	return removeSync(c.pendingPath())
}

// finish is the local step of a committed run (tbl is the Iceberg table
// as loaded at or after the commit).
func (c *Compactor) finish(ctx context.Context, tbl *itable.Table, p pending) error {
	wm := time.Unix(0, p.Watermark).UTC()
	if p.Continuous {
		mark, err := c.t.CommittedSeq()
		if err != nil {
			return err
		}
		if mark <= p.MaxSeq {
			if mark, err = p.MaxSeq+1, c.t.SetCommittedSeq(ctx, p.MaxSeq+1); err != nil {
				return err
			}
		}
		// The deletes the run committed are in the Iceberg table now; a
		// kill before this leaves them below the mark, where no reader
		// looks, until the next run's local step.
		if err := c.t.ClearDeletesBelow(ctx, mark); err != nil {
			return err
		}
		if err := c.retain(ctx, wm, mark, p.Remove); err != nil {
			return err
		}
		return c.endRun(ctx, tbl, p)
	}
	if p.Remove {
		if _, err := c.t.DeleteBlocks(ctx, wm, p.MaxSeq); err != nil {
			return fmt.Errorf("coldtier: remove compacted rows of %s: %w", c.t.Name(), err)
		}
	}
	if c.t.CompactedThrough().Before(wm) {
		if err := c.t.SetCompactedThrough(ctx, wm); err != nil {
			return err
		}
	}
	return c.endRun(ctx, tbl, p)
}

// maxBatchRows bounds the rows of the Arrow batches a run streams into the
// Parquet writer, which appends them to its row group until the row group
// has row_group_rows rows: a run holds two such batches (rowReader), so
// its memory does not grow with row_group_rows beyond the row group's
// encoded (compressed) pages.
const maxBatchRows = 1 << 15

// minBatchRows bounds the batches from below when several days are
// written at once (their fixed per-batch costs: iceberg-go's partition
// computation and copy).
const minBatchRows = 1 << 12

// runCacheBytes is the store's block cache while a run reads and deletes
// (table.ShrinkCache).
const runCacheBytes = 4 << 20

// Parquet writer settings, as Iceberg table properties (iceberg-go reads
// them when it writes a file). They bound what the writer holds besides
// the Arrow batches:
//
//   - arrow-go compresses each page with a pooled zstd encoder; a page
//     larger than zstd's 128 KiB block makes the encoder allocate a
//     window history of 16 MiB (8 MiB window + 8 MiB), kept with the
//     pooled encoder, and the pool holds one per P: 32 MiB of the 50-60
//     MiB of live heap of a run measured with iceberg-go's defaults (1 MiB
//     pages of up to 20000 rows, 2 MiB dictionaries). Pages of at most
//     pageBytes plus one write batch of pageRows values, and dictionaries
//     of at most dictBytes plus one batch, stay under 128 KiB for values of
//     up to ~30 bytes, so the encoder needs no history at all (a larger
//     page still compresses, with the history).
//   - a column whose distinct values pass dictBytes is written plain
//     (zstd then does what the dictionary would), so dictionaries and
//     their hash tables stay small.
//   - the S3 upload (AWS SDK's transfer manager, under gocloud) reads a
//     file of up to 16 MiB into one buffer and sends it in one PUT; a
//     larger file goes in 8 MiB parts, up to 6 buffers of 8 MiB at once
//     besides the first 16 MiB read. A day of 6M rows (one 24 MB file)
//     peaked at 160 MB of anonymous memory; files of at most
//     targetFileBytes (iceberg-go starts a new file of the day's partition
//     when one passes it, at a row group's end) keep every upload to one
//     buffer.
//
// docs/cold-tier.md gives the figures (peak RSS, bytes per row, speed). A
// run whose commit was redone after a conflict commits the files without
// the property update; the next run stages it again.
const (
	targetFileBytes = 12 << 20
	pageBytes       = 64 << 10
	pageRows        = 2048
	dictBytes       = 64 << 10
)

// writeProps are the table properties that set the Parquet writer.
func writeProps(rowGroupRows int) iceberg.Properties {
	return iceberg.Properties{
		// A row group is written (and its memory freed) every this many
		// rows of a file.
		itable.ParquetRowGroupLimitKey:     strconv.Itoa(rowGroupRows),
		"write.parquet.page-size-bytes":    strconv.Itoa(pageBytes),
		"write.parquet.page-row-limit":     strconv.Itoa(pageRows),
		"write.parquet.dict-size-bytes":    strconv.Itoa(dictBytes),
		itable.WriteTargetFileSizeBytesKey: strconv.Itoa(targetFileBytes),
	}
}

// staleProps are the entries of want that have is lacks or holds with
// another value.
func staleProps(have, want iceberg.Properties) iceberg.Properties {
	stale := iceberg.Properties{}
	for k, v := range want {
		if have[k] != v {
			stale[k] = v
		}
	}
	return stale
}

func fault(step string) {
	if os.Getenv(FaultEnv) == step {
		fmt.Fprintf(os.Stderr, "coldtier: fault %s\n", step)
		select {} // wait for the kill
	}
}

func floorNs(ns, span int64) int64 {
	r := ns % span
	if r < 0 {
		r += span
	}
	return ns - r
}

// writeFileSync writes v as JSON to path atomically and durably (temporary
// file, fsync, rename, fsync of the directory).
func writeFileSync(path string, v any) error {
	buf, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("coldtier: %w", err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("coldtier: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("coldtier: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("coldtier: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("coldtier: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

func removeSync(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("coldtier: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("coldtier: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("coldtier: sync %s: %w", dir, err)
	}
	return nil
}

// maxCommitAttempts bounds the commits of one run's files.
const maxCommitAttempts = 30

// commit commits tx; when another writer committed first it retries on the
// fresh table with the same data files (already uploaded, read back from
// the staged snapshot's manifests), after evolving the fresh schema again.
// iceberg-go retries a conflict the SQL catalog sees at its final
// compare-and-swap itself (commit.retry.* properties), but a snapshot
// requirement that already fails when the catalog loads the table comes
// back as a plain error: that is the case handled here.
func (c *Compactor) commit(ctx context.Context, tx *itable.Transaction, cols []table.Column, props iceberg.Properties, files []iceberg.DataFile, dels stagedDeletes, rc *runClaims, deadline time.Time) (*itable.Table, error) {
	for attempt := 1; ; attempt++ {
		if time.Now().After(deadline) {
			return nil, ErrRunTooLong
		}
		committed, err := tx.Commit(ctx)
		if err == nil {
			return committed, nil
		}
		if !conflict(err) || attempt >= maxCommitAttempts {
			return nil, err
		}
		c.counters.CommitRetries.Add(1)
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
		fresh, lerr := c.cat.LoadTable(ctx, c.ident)
		if lerr != nil {
			return nil, fmt.Errorf("reload after conflict (%v): %w", err, lerr)
		}
		for _, snap := range fresh.Metadata().Snapshots() {
			if snap.Summary != nil && snap.Summary.Properties[propRun] == props[propRun] {
				return fresh, nil // the conflicting commit was ours after all
			}
		}
		tx = fresh.NewTransaction()
		if _, err := evolve(tx, fresh.Schema(), cols); err != nil {
			return nil, err
		}
		if rc != nil {
			// The claims may have grown: the run's files stand only if no
			// one claimed an offset of a batch they hold.
			now, err := readClaims(fresh.Properties())
			if err != nil {
				return nil, err
			}
			update, overlap := rc.update(now)
			if overlap {
				return nil, errRewrite
			}
			if err := tx.AssertRefSnapshotID(""); err != nil {
				return nil, err
			}
			if err := tx.SetProperties(update); err != nil {
				return nil, err
			}
		}
		// The rows the run deletes must still be where it found them: a
		// rewrite of their files meanwhile moved them, and the run is
		// written again with its deletes found anew.
		if err := deletesStand(ctx, fresh, dels.files, dels.refs); err != nil {
			if errors.Is(err, errDeleteTarget) {
				return nil, errRewrite
			}
			return nil, err
		}
		if len(dels.files) > 0 && rc == nil {
			if err := tx.AssertRefSnapshotID(""); err != nil {
				return nil, err
			}
		}
		if err := stageFiles(ctx, tx, files, dels.files, props); err != nil {
			return nil, fmt.Errorf("retry with the uploaded files: %w", err)
		}
	}
}

// stagedDeletes are the position delete files of a run (staged with its data
// files) and the rows they delete.
type stagedDeletes struct {
	files []iceberg.DataFile
	refs  []rowRef
}

// conflict tells a commit another writer got in before from other errors:
// iceberg-go's ErrCommitFailed (the catalog's compare-and-swap matched no
// row), a requirement that failed on the reloaded table, or a SQL catalog
// database that reports the concurrent update of the catalog row as a
// serialization failure (SQLSTATE 40001; PostgreSQL at SERIALIZABLE or
// REPEATABLE READ) or a deadlock (40P01): the transaction was rolled back,
// so retrying on the fresh table is safe.
func conflict(err error) bool {
	if errors.Is(err, itable.ErrCommitFailed) || strings.Contains(err.Error(), "requirement failed") {
		return true
	}
	var sqlErr interface{ SQLState() string }
	if errors.As(err, &sqlErr) {
		switch sqlErr.SQLState() {
		case "40001", "40P01":
			return true
		}
	}
	return false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
