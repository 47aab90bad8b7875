package schemaformat

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/avro"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// avroDecoder decodes Avro bodies of one writer schema. Each top-level
// field has a conversion planned from the schema once, so a value is
// converted by what its field declares (a decimal's scale, a fixed that
// is bytes) rather than guessed from its Go type.
type avroDecoder struct {
	schema *avro.Schema
	fields []avroField
	// columns reads the same bodies into column cells (Rows).
	columns *avroColumns
}

type avroField struct {
	name    string
	convert func(any) any
}

// compileAvro compiles a writer schema whose references are refs: the
// referenced schemas are parsed first, into a cache of named types of
// this schema alone, so that the schema names their types as if it had
// defined them. (A cache shared by all ids would refuse a type that a
// later version of its subject changes.) The library splices each
// referenced definition into the parsed schema, so the plans below see
// whole definitions, as in a schema without references.
func compileAvro(text string, refs []reference) (bodyDecoder, error) {
	var named avro.SchemaCache
	for _, r := range dependencyOrder(refs) {
		if _, err := named.Parse(r.schema.Schema); err != nil {
			return nil, fmt.Errorf("avro schema: reference %q (%s): %w", r.name, r.at, err)
		}
	}
	s, err := named.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	root := s.Root()
	if root.Type != "record" {
		return nil, fmt.Errorf("avro schema: top-level type %q: want a record (its fields are the columns)", root.Type)
	}
	cols, err := compileAvroColumns(root)
	if err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	d := &avroDecoder{schema: s, columns: cols}
	names := map[string]*avro.SchemaNode{}
	for _, f := range root.Fields {
		d.fields = append(d.fields, avroField{name: f.Name, convert: avroConverter(&f.Type, true, names)})
	}
	return d, nil
}

func (d *avroDecoder) appendRow(body []byte, cb *colbatch.Batch, row int, cache *columnCache) error {
	return d.columns.appendRow(body, cb, row, cache)
}

func (d *avroDecoder) decode(body []byte) (map[string]any, error) {
	var v map[string]any
	rest, err := d.schema.Decode(body, &v)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%d bytes after the record", len(rest))
	}
	for _, f := range d.fields {
		if x, ok := v[f.name]; ok {
			v[f.name] = f.convert(x)
		}
	}
	return v, nil
}

