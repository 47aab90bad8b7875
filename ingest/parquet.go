package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// parquetLeaf is how one Parquet column becomes a row field.
type parquetLeaf struct {
	name string
	unit time.Duration // timestamp unit; 0 when not a timestamp
	json bool          // JSON logical type: kept as json.RawMessage
}

// decodeParquet reads a Parquet file of flat columns (nested groups become
// dotted names; repeated columns are refused). Parquet has no lines: errors
// name the row, counted from 1, in LineError.Line. Parquet needs random
// access: a file (an *os.File, e.g. an object spooled to disk) is read in
// place, page by page; any other input is read into memory first (bounded
// by the caller's limits).
func decodeParquet(r io.Reader, add func(Row, int) error, onBad func(*LineError) error) error {
	if file, ok := r.(interface {
		io.ReaderAt
		Stat() (fs.FileInfo, error)
	}); ok {
		info, err := file.Stat()
		if err != nil {
			return err
		}
		return decodeParquetAt(file, info.Size(), add, onBad)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return decodeParquetAt(bytes.NewReader(data), int64(len(data)), add, onBad)
}

// decodeParquetAt is decodeParquet of the size bytes of ra.
func decodeParquetAt(ra io.ReaderAt, size int64, add func(Row, int) error, onBad func(*LineError) error) error {
	f, err := parquet.OpenFile(ra, size)
	if err != nil {
		return fmt.Errorf("%w: parquet: %v", ErrBadInput, err)
	}
	schema := f.Schema()
	paths := schema.Columns()
	leaves := make([]parquetLeaf, len(paths))
	for _, path := range paths {
		lc, _ := schema.Lookup(path...)
		if lc.MaxRepetitionLevel > 0 {
			return fmt.Errorf("%w: parquet: column %q is repeated (lists are not supported)", ErrBadInput, strings.Join(path, "."))
		}
		leaf := parquetLeaf{name: strings.Join(path, ".")}
		if lt := lc.Node.Type().LogicalType(); lt != nil {
			switch v := lt.Value.(type) {
			case *format.TimestampType:
				if v.Unit.Value != nil {
					leaf.unit = v.Unit.Value.Duration()
				}
			case *format.JsonType:
				leaf.json = true
			}
		}
		leaves[lc.ColumnIndex] = leaf
	}
	rowNum := 0
	buf := make([]parquet.Row, 256)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, pr := range buf[:n] {
				rowNum++
				row := make(Row, len(leaves))
				var bad error
				for _, v := range pr {
					c := v.Column()
					if c < 0 || c >= len(leaves) {
						bad = fmt.Errorf("value of unknown column %d", c)
						break
					}
					row[leaves[c].name] = parquetValue(v, leaves[c])
				}
				if bad != nil {
					if err := onBad(&LineError{Line: rowNum, Err: bad}); err != nil {
						rows.Close()
						return err
					}
					continue
				}
				if err := add(row, rowNum); err != nil {
					rows.Close()
					return err
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return fmt.Errorf("%w: parquet: row %d: %v", ErrBadInput, rowNum+1, err)
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}

func parquetValue(v parquet.Value, leaf parquetLeaf) any {
	if v.IsNull() {
		return nil
	}
	switch v.Kind() {
	case parquet.Boolean:
		return v.Boolean()
	case parquet.Int32:
		if leaf.unit > 0 {
			return time.Unix(0, int64(v.Int32())*int64(leaf.unit)).UTC()
		}
		return int64(v.Int32())
	case parquet.Int64:
		if leaf.unit > 0 {
			return time.Unix(0, v.Int64()*int64(leaf.unit)).UTC()
		}
		return v.Int64()
	case parquet.Float:
		return float64(v.Float())
	case parquet.Double:
		return v.Double()
	case parquet.ByteArray, parquet.FixedLenByteArray:
		if leaf.json {
			return json.RawMessage(bytes.Clone(v.ByteArray()))
		}
		return string(v.ByteArray())
	}
	return v.String()
}
