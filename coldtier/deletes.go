package coldtier

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/sluicedb/sluice/table"
)

// Row deletes in the Iceberg table: a run of a keyed table commits the new
// versions of its keys and, in the same snapshot, deletes the keys' older
// rows already in the table. The rows are named by position (data file,
// row number), found through the cold key index, and written as Iceberg v2
// position-delete files: every engine the cold tier is tested with reads
// them (docs/upserts-iceberg.md), and a reader applies them without the
// equality-delete scan (no join of every data file with the keys).
//
// The delete files and the run's data files go into one row delta of the
// run's transaction, so the run's claims, its new rows and the deletes of
// the rows they replace become visible in one catalog commit or not at
// all: a kill before the commit leaves both as orphans of the run, as
// its data files are.

// rowRef names one row of the Iceberg table: the data file holding it and
// its position (0-based) among the file's rows.
type rowRef struct {
	File string
	Pos  int64
}

// deleteSource gives the rows of the Iceberg table a run deletes in its
// commit. It is called once per attempt of the run, after the run's data
// files are written, with the table the attempt's transaction starts
// from: the rows it names must be live in that table (a row of a file no
// longer there fails the commit, and the run is written again).
type deleteSource func(ctx context.Context, tbl *itable.Table) ([]rowRef, error)

// errDeleteTarget: a row to delete is in a data file the table does not
// hold (another writer rewrote or removed it since the rows were found).
var errDeleteTarget = errors.New("the data file of a row to delete is not in the table")

// liveDataFiles is the data files of tbl's current snapshot by path.
func liveDataFiles(ctx context.Context, tbl *itable.Table) (map[string]iceberg.DataFile, error) {
	files := map[string]iceberg.DataFile{}
	if tbl.CurrentSnapshot() == nil {
		return files, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan files: %w", err)
	}
	for _, t := range tasks {
		files[t.File.FilePath()] = t.File
	}
	return files, nil
}

// writeDeletes writes refs (in any order, duplicates allowed) as position
// delete files of tbl: one per partition of the data files they name,
// rows sorted by file and position as the spec asks; a file whose rows
// all name one data file records it as its referenced data file, so a
// reader matches it to that file without reading it. It returns the
// delete files to stage.
func writeDeletes(ctx context.Context, tbl *itable.Table, refs []rowRef) ([]iceberg.DataFile, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if v := tbl.Metadata().Version(); v != 2 {
		return nil, fmt.Errorf("position deletes: table format version %d (only 2 is written)", v)
	}
	live, err := liveDataFiles(ctx, tbl)
	if err != nil {
		return nil, err
	}
	refs = uniqueRefs(refs)
	// Group by partition: a position delete file applies to the data files
	// of its own partition only.
	type group struct {
		spec  int32
		part  map[int]any
		refs  []rowRef
		files int
	}
	var groups []*group
	byPart := map[string]*group{}
	last := ""
	for _, r := range refs {
		df, ok := live[r.File]
		if !ok {
			return nil, fmt.Errorf("%w: %s", errDeleteTarget, r.File)
		}
		if r.Pos < 0 || r.Pos >= df.Count() {
			return nil, fmt.Errorf("position delete: row %d of %s, which holds %d rows", r.Pos, r.File, df.Count())
		}
		key := fmt.Sprint(df.SpecID(), df.Partition())
		g := byPart[key]
		if g == nil {
			g = &group{spec: df.SpecID(), part: df.Partition()}
			byPart[key] = g
			groups = append(groups, g)
		}
		if r.File != last || len(g.refs) == 0 {
			g.files++
		}
		last = r.File
		g.refs = append(g.refs, r)
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("position deletes: the table's file IO %T cannot write", fsys)
	}
	run := uuid.New()
	var out []iceberg.DataFile
	for i, g := range groups {
		spec := tbl.Metadata().PartitionSpecByID(int(g.spec))
		if spec == nil {
			return nil, fmt.Errorf("position deletes: no partition spec %d", g.spec)
		}
		dir := tbl.Location() + "/data"
		if spec.NumFields() > 0 {
			dir += "/" + spec.PartitionToPath(partRecord(*spec, g.part), tbl.Schema())
		}
		name := fmt.Sprintf("%s/%05d-deletes-%s.parquet", dir, i, run)
		var ref *string
		if g.files == 1 {
			ref = &g.refs[0].File
		}
		df, err := writeDeleteFile(wfs, name, *spec, g.part, g.refs, ref, tbl.Properties())
		if err != nil {
			return nil, err
		}
		out = append(out, df)
	}
	return out, nil
}

