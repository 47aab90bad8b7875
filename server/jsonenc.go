package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/internal/jsonw"
	"github.com/sluicedb/sluice/table"
)

// rowEncoder writes query rows as JSON objects with the keys in projection
// order. The key prefixes are encoded once per query, and the values are
// the few types table.Query returns, so no per-row sort or reflection.
type rowEncoder struct {
	cols []string
	keys [][]byte // `"name":` with a leading comma for all but the first
}

func newRowEncoder(cols []string) *rowEncoder {
	e := &rowEncoder{cols: cols}
	for i, c := range cols {
		var k []byte
		if i > 0 {
			k = append(k, ',')
		}
		k = jsonw.AppendString(k, c)
		e.keys = append(e.keys, append(k, ':'))
	}
	return e
}

// append writes row's projected columns (a missing column is null).
func (e *rowEncoder) append(buf []byte, row table.Row) ([]byte, error) {
	vals := make([]any, len(e.cols))
	for i, c := range e.cols {
		vals[i] = row[c]
	}
	return e.appendValues(buf, vals)
}

// appendValues writes one row given its values in projection order (what
// table.QueryValues hands out: no map to fill and read back per row).
func (e *rowEncoder) appendValues(buf []byte, vals []any) ([]byte, error) {
	buf = append(buf, '{')
	for i, c := range e.cols {
		buf = append(buf, e.keys[i]...)
		switch v := vals[i].(type) {
		case nil:
			buf = append(buf, "null"...)
		case int64:
			buf = strconv.AppendInt(buf, v, 10)
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				buf = append(buf, "null"...)
				break
			}
			buf, _ = jsonw.AppendFloat(buf, v, 64) // cannot fail: finite
		case string:
			buf = jsonw.AppendString(buf, v)
		case bool:
			buf = strconv.AppendBool(buf, v)
		case time.Time:
			buf = append(buf, '"')
			buf = v.UTC().AppendFormat(buf, time.RFC3339Nano)
			buf = append(buf, '"')
		case json.RawMessage:
			buf = append(buf, v...)
		default:
			// Not a type table.Query returns today: encode it as
			// compute does any other value.
			var err error
			if buf, err = jsonw.AppendValue(buf, v); err != nil {
				return buf, fmt.Errorf("column %q: %w", c, err)
			}
		}
	}
	return append(buf, '}'), nil
}
