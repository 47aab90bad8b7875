package coldread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"
)

// Position deletes on the fast path: the position delete files of a plan
// (Iceberg v2: rows of file_path, pos) are read once before the data
// files, into the sorted deleted positions of each data file of the plan;
// a row group's decoder drops its rows at those positions before any
// other test, so a deleted row is never matched nor emitted. Deletion
// vectors and equality deletes are left to iceberg-go's Arrow path.

// posDelete is one row of a position delete file.
type posDelete struct {
	FilePath string `parquet:"file_path"`
	Pos      int64  `parquet:"pos"`
}

// readDeletes reads the position delete files of tasks (each once: a
// partition's file may apply to several data files; a file decoded by an
// earlier query comes from deleteCache) and returns the deleted positions
// of each task's data file, sorted. The slices may be shared with the
// cache: read-only.
func readDeletes(ctx context.Context, fs icebergio.IO, tasks []itable.FileScanTask, st *Stats) (map[string][]int64, error) {
	var files []iceberg.DataFile
	seen := map[string]bool{}
	wanted := map[string]bool{}
	for _, t := range tasks {
		if len(t.EqualityDeleteFiles) > 0 || len(t.DeletionVectorFiles) > 0 || forceArrow {
			continue // the Arrow path reads the task with its deletes
		}
		for _, d := range t.DeleteFiles {
			wanted[t.File.FilePath()] = true
			if !seen[d.FilePath()] {
				seen[d.FilePath()] = true
				files = append(files, d)
			}
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	// Each data file's positions from every delete file of the plan that
	// covers it: a data file outlives many runs, each of which may write
	// a delete file covering it.
	parts := map[string][][]int64{}
	var buf []posDelete
	for _, df := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		key := keyOf(df)
		fp, ok := deleteCache.get(key)
		if ok {
			st.DeleteFilesCached++
		} else {
			if buf == nil {
				buf = make([]posDelete, 1024)
			}
			var err error
			if fp, err = decodeDeleteFile(fs, df, buf); err != nil {
				return nil, fmt.Errorf("position delete file %s: %w", df.FilePath(), err)
			}
			deleteCache.put(key, fp)
		}
		for path, pos := range fp {
			if wanted[path] {
				parts[path] = append(parts[path], pos)
			}
		}
		st.DeleteFiles++
	}
	deleted := make(map[string][]int64, len(parts))
	for path, ps := range parts {
		if len(ps) == 1 {
			deleted[path] = ps[0]
			continue
		}
		// A new slice: the parts are the cache's.
		merged := make([]int64, 0, len(ps[0])*len(ps))
		for _, p := range ps {
			merged = append(merged, p...)
		}
		slices.Sort(merged)
		deleted[path] = slices.Compact(merged)
	}
	return deleted, nil
}

// decodeDeleteFile reads the position delete file df into its deleted
// positions by data file, each sorted, without duplicates, and copied to
// a slice of its own length (the cache counts its bytes by length, and an
// append to a shared slice must copy).
func decodeDeleteFile(fs icebergio.IO, df iceberg.DataFile, buf []posDelete) (filePositions, error) {
	fp := filePositions{}
	if err := readDeleteFile(fs, df, buf, func(d posDelete) {
		fp[d.FilePath] = append(fp[d.FilePath], d.Pos)
	}); err != nil {
		return nil, err
	}
	for path, pos := range fp {
		slices.Sort(pos)
		fp[path] = slices.Clone(slices.Compact(pos))
	}
	return fp, nil
}

// readDeleteFile calls fn with each row of the position delete file df.
func readDeleteFile(fs icebergio.IO, df iceberg.DataFile, buf []posDelete, fn func(posDelete)) (err error) {
	if df.FileFormat() != iceberg.ParquetFile {
		return fmt.Errorf("format %s: only Parquet is read", df.FileFormat())
	}
	f, err := fs.Open(df.FilePath())
	if err != nil {
		return err
	}
	defer f.Close()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt file: %v", p)
		}
	}()
	pf, err := parquet.OpenFile(f, df.FileSizeBytes())
	if err != nil {
		return err
	}
	r := parquet.NewGenericReader[posDelete](pf)
	defer r.Close()
	for {
		n, err := r.Read(buf)
		for _, d := range buf[:n] {
			fn(d)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// dropDeleted removes from sel (rows of a row group, ascending) those
// whose position in the file (first + row) is in dead (sorted).
func dropDeleted(sel []int32, dead []int64, first int64) []int32 {
	if len(dead) == 0 || len(sel) == 0 {
		return sel
	}
	i := sort.Search(len(dead), func(i int) bool { return dead[i] >= first+int64(sel[0]) })
	if i == len(dead) || dead[i] > first+int64(sel[len(sel)-1]) {
		return sel
	}
	kept := sel[:0]
	for _, r := range sel {
		pos := first + int64(r)
		for i < len(dead) && dead[i] < pos {
			i++
		}
		if i < len(dead) && dead[i] == pos {
			continue
		}
		kept = append(kept, r)
	}
	return kept
}
