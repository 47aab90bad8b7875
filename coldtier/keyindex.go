package coldtier

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/table"
)

// The cold key index: for each key of a keyed table, where its row lives in
// the Iceberg table (data file, position), the data sequence number of that
// file, and the row's source position when its data file has the source
// columns (table.SourceBatchColumn's partition, table.SourceOffsetColumn).
// Of two live rows of one key, the later change is the key's state: the
// later position when both rows carry one of the same source partition,
// else the later commit. Commit order alone is not change order across
// nodes: after a rebalance, the node that held a partition may commit its
// last rows of a key after the node that took the partition over committed
// newer ones. A run of a keyed table looks up the keys it writes and
// deletes the rows found (deletes.go) in its commit, except a row that is a
// later change of its key than the run's own (keyedDeletesAt).
//
// The index is built from a snapshot itself — its live data files' key
// columns, less the rows its position delete files delete — so it is exact
// whoever committed (this node, another node, maintenance's rewrite, Spark).
// It is kept in a file per table in the node's state dir, stamped with the
// snapshot it is valid for; a restart at the same snapshot loads it instead
// of reading the table. At a later snapshot it is brought up to date
// snapshot by snapshot (update): the data files each one removed, those it
// added (their key columns read) and the position delete files it added
// (the keys at those positions read from their data files). When the
// snapshot it was valid for is no longer an ancestor of the current one
// (expired, a rollback), or a snapshot added equality deletes or deletion
// vectors, it is rebuilt from the table whole.

// keyLoc is where a key's row is: files[file], row pos, and the file's
// data sequence number; part (an index into the index's parts, 0 for a row
// without a source position) and off are the row's source position.
type keyLoc struct {
	file uint32
	pos  uint32
	part uint32
	seq  int64
	off  int64
}

// keyIndex is the cold key index of one table at one snapshot.
type keyIndex struct {
	snapshot int64 // the snapshot it is valid for (0: the table is empty)
	keyCols  []string
	files    []string // by id; "" for a file removed since (its id is not reused)
	keys     map[string]keyLoc
	// parts are the source partitions of the rows' positions, by id (0:
	// none); partIDs finds an id by partition.
	parts   []string
	partIDs map[string]uint32
	// stale are the older rows of keys found live more than once (a
	// writer that did not delete the key's row): the next run deletes them
	// with the key's current row.
	stale []keyLoc
}

// errKeyIndexCorrupt: the index file is damaged (a torn write, another
// version's format); it is rebuilt from the table.
var errKeyIndexCorrupt = errors.New("key index file is corrupt")

// ref is the row loc names.
func (ix *keyIndex) ref(loc keyLoc) rowRef {
	return rowRef{File: ix.files[loc.file], Pos: int64(loc.pos)}
}

// runKey is a key a run writes (encoded, appendKey) with the source
// position of the change the run writes for it (positioned false: none).
type runKey struct {
	key        []byte
	partition  string
	offset     int64
	positioned bool
}

// deletesFor is the rows of the table that the new versions of keys
// replace, with the stale rows. A key whose row in the table is a later
// change than the run's (the same source partition, a higher offset) keeps
// it: the run's row of the key becomes the stale one once committed, and
// the next run deletes it.
func (ix *keyIndex) deletesFor(keys []runKey) []rowRef {
	var refs []rowRef
	for _, k := range keys {
		loc, ok := ix.keys[string(k.key)]
		if !ok {
			continue
		}
		if k.positioned && loc.part != 0 && ix.parts[loc.part] == k.partition && loc.off > k.offset {
			continue
		}
		refs = append(refs, ix.ref(loc))
	}
	for _, loc := range ix.stale {
		refs = append(refs, ix.ref(loc))
	}
	return refs
}

