package coldread

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/table"
)

// Scan planning from manifests kept between queries. A keyed table read
// before maintenance carries a data manifest and a delete manifest per
// continuous run since the last rewrite (hundreds after a day of small
// runs), and iceberg-go's planning opens and decodes every one of them on
// every query, parsing each file's Avro schema again: most of such a
// query's cost once its delete files are cached (cache.go). Manifests and
// manifest lists never change under their path (a writer names them by
// its commit's UUID, and a commit only adds new ones), so their decoded
// entries are kept between queries, and each query's plan is made from
// them here: a new snapshot decodes only the manifests its commit added.
//
// The plan applies the Iceberg spec's rules for position deletes as
// iceberg-go does: a delete file applies to a data file of the same
// partition (spec and values), or the one it references, whose data
// sequence number is not greater than its own. A snapshot this planner
// does not handle (equality deletes, deletion vectors, delete files not
// in Parquet, manifests embedded in the metadata) is planned by iceberg-go
// instead.

// ManifestCacheBytes bounds the memory the decoded entries of manifests
// hold between queries, over every table of the process (least recently
// used evicted first). An entry costs about a kilobyte and a half for a
// table of ten columns (its path, column statistics and bounds), so
// 64 MiB holds some forty thousand data and delete files.
const ManifestCacheBytes = 64 << 20

// ManifestListCacheBytes bounds the decoded manifest lists kept (a few
// hundred bytes per manifest).
const ManifestListCacheBytes = 8 << 20

var (
	manifestCache = newLRU[manifestKey, []planEntry](ManifestCacheBytes)
	listCache     = newLRU[listKey, []iceberg.ManifestFile](ManifestListCacheBytes)
)

// manifestKey names a manifest's content: its path, and its length, the
// snapshot that added it and its sequence number as the manifest list
// gives them. The entries inherit the sequence number and snapshot from
// the manifest list, so those are part of what was decoded; the length
// guards against a path ever reused for other content.
type manifestKey struct {
	path          string
	length        int64
	addedSnapshot int64
	seq           int64
}

func manifestKeyOf(mf iceberg.ManifestFile) manifestKey {
	return manifestKey{path: mf.FilePath(), length: mf.Length(), addedSnapshot: mf.SnapshotID(), seq: mf.SequenceNum()}
}

// listKey names a snapshot's manifest list: its path and the snapshot's
// id and sequence number.
type listKey struct {
	path     string
	snapshot int64
	seq      int64
}

// planEntry is a live manifest entry as the planner uses it: what
// iceberg-go's accessors would copy or work out again for every query
// (its bounds maps are cloned at each call, and a plan compares every
// data file with every delete file of its partition) taken once, when the
// manifest is decoded.
type planEntry struct {
	entry     iceberg.ManifestEntry
	file      iceberg.DataFile
	seq       int64
	partition string
	lower     map[int][]byte
	upper     map[int][]byte
}

func newPlanEntry(e iceberg.ManifestEntry) planEntry {
	df := e.DataFile()
	return planEntry{entry: e, file: df, seq: e.SequenceNum(), partition: partitionKey(df),
		lower: df.LowerBoundValues(), upper: df.UpperBoundValues()}
}

// manifestFetchers is how many manifests a plan decodes at once (each is
// a GET on S3).
const manifestFetchers = 8

// planScan plans the scan of tbl's current snapshot for matcher m: the
// data files that may hold a matching row, each with the position delete
// files that apply to it, in the manifests' order. planned is false when
// the snapshot needs iceberg-go's planning.
func planScan(ctx context.Context, tbl *itable.Table, m *matcher, st *Stats) (tasks []itable.FileScanTask, planned bool, err error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil || snap.ManifestList == "" {
		return nil, false, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("file IO: %w", err)
	}
	manifests, err := manifestsOf(fs, snap)
	if err != nil {
		return nil, false, err
	}
	entries, err := manifestEntries(ctx, fs, manifests, st)
	if err != nil {
		return nil, false, err
	}
	var data []planEntry
	var deletes positionDeletes
	for i, mf := range manifests {
		for _, e := range entries[i] {
			df := e.file
			switch {
			case df.ContentType() == iceberg.EntryContentData && mf.ManifestContent() == iceberg.ManifestContentData:
				data = append(data, e)
			case df.ContentType() == iceberg.EntryContentPosDeletes && df.FileFormat() == iceberg.ParquetFile:
				deletes.add(e)
			default:
				return nil, false, nil // equality deletes, deletion vectors
			}
		}
	}
	deletes.sort()
	prune := m.pruner(tbl.Schema())
	tasks = make([]itable.FileScanTask, 0, len(data))
	for _, e := range data {
		df := e.file
		if df.Count() == 0 || !prune(e) {
			continue
		}
		seq := e.seq
		task := itable.FileScanTask{File: df, DeleteFiles: deletes.forDataFile(e), Length: df.FileSizeBytes(), FirstRowID: df.FirstRowID()}
		if seq >= 0 {
			task.DataSequenceNumber = &seq
		}
		tasks = append(tasks, task)
	}
	return tasks, true, nil
}

