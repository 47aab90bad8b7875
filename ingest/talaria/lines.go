package talaria

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/internal/jsonw"
)

// ErrBadBatch: a batch refers to a string it does not carry, or holds a
// value that has no JSON form.
var ErrBadBatch = errors.New("talaria: bad batch")

// ErrTooLarge: the lines of a batch would pass the bound given. A batch
// names each string once and refers to it from any number of events, so
// a small message can stand for far more rows than it weighs.
var ErrTooLarge = errors.New("talaria: batch too large")

// AppendLines appends b's events to buf as JSON lines, one object per
// event, its keys the interned column names. Talaria's value types map to
// JSON as its own decoder reads them: int32, int64, float64 and bool as
// they are, string as the interned string, time (unix seconds) as RFC
// 3339 in UTC, json as the interned JSON text itself (an object stays an
// object). An event without values is an empty object (the table's policy
// decides what an empty row is). Keys are written in the order of their
// ids, so that the same batch always gives the same lines. Past max bytes
// of lines (0: no bound) it stops with ErrTooLarge.
func AppendLines(buf []byte, b *Batch, max int) ([]byte, error) {
	start := len(buf)
	dict := b.GetStrings()
	var ids []uint32
	for i, ev := range b.GetEvents() {
		ids = ids[:0]
		for id := range ev.GetValue() {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		buf = append(buf, '{')
		for j, id := range ids {
			name, ok := dict[id]
			if !ok {
				return buf, fmt.Errorf("%w: event %d: column name id %d is not in the batch's strings", ErrBadBatch, i, id)
			}
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = jsonw.AppendString(buf, string(name))
			buf = append(buf, ':')
			var err error
			if buf, err = appendValue(buf, dict, ev.GetValue()[id]); err != nil {
				return buf, fmt.Errorf("%w: event %d, column %q: %w", ErrBadBatch, i, name, err)
			}
		}
		buf = append(buf, '}', '\n')
		if max > 0 && len(buf)-start > max {
			return buf, fmt.Errorf("%w: its rows pass %d bytes at event %d", ErrTooLarge, max, i)
		}
	}
	return buf, nil
}

func appendValue(buf []byte, dict map[uint32][]byte, v *Value) ([]byte, error) {
	switch x := v.GetValue().(type) {
	case nil:
		return append(buf, "null"...), nil
	case *Value_Int32:
		return strconv.AppendInt(buf, int64(x.Int32), 10), nil
	case *Value_Int64:
		return strconv.AppendInt(buf, x.Int64, 10), nil
	case *Value_Float64:
		if math.IsNaN(x.Float64) || math.IsInf(x.Float64, 0) {
			return buf, fmt.Errorf("%v has no JSON form", x.Float64)
		}
		return jsonw.AppendFloat(buf, x.Float64, 64)
	case *Value_Bool:
		return strconv.AppendBool(buf, x.Bool), nil
	case *Value_Time:
		return jsonw.AppendString(buf, time.Unix(x.Time, 0).UTC().Format(time.RFC3339Nano)), nil
	case *Value_String_:
		s, ok := dict[x.String_]
		if !ok {
			return buf, fmt.Errorf("string id %d is not in the batch's strings", x.String_)
		}
		return jsonw.AppendString(buf, string(s)), nil
	case *Value_Json:
		s, ok := dict[x.Json]
		if !ok {
			return buf, fmt.Errorf("json id %d is not in the batch's strings", x.Json)
		}
		// Compacted: a JSON line holds no newline, and pretty-printed
		// JSON has them.
		var c bytes.Buffer
		if err := json.Compact(&c, s); err != nil {
			return buf, fmt.Errorf("json id %d: %w", x.Json, err)
		}
		return append(buf, c.Bytes()...), nil
	}
	return buf, fmt.Errorf("value of type %T", v.GetValue())
}
