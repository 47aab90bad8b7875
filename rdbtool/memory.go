package rdbtool

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/rdb"
)

// MemoryRecord is one line of the memory report, the columns of
// redis-rdb-tools' `rdb -c memory` CSV.
type MemoryRecord struct {
	DB          int
	Type        rdb.Type
	Key         []byte // borrowed from the parser in callbacks; copied by Top
	Bytes       int64  // estimated memory in bytes
	Encoding    string // in-memory encoding Redis 7 would use (listpack, quicklist, intset, hashtable, skiplist, embstr, int, raw, stream)
	NumElements int64  // elements (string: length in bytes)
	LenLargest  int64  // length of the largest element in bytes
	ExpireAt    int64  // unix ms, 0 = none
}

// MemoryHeader is the CSV header line of the memory report.
const MemoryHeader = "database,type,key,size_in_bytes,encoding,num_elements,len_largest_element,expiry"

// typeNameCSV is the type column: redis-rdb-tools calls a zset "sortedset".
func typeNameCSV(t rdb.Type) string {
	if t == rdb.ZSet {
		return "sortedset"
	}
	return t.String()
}

// appendCSV appends r as one CSV line.
func (r *MemoryRecord) appendCSV(b []byte) []byte {
	b = strconv.AppendInt(b, int64(r.DB), 10)
	b = append(b, ',')
	b = append(b, typeNameCSV(r.Type)...)
	b = append(b, ',')
	b = appendCSVField(b, r.Key)
	b = append(b, ',')
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = append(b, ',')
	b = append(b, r.Encoding...)
	b = append(b, ',')
	b = strconv.AppendInt(b, r.NumElements, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, r.LenLargest, 10)
	b = append(b, ',')
	if r.ExpireAt != 0 {
		b = time.UnixMilli(r.ExpireAt).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
	}
	return append(b, '\n')
}

// appendCSVField appends s, quoted as RFC 4180 says when it holds a comma,
// quote, CR or LF; other bytes are written as they are.
func appendCSVField(b, s []byte) []byte {
	if !bytes.ContainsAny(s, ",\"\r\n") {
		return append(b, s...)
	}
	b = append(b, '"')
	for _, c := range s {
		if c == '"' {
			b = append(b, '"')
		}
		b = append(b, c)
	}
	return append(b, '"')
}

// scanMemory estimates every selected key and calls fn with its record
// (Key borrowed until fn returns).
func scanMemory(ctx context.Context, path string, opts Options, fn func(r *MemoryRecord) error) (Stats, error) {
	in, err := openInput(path, "memory", opts)
	if err != nil {
		return Stats{}, err
	}
	var (
		n     int
		st    Stats
		rec   MemoryRecord
		cbErr error
	)
	for in.next(ctx, &n) {
		e := in.p.Entry()
		if cbErr = in.estimate(e); cbErr != nil {
			break
		}
		size, enc := in.est.finish()
		if size < in.minSize {
			continue
		}
		rec = MemoryRecord{DB: e.DB, Type: e.Type, Key: e.Key, Bytes: size, Encoding: enc,
			NumElements: in.est.elements, LenLargest: in.est.largest, ExpireAt: e.ExpireAt}
		st.Keys++
		if cbErr = fn(&rec); cbErr != nil {
			break
		}
	}
	st.InputSize = in.size
	return st, in.finish(ctx, cbErr)
}

// Memory writes the memory report of the RDB file at path to w: the CSV
// header and one line per selected key.
func Memory(ctx context.Context, path string, w io.Writer, opts Options) (Stats, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteString(MemoryHeader + "\n")
	var line []byte
	st, err := scanMemory(ctx, path, opts, func(r *MemoryRecord) error {
		line = r.appendCSV(line[:0])
		_, err := bw.Write(line)
		return err
	})
	if ferr := bw.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("rdbtool: write: %w", ferr)
	}
	return st, err
}

// recordHeap is a min-heap on Bytes, holding the n biggest keys so far.
type recordHeap []MemoryRecord

