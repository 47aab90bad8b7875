// Package sink compacts time-series tables out of the hot store into
// Parquet files in a directory, partitioned by day the way Hive, Spark,
// Trino and DuckDB read them:
//
//	dir/<table>/year=YYYY/month=MM/day=DD/part-<watermark ns>-<n>.parquet
//
// so that data older than a watermark can be queried beyond one machine.
package sink

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/sluicedb/sluice/table"
)

// Options configure one compaction. The zero value writes files and keeps
// the data in the hot store.
type Options struct {
	// Remove deletes the compacted blocks from the hot store once the files
	// are durable.
	Remove bool
	// RowGroupRows is the number of rows per Parquet row group; 0 means
	// 131072.
	RowGroupRows int
}

// Stats describe one compaction.
type Stats struct {
	Rows      int64
	Files     []string  // paths of the files written
	From      time.Time // first event time included (zero: from the start)
	Watermark time.Time // rows before it were compacted (aligned to the block span)
}

// Compact writes every row of t whose event time is before watermark to
// Parquet files under dir. The watermark is rounded down to t's block span
// so that the rows written are exactly the blocks Remove deletes (a block
// never straddles it).
//
// Without Remove, compaction starts at t.CompactedThrough() and records the
// new watermark there, so repeated runs write each row once. With Remove it
// takes every row before the watermark (late rows included) and then
// deletes those blocks. Files are written to a temporary name, synced and
// renamed, and the hot store is changed only after every file is durable;
// a crash between the two writes rows twice (at least once, never lost).
func Compact(ctx context.Context, t *table.Table, dir string, watermark time.Time, opts Options) (Stats, error) {
	if opts.RowGroupRows <= 0 {
		opts.RowGroupRows = 1 << 17
	}
	span := t.BlockSpan()
	wm := time.Unix(0, floor(watermark.UnixNano(), int64(span))).UTC()
	st := Stats{Watermark: wm}
	if !opts.Remove {
		st.From = t.CompactedThrough()
	}
	if !st.From.IsZero() && !st.From.Before(wm) {
		return st, nil
	}
	cols := t.Schema()
	slices.SortFunc(cols, func(a, b table.Column) int { return cmp.Compare(a.Name, b.Name) }) // parquet.Group's order
	schema, err := parquetSchema(t.Name(), cols)
	if err != nil {
		return st, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	c := &compaction{
		dir: filepath.Join(dir, t.Name()), schema: schema, cols: cols, opts: opts,
		prefix: fmt.Sprintf("part-%d", wm.UnixNano()), files: map[string]*dayFile{},
	}
	defer c.abort()
	timeCol := slices.Index(names, t.SortBy())
	if timeCol < 0 {
		return st, fmt.Errorf("sink: table %s: schema lacks the sortBy column %q", t.Name(), t.SortBy())
	}
	// QueryValues gives the values in names order, which is c.cols order.
	err = t.QueryValues(ctx, table.Query{From: st.From, To: wm, Columns: names}, func(_ []table.Column, vals []any) error {
		ts, ok := vals[timeCol].(time.Time)
		if !ok {
			return fmt.Errorf("sink: table %s: row without event time", t.Name())
		}
		return c.write(ts, vals)
	})
	if err != nil {
		return st, fmt.Errorf("sink: compact table %s before %v: %w", t.Name(), wm, err)
	}
	if st.Files, err = c.finish(); err != nil {
		return st, fmt.Errorf("sink: compact table %s before %v: %w", t.Name(), wm, err)
	}
	st.Rows = c.rows
	if opts.Remove {
		if _, err := t.DeleteBefore(ctx, wm); err != nil {
			return st, fmt.Errorf("sink: remove compacted rows of %s: %w", t.Name(), err)
		}
	}
	if err := t.SetCompactedThrough(ctx, wm); err != nil {
		return st, err
	}
	return st, nil
}

func floor(ns, span int64) int64 {
	r := ns % span
	if r < 0 {
		r += span
	}
	return ns - r
}

// parquetSchema maps table columns (sorted by name) to optional Parquet
// columns: int64 → INT64, float64 → DOUBLE, string → STRING, bool →
// BOOLEAN, timestamp → TIMESTAMP(MICROS, UTC), json → JSON.
func parquetSchema(name string, cols []table.Column) (*parquet.Schema, error) {
	g := parquet.Group{}
	for _, c := range cols {
		var n parquet.Node
		switch c.Type {
		case table.Int64:
			n = parquet.Int(64)
		case table.Float64:
			n = parquet.Leaf(parquet.DoubleType)
		case table.String:
			n = parquet.String()
		case table.Bool:
			n = parquet.Leaf(parquet.BooleanType)
		case table.Timestamp:
			n = parquet.Timestamp(parquet.Microsecond)
		case table.JSON:
			n = parquet.JSON()
		default:
			return nil, fmt.Errorf("sink: column %q: type %v has no Parquet mapping", c.Name, c.Type)
		}
		g[c.Name] = parquet.Optional(n)
	}
	return parquet.NewSchema(name, g), nil
}

// dayFile is one day's Parquet file being written.
type dayFile struct {
	tmp, path string
	f         *os.File
	w         *parquet.GenericWriter[any]
	buf       []parquet.Row
}

type compaction struct {
	dir    string
	prefix string
	schema *parquet.Schema
	cols   []table.Column
	opts   Options
	files  map[string]*dayFile // by day directory
	order  []*dayFile
	rows   int64
}

const bufferedRows = 512

func (c *compaction) write(ts time.Time, vals []any) error {
	day := filepath.Join(c.dir, ts.Format("year=2006/month=01/day=02"))
	f := c.files[day]
	if f == nil {
		if err := os.MkdirAll(day, 0o755); err != nil {
			return err
		}
		path := filepath.Join(day, c.prefix+"-0.parquet")
		for n := 1; ; n++ { // an earlier run with the same watermark may have left a file
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				break
			}
			path = filepath.Join(day, fmt.Sprintf("%s-%d.parquet", c.prefix, n))
		}
		osf, err := os.Create(path + ".tmp")
		if err != nil {
			return err
		}
		f = &dayFile{tmp: path + ".tmp", path: path, f: osf}
		f.w = parquet.NewGenericWriter[any](osf, c.schema, parquet.Compression(&parquet.Snappy),
			parquet.MaxRowsPerRowGroup(int64(c.opts.RowGroupRows)))
		c.files[day] = f
		c.order = append(c.order, f)
	}
	// Reuse the row slices of the buffer: WriteRows copies the values into
	// the column buffers, so a flushed buffer's rows are free again.
	var row parquet.Row
	if n := len(f.buf); n < cap(f.buf) && len(f.buf[:n+1][n]) == len(c.cols) {
		row = f.buf[:n+1][n]
	} else {
		row = make(parquet.Row, len(c.cols))
	}
	for i, col := range c.cols {
		v, err := parquetValue(col, vals[i])
		if err != nil {
			return err
		}
		if v.IsNull() {
			row[i] = v.Level(0, 0, i)
		} else {
			row[i] = v.Level(0, 1, i)
		}
	}
	f.buf = append(f.buf, row)
	c.rows++
	if cap(f.buf) < bufferedRows {
		f.buf = slices.Grow(f.buf, bufferedRows-len(f.buf))
	}
	if len(f.buf) >= bufferedRows {
		return f.flush()
	}
	return nil
}

