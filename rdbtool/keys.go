package rdbtool

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/sluicedb/sluice/rdb"
)

// appendKeyLine appends key for a one-key-per-line listing: as it is when it
// is valid UTF-8 without control characters, else as a Go-syntax quoted
// string ("bin:\x00\xff"), so every line is one key and none is lost. A key
// that itself starts with '"' is quoted too, so the two cannot be confused.
func appendKeyLine(b, key []byte) []byte {
	plain := utf8.Valid(key) && (len(key) == 0 || key[0] != '"')
	if plain {
		for _, c := range key {
			if c < 0x20 || c == 0x7f {
				plain = false
				break
			}
		}
	}
	if plain {
		b = append(b, key...)
	} else {
		b = strconv.AppendQuote(b, string(key))
	}
	return append(b, '\n')
}

// Keys writes the selected keys of the RDB file at path to w, one a line
// (see appendKeyLine for keys that are not plain text). Values are never
// decoded unless Filter.MinSize needs their estimate.
func Keys(ctx context.Context, path string, w io.Writer, opts Options) (Stats, error) {
	in, err := openInput(path, "keys", opts)
	if err != nil {
		return Stats{}, err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	var (
		n     int
		st    Stats
		line  []byte
		cbErr error
	)
	for in.next(ctx, &n) {
		e := in.p.Entry()
		var keep bool
		if keep, cbErr = in.bigEnough(e); cbErr != nil {
			break
		} else if !keep {
			continue
		}
		st.Keys++
		line = appendKeyLine(line[:0], e.Key)
		if _, cbErr = bw.Write(line); cbErr != nil {
			break
		}
	}
	st.InputSize = in.size
	err = in.finish(ctx, cbErr)
	if ferr := bw.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("rdbtool: write: %w", ferr)
	}
	return st, err
}

// CountKey is one cell of the count table.
type CountKey struct {
	DB   int
	Type rdb.Type
}

// Counts is the number of selected keys (and of those with an expiry) per
// database and type.
type Counts struct {
	Keys    map[CountKey]int64
	Expires map[CountKey]int64
	Total   int64
}

// Count counts the selected keys of the RDB file at path by database and
// type, without decoding values (unless Filter.MinSize needs them).
func Count(ctx context.Context, path string, opts Options) (Counts, Stats, error) {
	c := Counts{Keys: map[CountKey]int64{}, Expires: map[CountKey]int64{}}
	in, err := openInput(path, "count", opts)
	if err != nil {
		return c, Stats{}, err
	}
	type dbCounts [8][2]int64 // [type][keys, expires]
	var (
		n     int
		cbErr error
		perDB = map[int]*dbCounts{}
		curDB int
		cur   *dbCounts
	)
	for in.next(ctx, &n) {
		e := in.p.Entry()
		var keep bool
		if keep, cbErr = in.bigEnough(e); cbErr != nil {
			break
		} else if !keep {
			continue
		}
		// Count into a per-db array (no map operation per key); the
		// arrays go into the maps at the end.
		if cur == nil || e.DB != curDB {
			curDB = e.DB
			if cur = perDB[curDB]; cur == nil {
				cur = new(dbCounts)
				perDB[curDB] = cur
			}
		}
		t := int(e.Type) & 7
		cur[t][0]++
		if e.ExpireAt != 0 {
			cur[t][1]++
		}
		c.Total++
	}
	for db, arr := range perDB {
		for t := range arr {
			if arr[t][0] > 0 {
				c.Keys[CountKey{db, rdb.Type(t)}] = arr[t][0]
			}
			if arr[t][1] > 0 {
				c.Expires[CountKey{db, rdb.Type(t)}] = arr[t][1]
			}
		}
	}
	return c, Stats{Keys: c.Total, InputSize: in.size}, in.finish(ctx, cbErr)
}

// WriteTable writes the counts as an aligned text table, by db then type,
// with per-db and overall totals.
func (c Counts) WriteTable(w io.Writer) error {
	cells := make([]CountKey, 0, len(c.Keys))
	for k := range c.Keys {
		cells = append(cells, k)
	}
	sort.Slice(cells, func(i, j int) bool {
		if cells[i].DB != cells[j].DB {
			return cells[i].DB < cells[j].DB
		}
		return cells[i].Type < cells[j].Type
	})
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-4s %-8s %12s %12s\n", "db", "type", "keys", "expires")
	var dbKeys, dbExp int64
	for i, k := range cells {
		fmt.Fprintf(bw, "%-4d %-8s %12d %12d\n", k.DB, k.Type, c.Keys[k], c.Expires[k])
		dbKeys += c.Keys[k]
		dbExp += c.Expires[k]
		if i == len(cells)-1 || cells[i+1].DB != k.DB {
			fmt.Fprintf(bw, "%-4d %-8s %12d %12d\n", k.DB, "all", dbKeys, dbExp)
			dbKeys, dbExp = 0, 0
		}
	}
	var exp int64
	for _, v := range c.Expires {
		exp += v
	}
	fmt.Fprintf(bw, "%-4s %-8s %12d %12d\n", "all", "all", c.Total, exp)
	return bw.Flush()
}