// uniqueRefs is refs sorted by file and position, without duplicates (a
// copy: the caller's slice is left as it is).
func uniqueRefs(refs []rowRef) []rowRef {
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b rowRef) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Pos, b.Pos))
	})
	return slices.Compact(refs)
}

// partRecord is the partition values of a data file (by partition field
// id) as the spec's record.
func partRecord(spec iceberg.PartitionSpec, values map[int]any) partValue {
	rec := make(partValue, 0, spec.NumFields())
	for _, f := range spec.Fields() {
		rec = append(rec, values[f.FieldID])
	}
	return rec
}

// deleteWriteProps: position delete files are small and read whole;
// zstd as the data files.
var deleteWriteProps = parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd),
	parquet.WithDictionaryDefault(true), parquet.WithDataPageVersion(parquet.DataPageV2))

// writeDeleteFile writes one position delete file at name holding refs
// (sorted) and returns its manifest entry.
func writeDeleteFile(wfs icebergio.WriteFileIO, name string, spec iceberg.PartitionSpec, part map[int]any, refs []rowRef, ref *string, props iceberg.Properties) (iceberg.DataFile, error) {
	sc := itable.PositionalDeleteArrowSchema
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	paths := b.Field(0).(*array.StringBuilder)
	pos := b.Field(1).(*array.Int64Builder)
	for _, r := range refs {
		paths.Append(r.File)
		pos.Append(r.Pos)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	out, err := wfs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	cw := countingWriter{w: out}
	w, err := pqarrow.NewFileWriter(sc, &cw, deleteWriteProps, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		out.Close()
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		out.Close()
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		out.Close()
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("upload %s: %w", name, err)
	}
	meta, err := w.FileMetadata()
	if err != nil {
		return nil, err
	}
	values := part
	if spec.NumFields() == 0 {
		values = nil
	}
	df, err := itable.DataFileFromMetadata(itable.DataFileArgs{
		Schema: iceberg.PositionalDeleteSchema, Spec: spec, Format: iceberg.ParquetFile, Metadata: meta,
		FilePath: name, FileSize: cw.n, Content: iceberg.EntryContentPosDeletes,
		PartitionValues: values, Properties: props, FormatVersion: 2, ReferencedDataFile: ref,
	})
	if err != nil {
		return nil, fmt.Errorf("delete file %s: %w", name, err)
	}
	return df, nil
}

// stageFiles stages a run's data files and delete files in tx: the data
// files alone as an append, with deletes as one row delta (an overwrite
// snapshot holding both).
func stageFiles(ctx context.Context, tx *itable.Transaction, files, deletes []iceberg.DataFile, props iceberg.Properties) error {
	if len(deletes) == 0 {
		if len(files) == 0 {
			return nil
		}
		// The files are new (their names carry fresh UUIDs): checking them
		// against every file of the table would read all its manifests.
		return tx.AddDataFiles(ctx, files, props, itable.WithoutDuplicateCheck())
	}
	return tx.NewRowDelta(props).AddRows(files...).AddDeletes(deletes...).Commit(ctx)
}

// deletesStand tells whether every data file the delete files name is
// still in tbl (a retried commit stages them on a fresher table).
func deletesStand(ctx context.Context, tbl *itable.Table, deletes []iceberg.DataFile, refs []rowRef) error {
	if len(deletes) == 0 {
		return nil
	}
	live, err := liveDataFiles(ctx, tbl)
	if err != nil {
		return err
	}
	for _, r := range refs {
		if _, ok := live[r.File]; !ok {
			return fmt.Errorf("%w: %s", errDeleteTarget, r.File)
		}
	}
	return nil
}

// The join of a keyed table (table.Table.PrimaryKey) with its Iceberg
// table. A continuous run of a keyed table deletes, in its commit, the
// Iceberg rows of every key it changes: the keys of the rows it writes
// (collected as its reader hands them over, runKeys) and the keys the
// store deleted at the sequences it commits (the store's delete log,
// table.Table.DeletedKeys). Rows the store superseded before the run read
// them are dead-marked and never reach the reader, so the run writes each
// key's latest row only; a key deleted and written again between two runs
// has both its delete and its new row in the run, and ends as the new row.
// The cold key index (keyindex.go) finds the rows to delete.

// errKeyedTimeMode: a keyed table's cold tier commits by sequence only.
var errKeyedTimeMode = errors.New("a keyed table compacts in continuous mode only (compact.iceberg.continuous: true)")

// runKeys are the encoded keys (appendKey) of the rows a keyed run writes
// and of the deletes it commits, each once. The readers of days written
// at once add to it together.
type runKeys struct {
	keyCols []string
	types   map[string]table.Type // the Iceberg columns' sluice types
	mu      sync.Mutex
	// keys are the keys with the source position of the run's change of
	// each: its row's, or its delete's (the zero sourcePos for a change
	// without one).
	keys map[string]runChange
	// table is the key index at the snapshot the run's attempt started
	// from, when the run writes source positions: a row of the store
	// whose key the table holds a later change of is not written.
	table *keyIndex
	// skipped counts those rows.
	skipped int64
}

func newRunKeys(keyCols []string, schema []table.Column) *runKeys {
	types := make(map[string]table.Type, len(schema))
	for _, c := range schema {
		types[c.Name] = c.Type
	}
	return &runKeys{keyCols: keyCols, types: types, keys: map[string]runChange{}}
}

// runChange is a run's change of a key: a row it writes (row) or a delete
// it commits, at its source position.
type runChange struct {
	pos sourcePos
	row bool
}

// addRows adds the keys of rows of blk, whose vectors are cols', and
// returns the rows to write: rows less those whose key the Iceberg table
// holds a later change of (another node committed it first, after a
// rebalance moved the key's partition), which must not come back.
func (k *runKeys) addRows(cols []table.Column, blk *table.BlockRows, rows []int32) ([]int32, error) {
	at := make([]int, len(k.keyCols))
	for i, name := range k.keyCols {
		at[i] = slices.IndexFunc(cols, func(c table.Column) bool { return c.Name == name })
		if at[i] < 0 {
			return nil, fmt.Errorf("key column %q is not written", name)
		}
	}
	var out []int32 // nil until a row is left out
	// The source columns, when the run writes them (a keyed table fed by
	// a stream source): each key's position orders it against the row the
	// Iceberg table holds, which another node may have committed.
	batchAt := slices.IndexFunc(cols, func(c table.Column) bool { return c.Name == table.SourceBatchColumn })
	offsetAt := slices.IndexFunc(cols, func(c table.Column) bool { return c.Name == table.SourceOffsetColumn })
	k.mu.Lock()
	defer k.mu.Unlock()
	var buf []byte
	for j, r := range rows {
		buf = buf[:0]
		for _, i := range at {
			v, err := vectorValue(cols[i].Type, &blk.Cols[i], r)
			if err != nil {
				return nil, err
			}
			if buf, err = appendKey(buf, v); err != nil {
				return nil, err
			}
		}
		var pos sourcePos
		if batchAt >= 0 && offsetAt >= 0 {
			tags, offs := &blk.Cols[batchAt], &blk.Cols[offsetAt]
			if !tags.Null(r) && !offs.Null(r) && offs.Type == table.Int64 && (tags.Type == table.String || tags.Type == table.JSON) {
				if i := strings.LastIndexByte(tags.Strs[r], '@'); i > 0 {
					pos = sourcePos{partition: strings.Clone(tags.Strs[r][:i]), offset: offs.Ints[r]}
				}
			}
		}
		if k.table != nil && k.table.laterThan(buf, pos) {
			if out == nil {
				out = append(make([]int32, 0, len(rows)), rows[:j]...)
			}
			k.skipped++
			continue
		}
		if out != nil {
			out = append(out, r)
		}
		k.keys[string(buf)] = runChange{pos: pos, row: true}
	}
	if out == nil {
		return rows, nil
	}
	return out, nil
}

// addDelete adds a key the store deleted, given by its values (in
// keyCols' order, as the delete log returns them) and the position the
// delete left in the store's key index.
func (k *runKeys) addDelete(vals []any, at table.Position) error {
	key, err := encodeKeyValues(nil, k.keyCols, k.types, vals)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if ch, ok := k.keys[string(key)]; ok && ch.row {
		// A key the run writes a row of keeps that row's position: the
		// delete log's record is older (the row is the key's state).
		return nil
	}
	// The log is read in sequence order: a later delete of the key
	// replaces an earlier one.
	k.keys[string(key)] = runChange{pos: sourcePos{partition: at.Partition, offset: at.Offset}}
	return nil
}

// list is the keys collected, with the position of the run's row of each.
func (k *runKeys) list() []runKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]runKey, 0, len(k.keys))
	for key, ch := range k.keys {
		out = append(out, runKey{key: []byte(key), partition: ch.pos.partition, offset: ch.pos.offset, positioned: ch.pos.partition != ""})
	}
	return out
}

