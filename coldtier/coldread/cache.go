package coldread

import (
	"container/list"
	"sync"

	"github.com/apache/iceberg-go"
)

// The decoded positions of position delete files, kept between queries.
// A keyed table read before maintenance plans every delete file its runs
// wrote since the last rewrite (hundreds after a day of small runs), and
// decoding them is most of such a query's cost. An Iceberg file never
// changes under its path (a writer makes a new file with a new, unique
// name), so an entry keyed by the delete file's path, with its size and
// row count as its manifest entry gives them, is exact by construction:
// no invalidation is needed, only a bound on the memory held.

// DeleteCacheBytes bounds the memory the decoded positions of position
// delete files hold between queries, over every table of the process
// (least recently used evicted first). 64 MiB holds the positions of
// about eight million deleted rows, far more than the delete files a
// table carries between two maintenance passes.
const DeleteCacheBytes = 64 << 20

// deleteCache is the process's cache; its bound is DeleteCacheBytes.
var deleteCache = newPositionCache(DeleteCacheBytes)

// positionKey names a delete file's content: its path, and its size and
// row count as written in the manifest entry (a guard should a path ever
// be reused for other content).
type positionKey struct {
	path       string
	size, rows int64
}

func keyOf(df iceberg.DataFile) positionKey {
	return positionKey{path: df.FilePath(), size: df.FileSizeBytes(), rows: df.Count()}
}

// filePositions are a delete file's deleted positions by data file path,
// each sorted and without duplicates. Shared between queries: read-only
// once made.
type filePositions map[string][]int64

// bytes is the memory an entry holds, roughly: the paths, the positions,
// and the map's and slices' headers.
func (fp filePositions) bytes(key positionKey) int64 {
	const entryOverhead, perFile = 128, 64
	n := int64(entryOverhead + len(key.path))
	for path, pos := range fp {
		n += int64(perFile + len(path) + 8*cap(pos))
	}
	return n
}

// positionCache is a byte-bounded LRU cache of decoded delete files. One
// mutex guards it; a lookup holds it only to move a list element, and the
// decoding of a missed file happens outside it (two queries missing the
// same file at once both decode it, and the second store is dropped).
type positionCache struct {
	mu      sync.Mutex
	max     int64
	used    int64
	lru     *list.List // of *positionEntry, most recently used first
	entries map[positionKey]*list.Element
	hits    int64
}

type positionEntry struct {
	key   positionKey
	pos   filePositions
	bytes int64
}

func newPositionCache(maxBytes int64) *positionCache {
	return &positionCache{max: maxBytes, lru: list.New(), entries: map[positionKey]*list.Element{}}
}

// get returns the positions of the delete file key, if kept.
func (c *positionCache) get(key positionKey) (filePositions, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	c.hits++
	return el.Value.(*positionEntry).pos, true
}

// put keeps the positions of the delete file key, evicting the least
// recently used entries to stay within the bound; an entry larger than
// the bound is not kept.
func (c *positionCache) put(key positionKey, pos filePositions) {
	size := pos.bytes(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.max {
		return
	}
	if _, ok := c.entries[key]; ok {
		return
	}
	for c.used+size > c.max {
		last := c.lru.Back()
		e := last.Value.(*positionEntry)
		c.lru.Remove(last)
		delete(c.entries, e.key)
		c.used -= e.bytes
	}
	c.entries[key] = c.lru.PushFront(&positionEntry{key: key, pos: pos, bytes: size})
	c.used += size
}

// state is what the cache holds: bytes, entries and hits so far.
func (c *positionCache) state() (used int64, entries int, hits int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.entries), c.hits
}