// partID is the id of a source partition, added when new ("": 0, none).
func (ix *keyIndex) partID(partition string) uint32 {
	if partition == "" {
		return 0
	}
	if ix.partIDs == nil {
		ix.partIDs = map[string]uint32{}
		for id, p := range ix.parts {
			if id > 0 {
				ix.partIDs[p] = uint32(id)
			}
		}
	}
	if id, ok := ix.partIDs[partition]; ok {
		return id
	}
	if len(ix.parts) == 0 {
		ix.parts = append(ix.parts, "")
	}
	id := uint32(len(ix.parts))
	ix.parts = append(ix.parts, partition)
	ix.partIDs[partition] = id
	return id
}

// laterChange reports whether the row at a is a later change of its key than
// the row at b: by source position when both carry one of the same
// partition (the source's order), else by commit (data sequence number,
// then the row's place in one file).
func laterChange(a, b keyLoc) bool {
	if a.part != 0 && a.part == b.part && a.off != b.off {
		return a.off > b.off
	}
	if a.seq != b.seq {
		return a.seq > b.seq
	}
	return a.file == b.file && a.pos > b.pos
}

// add records the key's row at loc; a key already there keeps the row of
// the later change (laterChange) and the other becomes stale.
func (ix *keyIndex) add(key []byte, loc keyLoc) {
	old, ok := ix.keys[string(key)]
	if !ok {
		ix.keys[string(key)] = loc
		return
	}
	if laterChange(old, loc) {
		old, loc = loc, old
	}
	ix.keys[string(key)] = loc
	ix.stale = append(ix.stale, old)
}

// Key encoding: each column's value tagged by its type, so that keys of
// different types never collide and the hot side (table.Row values) and
// the cold side (Arrow values) encode alike. Timestamps count in
// microseconds, Iceberg's unit.
const (
	keyNull byte = iota
	keyInt
	keyString
	keyFloat
	keyBool
	keyTime
)

// appendKey appends v (one key column's value) to buf.
func appendKey(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(buf, keyNull), nil
	case int64:
		return binary.BigEndian.AppendUint64(append(buf, keyInt), uint64(x)^(1<<63)), nil
	case string:
		return append(binary.AppendUvarint(append(buf, keyString), uint64(len(x))), x...), nil
	case []byte:
		return append(binary.AppendUvarint(append(buf, keyString), uint64(len(x))), x...), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(buf, keyFloat), math.Float64bits(x)), nil
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		return append(buf, keyBool, b), nil
	case time.Time:
		return binary.BigEndian.AppendUint64(append(buf, keyTime), uint64(x.UnixMicro())^(1<<63)), nil
	}
	return buf, fmt.Errorf("key value %v: type %T cannot be a key", v, v)
}

// buildKeyIndex reads the key columns of tbl's current snapshot.
func buildKeyIndex(ctx context.Context, tbl *itable.Table, keyCols []string) (*keyIndex, error) {
	ix := &keyIndex{keyCols: slices.Clone(keyCols), keys: map[string]keyLoc{}}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return ix, nil
	}
	ix.snapshot = snap.SnapshotID
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("key index: plan files: %w", err)
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	var deleteFiles []iceberg.DataFile
	seen := map[string]bool{}
	for _, t := range tasks {
		if len(t.EqualityDeleteFiles) > 0 || len(t.DeletionVectorFiles) > 0 {
			return nil, fmt.Errorf("key index: %s has equality deletes or deletion vectors, which the index does not read", t.File.FilePath())
		}
		for _, d := range t.DeleteFiles {
			if !seen[d.FilePath()] {
				seen[d.FilePath()] = true
				deleteFiles = append(deleteFiles, d)
			}
		}
	}
	deleted, err := readPositionDeletes(ctx, fsys, deleteFiles)
	if err != nil {
		return nil, err
	}
	for _, t := range tasks {
		if len(ix.files) >= math.MaxUint32 || t.File.Count() > math.MaxUint32 {
			return nil, fmt.Errorf("key index: %s: too many files or rows", t.File.FilePath())
		}
		id := uint32(len(ix.files))
		ix.files = append(ix.files, t.File.FilePath())
		var seq int64
		if t.DataSequenceNumber != nil {
			seq = *t.DataSequenceNumber
		}
		gone := deleted[t.File.FilePath()]
		slices.Sort(gone)
		err := readKeyRows(ctx, fsys, t.File.FilePath(), keyCols, func(pos int64, key []byte, at sourcePos) {
			if _, dead := slices.BinarySearch(gone, pos); !dead {
				ix.add(key, keyLoc{file: id, pos: uint32(pos), seq: seq, part: ix.partID(at.partition), off: at.offset})
			}
		})
		if err != nil {
			return nil, fmt.Errorf("key index: %s: %w", t.File.FilePath(), err)
		}
	}
	return ix, nil
}