// manifestsOf returns the manifests of snap's manifest list, decoded once.
func manifestsOf(fs icebergio.IO, snap *itable.Snapshot) ([]iceberg.ManifestFile, error) {
	seq := snap.SequenceNumber
	key := listKey{path: snap.ManifestList, snapshot: snap.SnapshotID, seq: seq}
	if list, ok := listCache.get(key); ok {
		return list, nil
	}
	list, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("manifest list %s: %w", snap.ManifestList, err)
	}
	size := int64(128 + len(key.path))
	for _, mf := range list {
		size += 256 + int64(len(mf.FilePath())) + 96*int64(len(mf.Partitions()))
	}
	listCache.put(key, list, size)
	return list, nil
}

// manifestEntries returns the live entries (added and existing) of each
// manifest, from the cache or decoded, several at once.
func manifestEntries(ctx context.Context, fs icebergio.IO, manifests []iceberg.ManifestFile, st *Stats) ([][]planEntry, error) {
	entries := make([][]planEntry, len(manifests))
	errs := make([]error, len(manifests))
	sem := make(chan struct{}, manifestFetchers)
	var wg sync.WaitGroup
	st.Manifests = len(manifests)
	for i, mf := range manifests {
		key := manifestKeyOf(mf)
		if es, ok := manifestCache.get(key); ok {
			entries[i] = es
			st.ManifestsCached++
			continue
		}
		if err := ctx.Err(); err != nil {
			errs[i] = err
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var es []planEntry
			for e, err := range mf.Entries(fs, true) {
				if err != nil {
					errs[i] = fmt.Errorf("manifest %s: %w", mf.FilePath(), err)
					return
				}
				es = append(es, newPlanEntry(e))
			}
			manifestCache.put(key, es, entriesBytes(key, es))
			entries[i] = es
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// entriesBytes is the memory a manifest's decoded entries hold, roughly:
// each file's path, statistics, bounds and partition values, and the
// structures around them.
func entriesBytes(key manifestKey, es []planEntry) int64 {
	const entryOverhead, perStat, perBound, perPartition = 384, 48, 48, 64
	n := int64(128 + len(key.path))
	for _, e := range es {
		df := e.file
		n += entryOverhead + int64(len(df.FilePath())+len(e.partition))
		n += perStat * int64(len(df.ColumnSizes())+len(df.ValueCounts())+len(df.NullValueCounts())+len(df.NaNValueCounts()))
		// The bounds twice: the data file's own and the entry's copy.
		for _, b := range e.lower {
			n += 2 * (perBound + int64(len(b)))
		}
		for _, b := range e.upper {
			n += 2 * (perBound + int64(len(b)))
		}
		n += perPartition*int64(len(df.Partition())) + 8*int64(len(df.SplitOffsets())+len(df.EqualityFieldIDs()))
	}
	return n
}

// positionDeletes indexes a plan's position delete files: by the data
// file a file references, or else by partition; each list sorted by data
// sequence number.
type positionDeletes struct {
	byPath, byPartition map[string][]planEntry
}

func (d *positionDeletes) add(e planEntry) {
	if ref := e.file.ReferencedDataFile(); ref != nil && *ref != "" {
		if d.byPath == nil {
			d.byPath = map[string][]planEntry{}
		}
		d.byPath[*ref] = append(d.byPath[*ref], e)
		return
	}
	if d.byPartition == nil {
		d.byPartition = map[string][]planEntry{}
	}
	d.byPartition[e.partition] = append(d.byPartition[e.partition], e)
}

func (d *positionDeletes) sort() {
	bySeq := func(a, b planEntry) int { return int(sign(a.seq - b.seq)) }
	for _, es := range d.byPath {
		slices.SortStableFunc(es, bySeq)
	}
	for _, es := range d.byPartition {
		slices.SortStableFunc(es, bySeq)
	}
}

func sign(n int64) int64 {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// filePathField is the field id of a position delete file's file_path.
const filePathField = 2147483546

// DeleteMayName reports whether a position delete file with these lower
// and upper bounds may hold rows of the data file path: its file_path
// bounds, when written, enclose path.
func DeleteMayName(lower, upper map[int][]byte, path string) bool {
	if lo := lower[filePathField]; lo != nil && string(lo) > path {
		return false
	}
	if hi := upper[filePathField]; hi != nil && string(hi) < path {
		return false
	}
	return true
}

// forDataFile returns the delete files that apply to the data file of e:
// of its partition or referencing it, with a data sequence number at or
// past its own (a delete committed before the data file was written
// cannot name its rows).
func (d *positionDeletes) forDataFile(e planEntry) []iceberg.DataFile {
	if len(d.byPath) == 0 && len(d.byPartition) == 0 {
		return nil
	}
	path, seq := e.file.FilePath(), e.seq
	from := func(es []planEntry) []planEntry {
		return es[sort.Search(len(es), func(i int) bool { return es[i].seq >= seq }):]
	}
	var out []iceberg.DataFile
	if len(d.byPartition) > 0 {
		for _, del := range from(d.byPartition[e.partition]) {
			if del.mayName(path) {
				out = append(out, del.file)
			}
		}
	}
	for _, del := range from(d.byPath[path]) {
		out = append(out, del.file)
	}
	return out
}

// mayName reports whether the position delete file del may hold rows of
// the data file path: it has rows, and its file_path bounds (when
// written) enclose path.
func (del planEntry) mayName(path string) bool {
	return del.file.Count() > 0 && DeleteMayName(del.lower, del.upper, path)
}

// partitionKey is a file's partition, its spec and values, as a string
// equal for equal partitions.
func partitionKey(df iceberg.DataFile) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(df.SpecID())))
	part := df.Partition()
	for _, id := range slices.Sorted(maps.Keys(part)) {
		fmt.Fprintf(&b, "|%d=%T:%v", id, part[id], part[id])
	}
	return b.String()
}

// pruner returns whether a data file may hold a row matching m, by its
// bounds on the time column and the hash column (string or int64): the
// pruning iceberg-go's inclusive metrics evaluator does with m.filter().
// Bounds absent or of another width leave the file in.
func (m *matcher) pruner(schema *iceberg.Schema) func(planEntry) bool {
	var tests []func(lo, hi map[int][]byte) bool
	if f, ok := schema.FindFieldByName(m.timeCol); ok && (!m.q.From.IsZero() || !m.q.To.IsZero()) {
		switch f.Type.(type) {
		case iceberg.TimestampType, iceberg.TimestampTzType:
			id := f.ID
			tests = append(tests, func(lo, hi map[int][]byte) bool {
				if l, ok := int64Bound(lo[id]); ok && !m.q.To.IsZero() && l >= ceilMicro(m.q.To) {
					return false
				}
				if h, ok := int64Bound(hi[id]); ok && !m.q.From.IsZero() && h < floorMicro(m.q.From) {
					return false
				}
				return true
			})
		}
	}
	if f, ok := schema.FindFieldByName(m.hashC); ok && m.hash != nil {
		id := f.ID
		switch {
		case m.types[m.hashC] == table.String && f.Type.Equals(iceberg.PrimitiveTypes.String):
			tests = append(tests, func(lo, hi map[int][]byte) bool {
				l, h := lo[id], hi[id]
				if l == nil || h == nil {
					return true
				}
				for _, v := range m.hashVals {
					if s := []byte(v.(string)); bytes.Compare(s, l) >= 0 && bytes.Compare(s, h) <= 0 {
						return true
					}
				}
				return false
			})
		case m.types[m.hashC] == table.Int64 && f.Type.Equals(iceberg.PrimitiveTypes.Int64):
			tests = append(tests, func(lo, hi map[int][]byte) bool {
				l, okL := int64Bound(lo[id])
				h, okH := int64Bound(hi[id])
				if !okL || !okH {
					return true
				}
				for _, v := range m.hashVals {
					if n := v.(int64); n >= l && n <= h {
						return true
					}
				}
				return false
			})
		}
	}
	return func(e planEntry) bool {
		for _, t := range tests {
			if !t(e.lower, e.upper) {
				return false
			}
		}
		return true
	}
}

// int64Bound decodes an Iceberg bound of a long or a timestamp (eight
// bytes, little-endian).
func int64Bound(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint64(b)), true
}