func (f *dayFile) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	_, err := f.w.WriteRows(f.buf)
	f.buf = f.buf[:0]
	return err
}

// parquetValue converts a value read from the table to the Parquet value
// of col.
func parquetValue(col table.Column, v any) (parquet.Value, error) {
	if v == nil {
		return parquet.NullValue(), nil
	}
	switch col.Type {
	case table.Int64:
		if x, ok := v.(int64); ok {
			return parquet.Int64Value(x), nil
		}
	case table.Float64:
		switch x := v.(type) {
		case float64:
			return parquet.DoubleValue(x), nil
		case int64:
			return parquet.DoubleValue(float64(x)), nil
		}
	case table.String:
		switch x := v.(type) {
		case string:
			return parquet.ByteArrayValue([]byte(x)), nil
		case json.RawMessage:
			return parquet.ByteArrayValue(x), nil
		}
	case table.JSON:
		if x, ok := v.(json.RawMessage); ok {
			return parquet.ByteArrayValue(x), nil
		}
	case table.Bool:
		if x, ok := v.(bool); ok {
			return parquet.BooleanValue(x), nil
		}
	case table.Timestamp:
		if x, ok := v.(time.Time); ok {
			return parquet.Int64Value(x.UnixMicro()), nil
		}
	}
	return parquet.Value{}, fmt.Errorf("column %q (%v): value %T changed type during compaction; run again", col.Name, col.Type, v)
}

// finish closes, syncs and renames every file, then syncs the directories.
func (c *compaction) finish() ([]string, error) {
	var paths []string
	for _, f := range c.order {
		if err := f.flush(); err != nil {
			return nil, fmt.Errorf("%s: %w", f.tmp, err)
		}
		if err := f.w.Close(); err != nil {
			return nil, fmt.Errorf("%s: %w", f.tmp, err)
		}
		if err := f.f.Sync(); err != nil {
			return nil, fmt.Errorf("%s: %w", f.tmp, err)
		}
		if err := f.f.Close(); err != nil {
			return nil, fmt.Errorf("%s: %w", f.tmp, err)
		}
		f.f = nil
		if err := os.Rename(f.tmp, f.path); err != nil {
			return nil, err
		}
		if err := syncDir(filepath.Dir(f.path)); err != nil {
			return nil, err
		}
		paths = append(paths, f.path)
	}
	c.order = nil
	slices.Sort(paths)
	return paths, nil
}

// abort removes the temporary files of an unfinished compaction.
func (c *compaction) abort() {
	for _, f := range c.order {
		if f.f != nil {
			f.f.Close()
			os.Remove(f.tmp)
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