// encodeKeyValues appends the encoding of a key's values (in keyCols'
// order) to dst, each value taken as the Iceberg column's type holds it
// (types: by column), so a key reads alike from the store, from the delete
// log and from a data file.
func encodeKeyValues(dst []byte, keyCols []string, types map[string]table.Type, vals []any) ([]byte, error) {
	if len(vals) != len(keyCols) {
		return dst, fmt.Errorf("%d key values for %d key columns", len(vals), len(keyCols))
	}
	for i, v := range vals {
		var err error
		if dst, err = appendKey(dst, keyAs(v, types[keyCols[i]])); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// keyAs is a key value as a column of type typ holds it in a data file: an
// integer in a column widened to float is a float; JSON is its text.
func keyAs(v any, typ table.Type) any {
	switch x := v.(type) {
	case int64:
		if typ == table.Float64 {
			return float64(x)
		}
	case json.RawMessage:
		return string(x)
	}
	return v
}

// vectorValue is row r of v as a column of type typ holds it in a data
// file (the conversions appendVector makes).
func vectorValue(typ table.Type, v *table.ColumnVector, r int32) (any, error) {
	if v.Null(r) {
		return nil, nil
	}
	switch v.Type {
	case table.Int64:
		if typ == table.Float64 {
			return float64(v.Ints[r]), nil
		}
		return v.Ints[r], nil
	case table.Float64:
		return v.Floats[r], nil
	case table.String, table.JSON:
		return v.Strs[r], nil
	case table.Bool:
		return v.Ints[r] != 0, nil
	case table.Timestamp:
		return time.Unix(0, v.Ints[r]).UTC(), nil
	}
	return nil, fmt.Errorf("a key column of type %v", v.Type)
}

// runKeyedDeletes is the keyed run's delete source for one attempt: the
// Iceberg rows of the keys rk holds (the rows the attempt wrote) and of the
// keys the store deleted at the sequences sel commits, found through the
// key index. A delete, like a row, leaves a row of the Iceberg table that
// is a later change of its key (another node committed it first) where it
// is (keyIndex.deletesFor).
func (c *Compactor) runKeyedDeletes(ctx context.Context, tbl *itable.Table, rk *runKeys, sel rowSel) ([]rowRef, error) {
	if err := c.t.DeletedKeys(ctx, sel.seqFrom, sel.seqLimit, rk.addDelete); err != nil {
		return nil, err
	}
	return c.keyedDeletesAt(rk.keyCols, rk.list)(ctx, tbl)
}

// storeChange is the store's latest change of a key since the committed
// mark, as a two-tier query of a keyed table sees it: at its source
// position (the zero sourcePos: none), a row or a delete.
type storeChange struct {
	pos     sourcePos
	deleted bool
}

// hides reports whether the store's change ch of a key hides an Iceberg
// row of the key at pos: unless the row is a later change of the same
// source partition, the store's change is the key's state. The Iceberg
// table can hold a later one: another node committed it (a rebalance moved
// the key's partition, and this node's older change waits for its next
// run, which will leave it out), or the same message, which another node
// stored too and committed first (this node's copy is then left out by the
// claims). Of a row at the same offset the Iceberg row is that message; a
// delete at the same offset kept the position of the upsert it followed
// (a delete without a position of its own), so it hides that row.
func (ch storeChange) hides(pos sourcePos) bool {
	if ch.pos.partition == "" || pos.partition != ch.pos.partition {
		return true
	}
	if ch.deleted {
		return pos.offset <= ch.pos.offset
	}
	return pos.offset < ch.pos.offset
}

// hiddenKeys are the encoded keys whose Iceberg rows a two-tier query of a
// keyed table may leave out, with the store's latest change of each: every
// key the store changed (upserted or deleted) at a sequence of at least
// mark, read through view, the same view the query's hot side reads. The
// hot side returns the key's current row, or none when it was deleted.
func (c *Compactor) hiddenKeys(ctx context.Context, view *table.View, mark uint64, types map[string]table.Type) (map[string]storeChange, error) {
	keyCols := c.t.PrimaryKey()
	hidden := map[string]storeChange{}
	var buf []byte
	err := view.ChangedKeys(ctx, mark, func(ch table.KeyChange) error {
		var err error
		if buf, err = encodeKeyValues(buf[:0], keyCols, types, ch.Key); err != nil {
			return err
		}
		if prev, ok := hidden[string(buf)]; ok && !prev.deleted && ch.Deleted {
			return nil // a current row is later than any delete of its key
		}
		hidden[string(buf)] = storeChange{pos: sourcePos{partition: ch.At.Partition, offset: ch.At.Offset}, deleted: ch.Deleted}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("coldtier: table %s: keys changed in the store: %w", c.t.Name(), err)
	}
	return hidden, nil
}

// errStop ends a walk early once it found what it looked for.
var errStop = errors.New("stop")
