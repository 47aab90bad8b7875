package coldread

import (
	"context"
	"slices"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/sluicedb/sluice/table"
)

// The test hooks of the read path, for the external tests of this package
// (which compact through coldtier, and coldtier imports coldread).
var (
	// ForceArrow sends every file through iceberg-go's Arrow path.
	ForceArrow = &forceArrow
	// WholeFileMax is the size up to which a file is read in one request.
	WholeFileMax = &wholeFileMax
)

// SwapDeleteCache gives the read path an empty cache of decoded delete
// files bounded by maxBytes (0: nothing kept) until restore is called.
func SwapDeleteCache(maxBytes int64) (restore func()) {
	was := deleteCache
	deleteCache = newPositionCache(maxBytes)
	return func() { deleteCache = was }
}

// SwapManifestCache gives the planner empty caches of manifests and
// manifest lists, the manifests' bounded by maxBytes, until restore is
// called.
func SwapManifestCache(maxBytes int64) (restore func()) {
	was, wasLists := manifestCache, listCache
	manifestCache = newLRU[manifestKey, []planEntry](maxBytes)
	listCache = newLRU[listKey, []iceberg.ManifestFile](ManifestListCacheBytes)
	return func() { manifestCache, listCache = was, wasLists }
}

// ManifestCacheState is what the manifest cache holds: bytes and entries.
func ManifestCacheState() (used int64, entries int) {
	used, entries, _ = manifestCache.state()
	return used, entries
}

// Plans plans tbl's current snapshot for q (of the sluice table t) here
// and with iceberg-go, each as data file path → its delete files' paths,
// sorted; planned is false when this planner left it to iceberg-go.
func Plans(ctx context.Context, tbl *itable.Table, t *table.Table, q table.Query) (ours, theirs map[string][]string, planned bool, err error) {
	types := map[string]table.Type{}
	for _, col := range t.Schema() {
		types[col.Name] = col.Type
	}
	m, err := newMatcher(q, t.SortBy(), t.HashBy(), types)
	if err != nil {
		return nil, nil, false, err
	}
	byFile := func(tasks []itable.FileScanTask) map[string][]string {
		out := map[string][]string{}
		for _, task := range tasks {
			dels := []string{}
			for _, d := range task.DeleteFiles {
				dels = append(dels, d.FilePath())
			}
			slices.Sort(dels)
			out[task.File.FilePath()] = dels
		}
		return out
	}
	var st Stats
	tasks, planned, err := planScan(ctx, tbl, m, &st)
	if err != nil {
		return nil, nil, false, err
	}
	scan := tbl.Scan(itable.WithRowFilter(m.filter()))
	defer scan.Close()
	theirTasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	return byFile(tasks), byFile(theirTasks), planned, nil
}
