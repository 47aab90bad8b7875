package coldtier

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	icebergio "github.com/apache/iceberg-go/io"

	"github.com/sluicedb/sluice/table"
)

// positionedRow is a row of a test data file: key n and its source
// position (batch "" and offset -1 write nulls).
type positionedRow struct {
	n      int64
	batch  string
	offset int64
}

// writePositionedFile writes a Parquet data file with the key column n and
// the two source columns, as a keyed table's run writes them.
func writePositionedFile(t *testing.T, path string, rows []positionedRow) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: table.SourceBatchColumn, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: table.SourceOffsetColumn, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.n)
		if r.batch == "" {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(r.batch)
		}
		if r.offset < 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(r.offset)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// indexFile adds the rows of the data file at path to ix as a commit of
// data sequence number seq would (keyIndex.apply's added data files).
func indexFile(t *testing.T, ix *keyIndex, path string, seq int64) {
	t.Helper()
	id := uint32(len(ix.files))
	ix.files = append(ix.files, path)
	err := readKeyRows(context.Background(), icebergio.LocalFS{}, path, ix.keyCols, func(pos int64, key []byte, at sourcePos) {
		ix.add(key, keyLoc{file: id, pos: uint32(pos), seq: seq, part: ix.partID(at.partition), off: at.offset})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func encodedKey(t *testing.T, n int64) []byte {
	t.Helper()
	k, err := appendKey(nil, n)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyIndexOrdersBySourcePosition commits two nodes' rows of the same
// keys in the wrong order: node B, which took partition 3 over, commits the
// newer changes (offsets 20..) first; node A, which held it before the
// rebalance, commits its older changes (offsets 10..) after. The index
// keeps B's rows as the keys' state and A's as stale (deleted by the next
// run), and a run that writes A's older change of a key does not delete
// B's newer row. Rows of another partition or without a position are
// ordered by commit, as before. The order survives a save and a load.
func TestKeyIndexOrdersBySourcePosition(t *testing.T) {
	dir := t.TempDir()
	const p3 = "kafka/orders/3/topicid"
	const p4 = "kafka/orders/4/topicid"
	newer := filepath.Join(dir, "b-newer.parquet")
	older := filepath.Join(dir, "a-older.parquet")
	writePositionedFile(t, newer, []positionedRow{
		{n: 1, batch: p3 + "@20-30", offset: 20},
		{n: 2, batch: p3 + "@20-30", offset: 21},
		{n: 3, batch: p4 + "@5-6", offset: 5},    // another partition than A's row of key 3
		{n: 4, batch: "", offset: -1},            // no position (HTTP)
		{n: 5, batch: p3 + "@20-30", offset: 22}, // A has none of key 5
	})
	writePositionedFile(t, older, []positionedRow{
		{n: 1, batch: p3 + "@10-12", offset: 10},
		{n: 2, batch: p3 + "@10-12", offset: 11},
		{n: 3, batch: p3 + "@10-12", offset: 12},
		{n: 4, batch: p3 + "@10-14", offset: 13},
	})
	ix := &keyIndex{keyCols: []string{"n"}, keys: map[string]keyLoc{}}
	indexFile(t, ix, newer, 1) // B commits first
	indexFile(t, ix, older, 2) // A commits after it

	check := func(when string, ix *keyIndex) {
		t.Helper()
		want := map[int64]string{1: newer, 2: newer, 3: older, 4: older, 5: newer}
		for n, file := range want {
			loc, ok := ix.keys[string(encodedKey(t, n))]
			if !ok {
				t.Errorf("%s: key %d not in the index", when, n)
				continue
			}
			if got := ix.files[loc.file]; got != file {
				t.Errorf("%s: key %d's state is the row in %s, want %s", when, n, filepath.Base(got), filepath.Base(file))
			}
		}
		if len(ix.stale) != 4 {
			t.Errorf("%s: %d stale rows, want 4 (one per key both files hold)", when, len(ix.stale))
		}
		for _, l := range ix.stale {
			n := []int64{1, 2, 3, 4}[l.pos]
			if wantStale := map[int64]string{1: older, 2: older, 3: newer, 4: newer}[n]; ix.files[l.file] != wantStale {
				t.Errorf("%s: stale row %s:%d, want key %d's row in %s stale", when, filepath.Base(ix.files[l.file]), l.pos, n, filepath.Base(wantStale))
			}
		}
	}
	check("after the commits", ix)

	// A run that writes A's change of key 1 at offset 15 (older than B's
	// 20) keeps B's row; one at offset 25 deletes it; a key of another
	// partition or without a position deletes the key's row (commit order).
	refs := ix.deletesFor([]runKey{
		{key: encodedKey(t, 1), partition: p3, offset: 15, positioned: true},
		{key: encodedKey(t, 2), partition: p3, offset: 25, positioned: true},
		{key: encodedKey(t, 5), partition: p4, offset: 1, positioned: true},
	})
	deleted := map[rowRef]bool{}
	for _, r := range refs {
		deleted[r] = true
	}
	if deleted[rowRef{File: newer, Pos: 0}] {
		t.Errorf("a run writing key 1's change at offset 15 deletes the key's row at offset 20")
	}
	if !deleted[rowRef{File: newer, Pos: 1}] {
		t.Errorf("a run writing key 2's change at offset 25 keeps the key's row at offset 21")
	}
	if !deleted[rowRef{File: newer, Pos: 4}] {
		t.Errorf("a run writing key 5's change of another partition keeps the key's row")
	}
	if len(refs) != 2+len(ix.stale) {
		t.Errorf("%d rows to delete, want %d (2 and the stale ones)", len(refs), 2+len(ix.stale))
	}

	path := filepath.Join(dir, "index.bin")
	if err := ix.save(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := loadKeyIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	check("loaded", loaded)
	// A later row of a loaded index still compares by position.
	later := filepath.Join(dir, "a-oldest.parquet")
	writePositionedFile(t, later, []positionedRow{{n: 1, batch: p3 + "@1-2", offset: 1}})
	indexFile(t, loaded, later, 3)
	if loc := loaded.keys[string(encodedKey(t, 1))]; loaded.files[loc.file] != newer {
		t.Errorf("after a third commit of an older change of key 1 into the loaded index, its state is in %s", filepath.Base(loaded.files[loc.file]))
	}
}