func (h recordHeap) Len() int           { return len(h) }
func (h recordHeap) Less(i, j int) bool { return h[i].Bytes < h[j].Bytes }
func (h recordHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *recordHeap) Push(x any)        { *h = append(*h, x.(MemoryRecord)) }
func (h *recordHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Top returns the n keys with the largest estimated memory, biggest first.
func Top(ctx context.Context, path string, n int, opts Options) ([]MemoryRecord, Stats, error) {
	h := make(recordHeap, 0, n)
	st, err := scanMemory(ctx, path, opts, func(r *MemoryRecord) error {
		if n <= 0 {
			return nil
		}
		if len(h) < n {
			c := *r
			c.Key = bytes.Clone(r.Key)
			heap.Push(&h, c)
		} else if r.Bytes > h[0].Bytes {
			c := *r
			c.Key = append(h[0].Key[:0], r.Key...) // reuse the evicted key's bytes
			h[0] = c
			heap.Fix(&h, 0)
		}
		return nil
	})
	out := []MemoryRecord(h)
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out, st, err
}

// WriteMemoryCSV writes records as the memory report CSV (with header).
func WriteMemoryCSV(w io.Writer, recs []MemoryRecord) error {
	b := []byte(MemoryHeader + "\n")
	for i := range recs {
		b = recs[i].appendCSV(b)
	}
	_, err := w.Write(b)
	return err
}

// GroupBy says how PrefixSummary groups keys.
type GroupBy struct {
	// Separator ends a key segment (default ":").
	Separator string
	// Depth is the number of leading segments forming the group (default 1):
	// with depth 1 "user:42:name" falls in "user:*".
	Depth int
	// Pattern groups by the whole key with every run of digits replaced by
	// "*" ("user:42:name" -> "user:*:name") instead of by leading segments.
	Pattern bool
	// MaxGroups caps the number of distinct groups kept (default 100000);
	// keys of further groups are counted under "(other)".
	MaxGroups int
}

// GroupStats is one line of the prefix summary.
type GroupStats struct {
	Group    string
	Keys     int64
	Bytes    int64 // estimated memory
	Elements int64
}

// groupOf appends the group name of key to dst.
func (g GroupBy) groupOf(dst, key []byte) []byte {
	if g.Pattern {
		inDigits := false
		for _, c := range key {
			if c >= '0' && c <= '9' {
				if !inDigits {
					dst = append(dst, '*')
				}
				inDigits = true
				continue
			}
			inDigits = false
			dst = append(dst, c)
		}
		return dst
	}
	rest := key
	cut := 0
	for d := 0; d < g.Depth; d++ {
		i := bytes.Index(rest, []byte(g.Separator))
		if i < 0 {
			return append(dst, key...) // fewer segments than Depth: the key is its own group
		}
		cut += i + len(g.Separator)
		rest = rest[i+len(g.Separator):]
	}
	dst = append(dst, key[:cut]...)
	return append(dst, '*')
}

// PrefixSummary groups the selected keys by prefix (or digit pattern) and
// returns the groups by estimated bytes, largest first.
func PrefixSummary(ctx context.Context, path string, by GroupBy, opts Options) ([]GroupStats, Stats, error) {
	if by.Separator == "" {
		by.Separator = ":"
	}
	if by.Depth <= 0 {
		by.Depth = 1
	}
	if by.MaxGroups <= 0 {
		by.MaxGroups = 100000
	}
	groups := map[string]*GroupStats{}
	var name []byte
	st, err := scanMemory(ctx, path, opts, func(r *MemoryRecord) error {
		name = by.groupOf(name[:0], r.Key)
		g := groups[string(name)] // no allocation for the lookup
		if g == nil {
			key := string(name)
			if len(groups) >= by.MaxGroups {
				key = "(other)"
			}
			if g = groups[key]; g == nil {
				g = &GroupStats{Group: key}
				groups[key] = g
			}
		}
		g.Keys++
		g.Bytes += r.Bytes
		g.Elements += r.NumElements
		return nil
	})
	out := make([]GroupStats, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Group < out[j].Group
	})
	return out, st, err
}

// WriteGroupsCSV writes the prefix summary as CSV: group,keys,size_in_bytes,avg_size,elements.
func WriteGroupsCSV(w io.Writer, groups []GroupStats) error {
	b := []byte("group,keys,size_in_bytes,avg_size_in_bytes,num_elements\n")
	for _, g := range groups {
		b = appendCSVField(b, []byte(g.Group))
		b = fmt.Appendf(b, ",%d,%d,%d,%d\n", g.Keys, g.Bytes, g.Bytes/max(g.Keys, 1), g.Elements)
	}
	_, err := w.Write(b)
	return err
}