// avroConverter returns the conversion of a value of schema n into a
// column value (top: a top-level field) or a JSON value (nested). names
// are the named types met so far: a later node may name one instead of
// defining it.
func avroConverter(n *avro.SchemaNode, top bool, names map[string]*avro.SchemaNode) func(any) any {
	switch n.Type {
	case "record", "error", "enum", "fixed":
		// Each definition is met once when compiling; a lazy plan (below)
		// meets it again, and then only reads names: partitions plan
		// concurrently.
		for _, name := range []string{fullName(n), n.Name[strings.LastIndexByte(n.Name, '.')+1:]} {
			if _, ok := names[name]; !ok {
				names[name] = n
			}
		}
	default:
		if named, ok := names[n.Type]; ok {
			// A reference: converted as its definition, which is planned
			// again here (a recursive type is planned one level per
			// reference, lazily, when a value reaches it).
			convert := sync.OnceValue(func() func(any) any { return avroConverter(named, top, names) })
			return func(v any) any { return convert()(v) }
		}
	}
	switch n.Type {
	case "union":
		var branches []*avro.SchemaNode
		for i := range n.Branches {
			if n.Branches[i].Type != "null" {
				branches = append(branches, &n.Branches[i])
			}
		}
		if len(branches) == 1 {
			return nullable(avroConverter(branches[0], top, names))
		}
		// Several non-null branches: the decoded value says which one it
		// is only by its Go type.
		return nullable(func(v any) any { return byGoType(v, top) })
	case "record", "error":
		fields := make([]avroField, len(n.Fields))
		for i := range n.Fields {
			fields[i] = avroField{name: n.Fields[i].Name, convert: avroConverter(&n.Fields[i].Type, false, names)}
		}
		return nullable(func(v any) any {
			m, ok := v.(map[string]any)
			if !ok {
				return byGoType(v, false)
			}
			for _, f := range fields {
				if x, ok := m[f.name]; ok {
					m[f.name] = f.convert(x)
				}
			}
			return m
		})
	case "array":
		items := avroConverter(n.Items, false, names)
		return nullable(func(v any) any {
			a, ok := v.([]any)
			if !ok {
				return byGoType(v, false)
			}
			for i := range a {
				a[i] = items(a[i])
			}
			return a
		})
	case "map":
		values := avroConverter(n.Values, false, names)
		return nullable(func(v any) any {
			m, ok := v.(map[string]any)
			if !ok {
				return byGoType(v, false)
			}
			for k := range m {
				m[k] = values(m[k])
			}
			return m
		})
	}
	if n.LogicalType == "decimal" {
		scale, precision := n.Scale, n.Precision
		return nullable(func(v any) any {
			if r, ok := v.(*big.Rat); ok {
				if top && coltype.CheckDecimal(precision, scale) == nil {
					// The column's value: exact text parsed at the scale.
					if d, err := coltype.ParseDecimal(r.FloatString(scale), precision, scale); err == nil {
						d.Precision = precision
						return d
					}
				}
				return r.FloatString(scale)
			}
			return byGoType(v, top)
		})
	}
	if top {
		// A top-level field is a column: the native value where sluice has
		// a column type for it (the columnar decoder's, avroReader.native).
		logical := n.LogicalType
		return nullable(func(v any) any { return nativeTop(v, logical) })
	}
	return nullable(func(v any) any { return byGoType(v, top) })
}

// nativeTop is a top-level field's decoded value as its column's: a date,
// a time of day, bytes, a uuid; anything else as byGoType.
func nativeTop(v any, logical string) any {
	switch x := v.(type) {
	case time.Time:
		if logical == "date" {
			return coltype.DateOf(x)
		}
	case time.Duration:
		if x >= 0 && x < 24*time.Hour {
			return coltype.TimeOfDayValue(x / time.Microsecond)
		}
	case []byte:
		if logical == "uuid" && len(x) == 16 {
			return coltype.UUIDValue(x)
		}
		return coltype.BytesValue(x)
	case [16]byte:
		if logical == "uuid" {
			return coltype.UUIDValue(x)
		}
	case string:
		if logical == "uuid" {
			if u, err := coltype.ParseUUID(x); err == nil {
				return u
			}
		}
	}
	return byGoType(v, true)
}

// nullable passes nil through: a null union branch is a null cell.
func nullable(f func(any) any) func(any) any {
	return func(v any) any {
		if v == nil {
			return nil
		}
		return f(v)
	}
}

// byGoType converts one decoded scalar by its Go type: integers to int64,
// floats to float64, bytes to base64 text, a time of day to its text; a
// time.Time stays one at the top (a timestamp column) and becomes RFC 3339
// text inside JSON.
func byGoType(v any, top bool) any {
	switch x := v.(type) {
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case float32:
		// The float's shortest decimal form, not its binary value widened:
		// 0.1f is 0.1, not 0.10000000149011612.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return f
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Duration:
		return timeOfDay(x)
	case time.Time:
		if top {
			return x.UTC()
		}
		return x.UTC().Format(time.RFC3339Nano)
	case *big.Rat:
		return x.RatString()
	case map[string]any:
		for k := range x {
			x[k] = byGoType(x[k], false)
		}
		return x
	case []any:
		for i := range x {
			x[i] = byGoType(x[i], false)
		}
		return x
	}
	return v
}

// timeOfDay is a time-millis or time-micros value as HH:MM:SS.ffffff text:
// it reads as a time and sorts as one.
func timeOfDay(d time.Duration) string {
	return time.Unix(0, 0).UTC().Add(d).Format("15:04:05.000000")
}