// errKeyIndexRebuild: the index cannot follow the table's new snapshots
// (see update); it is rebuilt.
var errKeyIndexRebuild = errors.New("key index must be rebuilt")

// update brings ix from its snapshot to tbl's current one by applying each
// snapshot between; false when it cannot (errKeyIndexRebuild's cases), ix
// then in an unknown state.
func (ix *keyIndex) update(ctx context.Context, tbl *itable.Table) (bool, error) {
	cur := tbl.CurrentSnapshot()
	if cur == nil || ix.snapshot == 0 {
		return false, nil
	}
	var chain []*itable.Snapshot // newest first
	for s := cur; s.SnapshotID != ix.snapshot; {
		chain = append(chain, s)
		if s.ParentSnapshotID == nil {
			return false, nil // ix's snapshot is not an ancestor
		}
		if s = tbl.Metadata().SnapshotByID(*s.ParentSnapshotID); s == nil {
			return false, nil // expired
		}
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return false, err
	}
	for i := len(chain) - 1; i >= 0; i-- {
		err := ix.apply(ctx, fsys, chain[i])
		if errors.Is(err, errKeyIndexRebuild) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("key index: snapshot %d: %w", chain[i].SnapshotID, err)
		}
	}
	ix.snapshot = cur.SnapshotID
	return true, nil
}

