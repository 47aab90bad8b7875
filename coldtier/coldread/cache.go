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

// positionCache is the byte-bounded cache of decoded delete files.
type positionCache struct {
	*lruCache[positionKey, filePositions]
}

func newPositionCache(maxBytes int64) *positionCache {
	return &positionCache{newLRU[positionKey, filePositions](maxBytes)}
}

// put keeps the positions of the delete file key (see lruCache.put).
func (c *positionCache) put(key positionKey, pos filePositions) {
	c.lruCache.put(key, pos, pos.bytes(key))
}

// lruCache is a byte-bounded LRU cache of values decoded from immutable
// files. One mutex guards it; a lookup holds it only to move a list
// element, and the decoding of a missed file happens outside it (two
// queries missing the same file at once both decode it, and the second
// store is dropped). Values are shared between queries: read-only once
// put.
type lruCache[K comparable, V any] struct {
	mu      sync.Mutex
	max     int64
	used    int64
	lru     *list.List // of *lruEntry, most recently used first
	entries map[K]*list.Element
	hits    int64
}

type lruEntry[K comparable, V any] struct {
	key   K
	val   V
	bytes int64
}

func newLRU[K comparable, V any](maxBytes int64) *lruCache[K, V] {
	return &lruCache[K, V]{max: maxBytes, lru: list.New(), entries: map[K]*list.Element{}}
}

// get returns the value kept under key, if any.
func (c *lruCache[K, V]) get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.lru.MoveToFront(el)
	c.hits++
	return el.Value.(*lruEntry[K, V]).val, true
}

// put keeps val, which holds about size bytes, under key, evicting the
// least recently used entries to stay within the bound; a value larger
// than the bound is not kept.
func (c *lruCache[K, V]) put(key K, val V, size int64) {
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
		e := last.Value.(*lruEntry[K, V])
		c.lru.Remove(last)
		delete(c.entries, e.key)
		c.used -= e.bytes
	}
	c.entries[key] = c.lru.PushFront(&lruEntry[K, V]{key: key, val: val, bytes: size})
	c.used += size
}

// state is what the cache holds: bytes, entries and hits so far.
func (c *lruCache[K, V]) state() (used int64, entries int, hits int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.entries), c.hits
}
