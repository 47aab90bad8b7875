package table

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"
)

// A Stage gathers appends to tables of a store, any number of them and of
// any size, and Publish makes all of them visible and durable at once, or
// none: an input that fails half way (a snapshot whose checksum does not
// match at its end) stores nothing, and one retried is not stored twice.
// Positions set on it (SetPosition: a source's record of the input) are
// published in the same step, as a Batch commits them with its rows.
//
// The blocks are staged on disk, not in memory, in a scratch Pebble database
// of the Stage's own under the store's directory (staging/<name>, no
// write-ahead log: it is garbage after a crash). Publish writes them, in key
// order, into sstables and ingests those into the store in one step
// (pebble.DB.Ingest: one synced manifest edit), numbered at that moment with
// sequence numbers of the store, so a compaction that ran meanwhile never
// sees a sequence number below its watermark appear. The memory of a Stage
// is the scratch database's memtable and cache (a few MB) and the block
// being written, whatever it holds in all.
//
// A Stage is used by one goroutine. Close it always: it removes the scratch
// database (a crash leaves it behind; the next NewStage of the store
// removes it). A part that needs a wider schema widens the table's schema at
// once, as an Appender does; Publish persists it before the blocks.
//
// The store's free-space guard (space.go) admits what a Stage writes, as it
// does the store's own writes: each Append needs room for its blocks twice
// (the scratch database, then Publish's sstables) and for the copy Publish
// will make of everything staged before it, beyond the minimum free space;
// Publish needs room for that copy. The copy stays counted among the
// store's writes in flight while the Stage is open, so the store's other
// writes leave room for it (they are refused first, not the Publish of a
// snapshot read to its end). Refused, they return a *DiskFullError
// (errors.Is ErrDiskFull) having staged or published nothing, so a snapshot
// too large for the disk fails on the batch that would fill it, not in
// Publish after the whole input was read, and the scratch database never
// meets ENOSPC (a failed flush of it would stall the ingest, a failed
// MANIFEST write end the process).
type Stage struct {
	s       *Store
	release func()
	dir     string
	db      *pebble.DB
	next    uint64 // the next local block number
	staged  int64  // bytes of blocks staged: what Publish copies, held in the space guard's in-flight bytes until Close
	tables  []*stagedTable
	// positions are published with the blocks (SetPosition), by name.
	positions map[string][]byte
	done      bool
}

// stagedTable counts what a Stage holds for one table.
type stagedTable struct {
	t                   *Table
	rows, blocks, bytes int
}

// stagingDir is the directory, under the store's, of the scratch databases.
const stagingDir = "staging"

// liveStages are the scratch directories of open Stages in this process:
// any other under a store's staging directory was left by a crash (Pebble's
// lock file keeps a store to one process).
var liveStages = struct {
	sync.Mutex
	dirs map[string]bool
}{dirs: map[string]bool{}}