// apply applies what snapshot s changed: the manifests it wrote hold its
// added and removed files.
func (ix *keyIndex) apply(ctx context.Context, fsys icebergio.IO, s *itable.Snapshot) error {
	mans, err := s.Manifests(fsys)
	if err != nil {
		return err
	}
	type added struct {
		path string
		seq  int64
		rows int64
	}
	var addedData []added
	var addedDeletes []iceberg.DataFile
	removed := map[string]bool{}
	for _, m := range mans {
		if m.SnapshotID() != s.SnapshotID {
			continue // written by an earlier snapshot: nothing of s
		}
		for e, err := range m.Entries(fsys, false) {
			if err != nil {
				return err
			}
			if e.SnapshotID() != s.SnapshotID {
				continue
			}
			df := e.DataFile()
			switch {
			case e.Status() == iceberg.EntryStatusDELETED && df.ContentType() == iceberg.EntryContentData:
				removed[df.FilePath()] = true
			case e.Status() != iceberg.EntryStatusADDED:
			case df.ContentType() == iceberg.EntryContentData:
				addedData = append(addedData, added{df.FilePath(), e.SequenceNum(), df.Count()})
			case df.ContentType() == iceberg.EntryContentPosDeletes && !itable.IsDeletionVector(df):
				addedDeletes = append(addedDeletes, df)
			default:
				return errKeyIndexRebuild // equality deletes, deletion vectors
			}
		}
	}
	ids := make(map[string]uint32, len(ix.files))
	for id, f := range ix.files {
		if f != "" {
			ids[f] = uint32(id)
		}
	}
	// Removed files first: the keys left in them are gone (a rewrite's new
	// files, added next, hold those that stay).
	if len(removed) > 0 {
		gone := map[uint32]bool{}
		for f := range removed {
			if id, ok := ids[f]; ok {
				gone[id] = true
				ix.files[id] = ""
				delete(ids, f)
			}
		}
		for k, l := range ix.keys {
			if gone[l.file] {
				delete(ix.keys, k)
			}
		}
		ix.stale = slices.DeleteFunc(ix.stale, func(l keyLoc) bool { return gone[l.file] })
	}
	for _, a := range addedData {
		if len(ix.files) >= math.MaxUint32 || a.rows > math.MaxUint32 {
			return fmt.Errorf("%s: too many files or rows", a.path)
		}
		id := uint32(len(ix.files))
		ix.files = append(ix.files, a.path)
		ids[a.path] = id
		err := readKeyRows(ctx, fsys, a.path, ix.keyCols, func(pos int64, key []byte, at sourcePos) {
			ix.add(key, keyLoc{file: id, pos: uint32(pos), seq: a.seq, part: ix.partID(at.partition), off: at.offset})
		})
		if err != nil {
			return fmt.Errorf("%s: %w", a.path, err)
		}
	}
	if len(addedDeletes) == 0 {
		return nil
	}
	dead, err := readPositionDeletes(ctx, fsys, addedDeletes)
	if err != nil {
		return err
	}
	for path, pos := range dead {
		id, ok := ids[path]
		if !ok {
			continue // a file no longer (or never) in the table
		}
		slices.Sort(pos)
		isDead := func(l keyLoc) bool {
			_, found := slices.BinarySearch(pos, int64(l.pos))
			return l.file == id && found
		}
		// The keys at the deleted positions, read from the data file: a
		// key whose row is one of them has no row in the table any more
		// (unless a newer row of it was added, which the index holds).
		err := readKeys(ctx, fsys, path, ix.keyCols, func(p int64, key []byte) {
			if _, found := slices.BinarySearch(pos, p); !found {
				return
			}
			if l, ok := ix.keys[string(key)]; ok && isDead(l) {
				delete(ix.keys, string(key))
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		ix.stale = slices.DeleteFunc(ix.stale, isDead)
	}
	return nil
}

// parquetFile is an open Parquet file of the table with its Arrow reader.
type parquetFile struct {
	f  icebergio.File
	pf *file.Reader
	fr *pqarrow.FileReader
}

func openParquet(fsys icebergio.IO, path string) (*parquetFile, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	pf, err := file.NewParquetReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 14}, memory.DefaultAllocator)
	if err != nil {
		pf.Close()
		f.Close()
		return nil, err
	}
	return &parquetFile{f: f, pf: pf, fr: fr}, nil
}

func (p *parquetFile) Close() error {
	p.pf.Close()
	return p.f.Close()
}

// records calls fn with each batch of the named top-level columns, in the
// file's row order.
func (p *parquetFile) records(ctx context.Context, cols []string, fn func(arrow.RecordBatch) error) error {
	idx := make([]int, len(cols))
	for i, c := range cols {
		if idx[i] = p.pf.MetaData().Schema.ColumnIndexByName(c); idx[i] < 0 {
			return fmt.Errorf("no column %q", c)
		}
	}
	rr, err := p.fr.GetRecordReader(ctx, idx, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		if err := fn(rr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// readKeys calls fn with the position and the encoded key of each row of
// the data file at path (key only valid during the call).
func readKeys(ctx context.Context, fsys icebergio.IO, path string, keyCols []string, fn func(pos int64, key []byte)) error {
	return readKeyRows(ctx, fsys, path, keyCols, func(pos int64, key []byte, _ sourcePos) { fn(pos, key) })
}

// sourcePos is a row's source position: the partition of its
// table.SourceBatchColumn (the text before its last '@', as the hot
// store's key index takes it) and its table.SourceOffsetColumn; the zero
// value for a row without one.
type sourcePos struct {
	partition string
	offset    int64
}

// readKeyRows is readKeys with each row's source position, read from the
// data file's source columns when it has both (a file without them, or a
// row with a null in either, gives the zero sourcePos).
func readKeyRows(ctx context.Context, fsys icebergio.IO, path string, keyCols []string, fn func(pos int64, key []byte, at sourcePos)) error {
	p, err := openParquet(fsys, path)
	if err != nil {
		return err
	}
	defer p.Close()
	cols := keyCols
	schema := p.pf.MetaData().Schema
	positioned := schema.ColumnIndexByName(table.SourceBatchColumn) >= 0 && schema.ColumnIndexByName(table.SourceOffsetColumn) >= 0
	if positioned {
		cols = append(slices.Clip(keyCols), table.SourceBatchColumn, table.SourceOffsetColumn)
	}
	var pos int64
	var key []byte
	var lastBatch, lastPart string
	return p.records(ctx, cols, func(rec arrow.RecordBatch) error {
		for row := 0; row < int(rec.NumRows()); row++ {
			key = key[:0]
			for c := range keyCols {
				v, err := keyValue(rec.Column(c), row)
				if err != nil {
					return err
				}
				if key, err = appendKey(key, v); err != nil {
					return err
				}
			}
			var at sourcePos
			if positioned {
				batch, err := keyValue(rec.Column(len(keyCols)), row)
				if err != nil {
					return fmt.Errorf("%s: %w", table.SourceBatchColumn, err)
				}
				off, err := keyValue(rec.Column(len(keyCols)+1), row)
				if err != nil {
					return fmt.Errorf("%s: %w", table.SourceOffsetColumn, err)
				}
				b, bok := batch.(string)
				o, ook := off.(int64)
				if bok && ook {
					if b != lastBatch {
						lastBatch, lastPart = b, ""
						if at := strings.LastIndexByte(b, '@'); at >= 0 {
							lastPart = b[:at]
						}
					}
					if lastPart != "" {
						at = sourcePos{partition: lastPart, offset: o}
					}
				}
			}
			fn(pos, key, at)
			pos++
		}
		return nil
	})
}

// keyValue is row i of col as the Go value the hot side holds.
func keyValue(col arrow.Array, i int) (any, error) {
	if col.IsNull(i) {
		return nil, nil
	}
	switch a := col.(type) {
	case *array.Int64:
		return a.Value(i), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Timestamp:
		return time.UnixMicro(int64(a.Value(i))).UTC(), nil
	}
	return nil, fmt.Errorf("column type %s cannot be a key", col.DataType())
}

// readPositionDeletes reads position delete files: the deleted positions
// by data file path.
func readPositionDeletes(ctx context.Context, fsys icebergio.IO, files []iceberg.DataFile) (map[string][]int64, error) {
	out := map[string][]int64{}
	for _, df := range files {
		err := readDeleteRows(ctx, fsys, df, func(path string, pos int64) {
			out[path] = append(out[path], pos)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readDeleteRows calls fn with each row (data file path, position) of the
// position delete file df.
func readDeleteRows(ctx context.Context, fsys icebergio.IO, df iceberg.DataFile, fn func(path string, pos int64)) error {
	p, err := openParquet(fsys, df.FilePath())
	if err != nil {
		return fmt.Errorf("position deletes %s: %w", df.FilePath(), err)
	}
	defer p.Close()
	err = p.records(ctx, []string{"file_path", "pos"}, func(rec arrow.RecordBatch) error {
		paths, ok1 := rec.Column(0).(*array.String)
		pos, ok2 := rec.Column(1).(*array.Int64)
		if !ok1 || !ok2 {
			return fmt.Errorf("columns %s, %s: want string and int64", rec.Column(0).DataType(), rec.Column(1).DataType())
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			fn(paths.Value(i), pos.Value(i))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("position deletes %s: %w", df.FilePath(), err)
	}
	return nil
}

// keyedDeletes is the delete source of a keyed run: the rows of the table
// (as the run's transaction loaded it) holding the keys keys returns (each
// encoded by appendKey over keyCols), and the stale rows, found through
// the table's key index. The index is kept in memory between runs (runs
// are serialized by runMu) and brought up to the run's snapshot, then
// saved.
func (c *Compactor) keyedDeletes(keyCols []string, keys func() [][]byte) deleteSource {
	return c.keyedDeletesAt(keyCols, func() []runKey {
		ks := keys()
		out := make([]runKey, len(ks))
		for i, k := range ks {
			out[i] = runKey{key: k}
		}
		return out
	})
}

// keyedDeletesAt is keyedDeletes with the source position of each key's
// change in the run: a key whose row in the table is a later change of the
// same source partition keeps it (deletesFor), so a run that commits a
// node's older change after another node committed a newer one never
// deletes the newer row.
func (c *Compactor) keyedDeletesAt(keyCols []string, keys func() []runKey) deleteSource {
	return func(ctx context.Context, tbl *itable.Table) ([]rowRef, error) {
		ix, err := c.keyIndexAt(ctx, tbl, keyCols)
		if err != nil {
			return nil, err
		}
		return ix.deletesFor(keys()), nil
	}
}

// keyIndexAt is the key index of tbl's current snapshot: the one kept in
// memory brought up to date, or the one saved, or one built whole.
func (c *Compactor) keyIndexAt(ctx context.Context, tbl *itable.Table, keyCols []string) (*keyIndex, error) {
	ix := c.keyIdx
	var current int64
	if s := tbl.CurrentSnapshot(); s != nil {
		current = s.SnapshotID
	}
	switch {
	case ix != nil && slices.Equal(ix.keyCols, keyCols) && ix.snapshot == current:
		return ix, nil
	case ix != nil && slices.Equal(ix.keyCols, keyCols) && ix.snapshot != 0:
		ok, err := ix.update(ctx, tbl)
		if err != nil {
			return nil, err
		}
		if !ok {
			ix = nil
		}
	default:
		ix = nil
	}
	if ix == nil {
		var err error
		c.keyIdx = nil
		if ix, _, err = openKeyIndex(ctx, tbl, keyCols, c.keyIndexPath()); err != nil {
			return nil, err
		}
	} else if err := ix.save(c.keyIndexPath()); err != nil {
		return nil, err
	}
	c.keyIdx = ix
	return ix, nil
}

// laterThan reports whether the table's row of key is a later change than
// one at pos: the same source partition, a higher offset.
func (ix *keyIndex) laterThan(key []byte, pos sourcePos) bool {
	loc, ok := ix.keys[string(key)]
	return ok && pos.partition != "" && loc.part != 0 && ix.parts[loc.part] == pos.partition && loc.off > pos.offset
}

// keyIndexPath is where the key index of c's table is kept.
func (c *Compactor) keyIndexPath() string {
	return filepath.Join(c.cfg.StateDir, "coldtier-keyindex-"+c.t.Name()+".bin")
}

// openKeyIndex returns the key index of tbl's current snapshot: the one
// saved at path when it is valid for that snapshot and the same key
// columns, else one built from the table (and saved at path).
func openKeyIndex(ctx context.Context, tbl *itable.Table, keyCols []string, path string) (ix *keyIndex, rebuilt bool, err error) {
	var current int64
	if s := tbl.CurrentSnapshot(); s != nil {
		current = s.SnapshotID
	}
	saved, err := loadKeyIndex(path)
	if err == nil && slices.Equal(saved.keyCols, keyCols) {
		if saved.snapshot == current {
			return saved, false, nil
		}
		ok, err := saved.update(ctx, tbl)
		if err != nil {
			return nil, false, err
		}
		if ok {
			return saved, false, saved.save(path)
		}
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errKeyIndexCorrupt) {
		return nil, false, err
	}
	if ix, err = buildKeyIndex(ctx, tbl, keyCols); err != nil {
		return nil, false, err
	}
	return ix, true, ix.save(path)
}

// The key index file: a magic line, then uvarints (v for a signed varint),
// and a CRC-32C of everything before it:
//
//	"sluice-keyindex 2\n"
//	v snapshot | n keyCols, each (n, bytes) | n files, each (n, bytes)
//	n parts, each (n, bytes)
//	n keys, each (n, key bytes, loc) | n stale, each loc
//	crc32c (4 bytes, little endian)
//	loc := file, pos, v seq, part, v offset
//
// A file of another version is taken as damaged: rebuilt from the table.
const keyIndexMagic = "sluice-keyindex 2\n"

// save writes the index to path atomically and durably.
func (ix *keyIndex) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("coldtier: key index: %w", err)
	}
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<16)
	var b []byte
	flush := func() {
		w.Write(b)
		b = b[:0]
	}
	b = append(b, keyIndexMagic...)
	b = binary.AppendVarint(b, ix.snapshot)
	putStrings := func(ss []string) {
		b = binary.AppendUvarint(b, uint64(len(ss)))
		for _, s := range ss {
			b = append(binary.AppendUvarint(b, uint64(len(s))), s...)
			if len(b) > 1<<15 {
				flush()
			}
		}
	}
	putLoc := func(l keyLoc) {
		b = binary.AppendUvarint(b, uint64(l.file))
		b = binary.AppendUvarint(b, uint64(l.pos))
		b = binary.AppendVarint(b, l.seq)
		b = binary.AppendUvarint(b, uint64(l.part))
		b = binary.AppendVarint(b, l.off)
	}
	putStrings(ix.keyCols)
	putStrings(ix.files)
	putStrings(ix.parts)
	b = binary.AppendUvarint(b, uint64(len(ix.keys)))
	for k, l := range ix.keys {
		b = append(binary.AppendUvarint(b, uint64(len(k))), k...)
		putLoc(l)
		if len(b) > 1<<15 {
			flush()
		}
	}
	b = binary.AppendUvarint(b, uint64(len(ix.stale)))
	for _, l := range ix.stale {
		putLoc(l)
	}
	flush()
	err = w.Flush()
	if err == nil {
		_, err = f.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("coldtier: key index %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("coldtier: key index: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// loadKeyIndex reads an index saved at path.
func loadKeyIndex(path string) (*keyIndex, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	corrupt := func(what string) error {
		return fmt.Errorf("%w: %s: %s", errKeyIndexCorrupt, path, what)
	}
	if len(buf) < len(keyIndexMagic)+4 || string(buf[:len(keyIndexMagic)]) != keyIndexMagic {
		return nil, corrupt("no header")
	}
	body := buf[:len(buf)-4]
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != binary.LittleEndian.Uint32(buf[len(buf)-4:]) {
		return nil, corrupt("checksum")
	}
	d := keyDecoder{b: body[len(keyIndexMagic):]}
	ix := &keyIndex{snapshot: d.varint()}
	ix.keyCols = d.strings()
	ix.files = d.strings()
	ix.parts = d.strings()
	if len(ix.parts) > 0 && ix.parts[0] != "" {
		d.err = errors.New("source partition 0 is not none")
	}
	n := d.count(5)
	ix.keys = make(map[string]keyLoc, n)
	for range n {
		k := d.bytes()
		l := d.loc(len(ix.files), len(ix.parts))
		if d.err != nil {
			break
		}
		ix.keys[string(k)] = l
	}
	for range d.count(5) {
		ix.stale = append(ix.stale, d.loc(len(ix.files), len(ix.parts)))
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, corrupt(d.err.Error())
	}
	return ix, nil
}

// keyDecoder reads the index file's fields with a sticky error.
type keyDecoder struct {
	b   []byte
	err error
}

func (d *keyDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *keyDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items of at least minBytes each, bounded by the
// bytes left.
func (d *keyDecoder) count(minBytes int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minBytes)+1 {
		if d.err == nil {
			d.err = fmt.Errorf("count %d past the %d bytes left", n, len(d.b))
		}
		return 0
	}
	return int(n)
}

func (d *keyDecoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("length %d past the %d bytes left", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *keyDecoder) strings() []string {
	var ss []string
	for range d.count(1) {
		ss = append(ss, string(d.bytes()))
	}
	return ss
}

func (d *keyDecoder) loc(files, parts int) keyLoc {
	f, p, s, part, off := d.uvarint(), d.uvarint(), d.varint(), d.uvarint(), d.varint()
	if d.err == nil && (f >= uint64(files) || p > math.MaxUint32) {
		d.err = fmt.Errorf("row %d of file %d of %d", p, f, files)
	}
	if d.err == nil && part != 0 && part >= uint64(parts) {
		d.err = fmt.Errorf("source partition %d of %d", part, parts)
	}
	return keyLoc{file: uint32(f), pos: uint32(p), seq: s, part: uint32(part), off: off}
}