// NewStage starts a Stage (removing the scratch directories a crash left).
// The store cannot close until the Stage is closed.
func (s *Store) NewStage() (*Stage, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(s.dir, stagingDir)
	liveStages.Lock()
	defer liveStages.Unlock()
	if entries, err := os.ReadDir(root); err == nil {
		for _, e := range entries {
			if p := filepath.Join(root, e.Name()); !liveStages.dirs[p] {
				if err := os.RemoveAll(p); err != nil {
					release()
					return nil, fmt.Errorf("table: remove a stage left by a crash: %w", err)
				}
			}
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		release()
		return nil, fmt.Errorf("table: staging directory: %w", err)
	}
	dir, err := os.MkdirTemp(root, "stage-")
	if err != nil {
		release()
		return nil, fmt.Errorf("table: staging directory: %w", err)
	}
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	opts := &pebble.Options{
		FS:     vfs.Default,
		Cache:  cache,
		Logger: pebbleLogger{s.opts.Logger},
		// Garbage after a crash: no log to write, nothing synced.
		DisableWAL:   true,
		MemTableSize: 8 << 20,
		Levels:       make([]pebble.LevelOptions, 7),
	}
	for i := range opts.Levels {
		opts.Levels[i].Compression = pebble.NoCompression // blocks are zstd already
	}
	opts.EnsureDefaults()
	db, err := pebble.Open(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		release()
		return nil, fmt.Errorf("table: open stage %s: %w", dir, err)
	}
	liveStages.dirs[dir] = true
	return &Stage{s: s, release: release, dir: dir, db: db}, nil
}

// Dir is the Stage's scratch directory.
func (st *Stage) Dir() string { return st.dir }

func (st *Stage) table(t *Table) *stagedTable {
	for _, x := range st.tables {
		if x.t == t {
			return x
		}
	}
	x := &stagedTable{t: t}
	st.tables = append(st.tables, x)
	return x
}

// Append stages rows for t (see Table.Append for what rows may hold, and
// for the *SchemaError naming a row that does not fit). The rows can be
// dropped when it returns; nothing of them is visible until Publish. On
// error nothing of this call is staged and the Stage stays usable.
func (st *Stage) Append(ctx context.Context, t *Table, rows []Row) error {
	if st.done {
		return errors.New("table: stage already published or closed")
	}
	if t.store != st.s {
		return fmt.Errorf("table %s: belongs to another store", t.name)
	}
	if t.key != nil {
		// A stage's blocks are ingested as sstables under sequences it
		// numbers itself at publish: they would bypass the key index.
		return fmt.Errorf("table %s: staged ingest (RDB snapshots, streamed S3 objects): %w", t.name, ErrKeyed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	trusted := trustedJSON(ctx)
	t.mu.Lock()
	schema, check := t.meta.Schema, t.view.Load().checks()
	t.mu.Unlock()
	cols, fits, err := t.coerce(rows, schema, check, trusted)
	if err != nil {
		return t.mismatches(rows, schema, trusted, err)
	}
	if !fits {
		// As Appender.add: the schema is widened at once and persisted by
		// the next commit (Publish's at the latest).
		t.mu.Lock()
		widened, changed, err := t.widenFor(rows)
		if err == nil && changed {
			t.setSchema(widened)
			t.schemaDirty = true
		}
		t.mu.Unlock()
		if err != nil {
			return err
		}
		if cols, _, err = t.coerce(rows, widened, 0, trusted); err != nil {
			return t.mismatches(rows, widened, trusted, err) // every row that does not fit, as Append says it
		}
	}
	b := st.db.NewBatch()
	defer b.Close()
	first := st.next
	blocks, bytes, err := t.writeBlocksNumbered(b, cols, func(n int) (uint64, error) {
		seq := st.next
		st.next += uint64(n)
		return seq, nil
	}, nil)
	if err == nil {
		err = st.commit(b)
	}
	if err != nil {
		st.next = first // the numbers are free again: nothing was staged
		return fmt.Errorf("table %s: stage %d rows: %w", t.name, len(rows), err)
	}
	st.staged += int64(bytes)
	st.s.space.inflight.Add(int64(bytes)) // Publish's copy, held until Close
	x := st.table(t)
	x.rows += len(rows)
	x.blocks += blocks
	x.bytes += bytes
	return nil
}

// commit writes b to the scratch database once the store's space guard
// admits it: b twice (here, then in Publish's sstables) and what of the
// stage is still in the scratch database's memtable (its flush takes it
// from the disk later), beyond the writes in flight, which hold Publish's
// copy of what is staged already.
func (st *Stage) commit(b *pebble.Batch) error {
	done, err := st.s.space.admitBytes(2*int64(b.Len())+st.unflushed(), false)
	if err != nil {
		return err
	}
	defer done()
	return b.Commit(pebble.NoSync)
}

// unflushed is about how many staged bytes are not on disk yet.
func (st *Stage) unflushed() int64 {
	return max(st.staged-int64(st.db.Metrics().DiskSpaceUsage()), 0)
}

// Rows returns how many rows are staged for t.
func (st *Stage) Rows(t *Table) int {
	for _, x := range st.tables {
		if x.t == t {
			return x.rows
		}
	}
	return 0
}

// SetPosition stages value as the position named name (a source's record
// of what it read, as Batch.SetPosition): Publish makes it visible in the
// same step as the staged blocks, so after a crash both are stored or
// neither. A later call with the same name replaces the value.
func (st *Stage) SetPosition(name string, value []byte) error {
	if st.done {
		return errors.New("table: stage already published or closed")
	}
	if st.positions == nil {
		st.positions = map[string][]byte{}
	}
	st.positions[name] = slices.Clone(value)
	return nil
}

// stageFileSize is the size at which Publish starts a new sstable.
const stageFileSize = 256 << 20

// Publish makes everything staged visible and durable in one step: it
// returns once it is, or with an error and nothing of it stored (the
// schemas may have been widened). The Stage is done either way.
func (st *Stage) Publish(ctx context.Context) error {
	if st.done {
		return errors.New("table: stage already published or closed")
	}
	st.done = true
	if err := ctx.Err(); err != nil {
		return err
	}
	if st.next == 0 && len(st.positions) == 0 {
		return nil
	}
	// The schemas first, so that the persisted schema covers every block
	// once the blocks are in (a column without values reads as null).
	for _, x := range st.tables {
		if err := x.t.persistSchema(); err != nil {
			return err
		}
	}
	var hold seqHold
	defer st.s.releaseSeqs(&hold)
	base, err := st.s.nextSeqs(int(st.next), &hold)
	if err != nil {
		return err
	}
	for _, x := range st.tables {
		x.t.noteUnknown(base + st.next) // cold.go: blocks SeqRange must find by a full scan
	}
	// Room for the sstables, which writeTables copies the staged blocks
	// into (Ingest links them into the store: no third copy), held since
	// Append, and for a flush of the scratch database's memtable that may
	// be under way.
	done, err := st.s.space.admitBytes(st.unflushed(), false)
	if err != nil {
		return fmt.Errorf("table: publish the stage: %w", err)
	}
	defer done()
	// The positions go into an sstable of their own, ingested with the
	// blocks' in the same pebble.DB.Ingest: one manifest edit makes all of
	// them visible, so no crash can leave a position without its rows or
	// rows without their position (a separate Set before or after would).
	// Their keys (positionPrefix, 0x01 'p') sort below every block key
	// (prefixBlock, 0x02), so the sstables do not overlap, as Ingest needs.
	paths, err := st.writePositions()
	if err != nil {
		return err
	}
	blocks, err := st.writeTables(ctx, base)
	if err != nil {
		return err
	}
	paths = append(paths, blocks...)
	if err := ctx.Err(); err != nil {
		return err
	}
	if stageFault != nil {
		if err := stageFault("before-ingest"); err != nil {
			return err
		}
	}
	n := publishes.Add(1)
	fault("publish-before-ingest", n)
	if err := st.s.db.Ingest(paths); err != nil {
		return fmt.Errorf("table: publish the stage: %w", err)
	}
	fault("publish-after-ingest", n)
	if stageFault != nil {
		if err := stageFault("after-ingest"); err != nil {
			return err
		}
	}
	for _, x := range st.tables {
		t := x.t
		t.appends.Add(1)
		t.rowsAppended.Add(int64(x.rows))
		t.blocksWritten.Add(int64(x.blocks))
		t.bytesWritten.Add(int64(x.bytes))
	}
	return nil
}

// stageFault, when set (tests), is called at the named point of Publish
// ("before-ingest": the sstables written, nothing ingested; "after-ingest":
// everything ingested, the caller not told yet); an error ends Publish
// there, as a crash would.
var stageFault func(point string) error

// publishes counts the Publish calls that reach their Ingest, for FaultEnv.
var publishes atomic.Int64

// writePositions writes the staged positions, in name order, into an
// sstable of the stage's directory (none when there are none).
func (st *Stage) writePositions() ([]string, error) {
	if len(st.positions) == 0 {
		return nil, nil
	}
	names := slices.Sorted(maps.Keys(st.positions))
	path := filepath.Join(st.dir, "publish-positions.sst")
	f, err := vfs.Default.Create(path)
	if err != nil {
		return nil, fmt.Errorf("table: write the stage's positions: %w", err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
		TableFormat: st.s.db.FormatMajorVersion().MaxTableFormat(),
	})
	for _, name := range names {
		if err := w.Set(positionKey(name), st.positions[name]); err != nil {
			w.Close()
			return nil, fmt.Errorf("table: write the stage's position %q: %w", name, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("table: write the stage's positions: %w", err)
	}
	return []string{path}, nil
}

// writeTables writes the staged blocks, renumbered from base, into sstables
// of the stage's directory, in key order.
func (st *Stage) writeTables(ctx context.Context, base uint64) (paths []string, err error) {
	it, err := st.db.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("table: read the stage: %w", err)
	}
	defer it.Close()
	var w *sstable.Writer
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	wopts := sstable.WriterOptions{
		TableFormat: st.s.db.FormatMajorVersion().MaxTableFormat(),
		Compression: sstable.NoCompression,
	}
	finish := func() error {
		if w == nil {
			return nil
		}
		err := w.Close()
		w = nil
		return err
	}
	key := make([]byte, blockKeyLen)
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k := it.Key()
		if len(k) != blockKeyLen || k[0] != prefixBlock {
			return nil, fmt.Errorf("table: stage holds a key that is not a block: %q", k)
		}
		if w != nil && w.EstimatedSize() >= stageFileSize {
			if err := finish(); err != nil {
				return nil, fmt.Errorf("table: write the stage: %w", err)
			}
		}
		if w == nil {
			path := filepath.Join(st.dir, "publish-"+strconv.Itoa(len(paths))+".sst")
			f, err := vfs.Default.Create(path)
			if err != nil {
				return nil, fmt.Errorf("table: write the stage: %w", err)
			}
			w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), wopts)
			paths = append(paths, path)
		}
		copy(key, k)
		binary.BigEndian.PutUint64(key[blockKeyLen-8:], base+binary.BigEndian.Uint64(k[blockKeyLen-8:]))
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("table: read the stage: %w", err)
		}
		if err := w.Set(key, v); err != nil {
			return nil, fmt.Errorf("table: write the stage: %w", err)
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("table: read the stage: %w", err)
	}
	if err := finish(); err != nil {
		return nil, fmt.Errorf("table: write the stage: %w", err)
	}
	return paths, nil
}

// persistSchema writes the table's metadata (synced) when its schema was
// widened since it was last persisted.
func (t *Table) persistSchema() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.schemaDirty {
		return nil
	}
	buf, err := json.Marshal(t.meta)
	if err != nil {
		return fmt.Errorf("table %s: encode metadata: %w", t.name, err)
	}
	if err := t.store.db.Set(metaKey(t.meta.Name), buf, pebble.Sync); err != nil {
		return fmt.Errorf("table %s: write metadata: %w", t.name, err)
	}
	t.schemaDirty = false
	return nil
}

// Close removes the scratch database; what was not published is dropped.
func (st *Stage) Close() error {
	if st.db == nil {
		return nil
	}
	st.done = true
	st.s.space.inflight.Add(-st.staged) // Publish's copy: written or dropped
	err := st.db.Close()
	st.db = nil
	if rerr := os.RemoveAll(st.dir); err == nil {
		err = rerr
	}
	liveStages.Lock()
	delete(liveStages.dirs, st.dir)
	liveStages.Unlock()
	st.release()
	if err != nil {
		return fmt.Errorf("table: close stage: %w", err)
	}
	return nil
}
