package schemaformat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// jsonSchemaDecoder decodes JSON bodies of one JSON Schema. The schema
// types the top-level properties it declares: "number" is float64 even
// when a value has no fraction (so a table's column does not start as
// int64 and meet 1.5 later), "integer" is int64, a string of format
// date-time is a timestamp, of format date a date, of format time a time
// of day, of format uuid a uuid. Undeclared properties are inferred as in
// NDJSON. The body is not validated against the schema: the producer's
// serializer did that, and a row is kept rather than lost; but a value
// that is not of its property's format cannot fill the column the format
// makes, and its row goes to the dead letters with the reason.
type jsonSchemaDecoder struct {
	props map[string]jsonProp
	// types is props for JSONBody's callers, one per schema: rows of one
	// schema are converted together.
	types *JSONTypes
}

type jsonProp int

const (
	propOther jsonProp = iota
	propNumber
	propInteger
	propDateTime
	propDate      // format date: coltype.DateValue
	propTimeOfDay // format time: coltype.TimeOfDayValue
	propUUID      // format uuid: coltype.UUIDValue
)

// jsonProperty is what the decoder reads of a property's schema.
type jsonProperty struct {
	Type   any    `json:"type"`
	Format string `json:"format"`
	Ref    string `json:"$ref"`
}

// compileJSONSchema compiles a JSON Schema whose references are refs. A
// property whose $ref is a reference's name is typed by the referenced
// schema's own type and format; a $ref inside the schema (#/...) or to
// anything else leaves it inferred, as an undeclared property is.
func compileJSONSchema(text string, refs []reference) (bodyDecoder, error) {
	var s struct {
		Type       any                     `json:"type"`
		Properties map[string]jsonProperty `json:"properties"`
	}
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	referenced := map[string]jsonProperty{}
	for _, r := range refs {
		var p jsonProperty
		if err := json.Unmarshal([]byte(r.schema.Schema), &p); err != nil {
			return nil, fmt.Errorf("json schema: reference %q (%s): %w", r.name, r.at, err)
		}
		referenced[r.name] = p
	}
	d := &jsonSchemaDecoder{props: map[string]jsonProp{}}
	for name, p := range s.Properties {
		if r, ok := referenced[p.Ref]; ok && p.Ref != "" {
			p = r
		}
		switch t := jsonType(p.Type); {
		case t == "number":
			d.props[name] = propNumber
		case t == "integer":
			d.props[name] = propInteger
		case t == "string" && p.Format == "date-time":
			d.props[name] = propDateTime
		case t == "string" && p.Format == "date":
			d.props[name] = propDate
		case t == "string" && p.Format == "time":
			d.props[name] = propTimeOfDay
		case t == "string" && p.Format == "uuid":
			d.props[name] = propUUID
		}
	}
	d.types = &JSONTypes{props: d.props}
	return d, nil
}

// jsonType is a property's type: "number" for "number" or ["number",
// "null"], and so on; "" when it names several non-null types.
func jsonType(t any) string {
	switch x := t.(type) {
	case string:
		return x
	case []any:
		var one string
		for _, e := range x {
			if s, ok := e.(string); ok && s != "null" {
				if one != "" {
					return ""
				}
				one = s
			}
		}
		return one
	}
	return ""
}

func (d *jsonSchemaDecoder) decode(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var row map[string]any
	if err := dec.Decode(&row); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the JSON object at byte %d", dec.InputOffset())
	}
	if row == nil {
		return nil, fmt.Errorf("the body is null, not an object")
	}
	for name, v := range row {
		n, isNum := v.(json.Number)
		switch p := d.props[name]; {
		case p == propNumber && isNum:
			f, err := n.Float64()
			if err != nil {
				return nil, fmt.Errorf("property %q: %w", name, err)
			}
			row[name] = f
		case p == propInteger && isNum:
			i, err := n.Int64()
			if err != nil {
				return nil, fmt.Errorf("property %q: %q is not a 64-bit integer", name, n)
			}
			row[name] = i
		case p == propDateTime:
			if s, ok := v.(string); ok {
				t, err := parseDateTime(s)
				if err != nil {
					return nil, fmt.Errorf("property %q: date-time %q: %w", name, s, err)
				}
				row[name] = t
			}
		case p >= propDate:
			if s, ok := v.(string); ok {
				x, err := formatValue(p, s)
				if err != nil {
					return nil, fmt.Errorf("property %q: %w", name, err)
				}
				row[name] = x
			}
		}
	}
	return row, nil
}

// JSONTypes are the property types of one JSON Schema, for a caller that
// decodes the bodies by column itself (JSON text is what the NDJSON
// column decoder reads) and then gives the rows the schema's types.
type JSONTypes struct {
	props map[string]jsonProp
}

// JSONBody returns the body of msg (FormatJSONSchema) and its schema's
// property types. Its errors are Decode's, before the body.
func (d *Decoder) JSONBody(ctx context.Context, msg []byte) ([]byte, *JSONTypes, error) {
	if d.format != FormatJSONSchema {
		return nil, nil, fmt.Errorf("schemaformat: JSONBody of a %s decoder", d.format)
	}
	id, body, err := splitFrame(msg)
	if err != nil {
		return nil, nil, err
	}
	bd, err := d.schema(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return body, bd.(*jsonSchemaDecoder).types, nil
}

// Convert gives rows [from, to) of cb, the bodies' JSON as the NDJSON
// column decoder reads it, the schema's types as Decode does: a number
// property is float64, an integer one int64 (or the row is refused, and
// its index returned), a date-time string a time. A property at a time:
// a column's cells in one loop.
func (t *JSONTypes) Convert(cb *colbatch.Batch, from, to int) (int, error) {
	return t.convert(cb, from, to, &columnCache{}, nil)
}

func (t *JSONTypes) convert(cb *colbatch.Batch, from, to int, cache *columnCache, textTimes map[string]bool) (int, error) {
	for name, p := range t.props {
		c := cb.Find(name)
		if c < 0 {
			continue
		}
		cells := cb.Cols[c].Cells
		for r := from; r < to; r++ {
			if p == propDateTime && textTimes[name] {
				// Checked, and left as the text its column parses.
				if cell := &cells[r]; cell.Kind == colbatch.String {
					if _, ok := parseUTCDateTime(cell.S); ok {
						continue
					}
				}
			}
			if err := convertCell(cb, &cells[r], name, p, cache); err != nil {
				return r, err
			}
		}
	}
	return -1, nil
}

// JSONRows is JSONBody and JSONTypes.Convert for the messages of one
// batch, keeping what its rows share: the last schema id's types (most
// batches are of one schema: no lookup a message) and the memory of the
// timestamps' cells (no allocation a timestamp). Not safe for concurrent
// use; its cells are valid while the batch is.
type JSONRows struct {
	d     *Decoder
	id    int
	types *JSONTypes
	cache columnCache
	// textTimes are the date-time properties whose column is declared a
	// timestamp (TimestampColumns).
	textTimes map[string]bool
}

// TimestampColumns tells r the table's declared column types: a
// date-time property whose column is a timestamp keeps its text when it is
// YYYY-MM-DDTHH:MM:SS[.fraction]Z, checked as Convert checks it, since
// that column parses the text to the same instant (the NDJSON path's
// work, no time.Time boxed and unboxed a row). Another date-time string
// (an offset) is converted as before.
func (r *JSONRows) TimestampColumns(types map[string]coltype.Type) {
	r.textTimes = nil
	for name, t := range types {
		if t == coltype.Timestamp {
			if r.textTimes == nil {
				r.textTimes = map[string]bool{}
			}
			r.textTimes[name] = true
		}
	}
}

// JSONRows returns a JSONRows of d (FormatJSONSchema).
func (d *Decoder) JSONRows() *JSONRows {
	return &JSONRows{d: d, id: -1, cache: columnCache{keep: true}}
}

// Body is JSONBody.
func (r *JSONRows) Body(ctx context.Context, msg []byte) ([]byte, *JSONTypes, error) {
	id, body, err := splitFrame(msg)
	if err != nil || id != r.id {
		body, r.types, err = r.d.JSONBody(ctx, msg)
		if err != nil {
			r.id = -1
			return nil, nil, err
		}
		r.id = id
	}
	return body, r.types, nil
}

// Convert is t.Convert.
func (r *JSONRows) Convert(cb *colbatch.Batch, from, to int, t *JSONTypes) (int, error) {
	return t.convert(cb, from, to, &r.cache, r.textTimes)
}

func convertCell(cb *colbatch.Batch, cell *colbatch.Cell, name string, p jsonProp, cache *columnCache) error {
	switch p {
	case propNumber:
		switch cell.Kind {
		case colbatch.Int:
			*cell = colbatch.Cell{Kind: colbatch.Float, I: int64(math.Float64bits(float64(cell.I)))}
		case colbatch.Value:
			if n, ok := cb.Values[cell.I].(json.Number); ok {
				f, err := n.Float64()
				if err != nil {
					return fmt.Errorf("property %q: %w", name, err)
				}
				*cell = colbatch.Cell{Kind: colbatch.Float, I: int64(math.Float64bits(f))}
			}
		}
	case propInteger:
		switch cell.Kind {
		case colbatch.Float:
			return fmt.Errorf("property %q: %v is not a 64-bit integer", name, cell.Float())
		case colbatch.Value:
			if n, ok := cb.Values[cell.I].(json.Number); ok {
				i, err := n.Int64()
				if err != nil {
					return fmt.Errorf("property %q: %q is not a 64-bit integer", name, n)
				}
				*cell = colbatch.Cell{Kind: colbatch.Int, I: i}
			}
		}
	case propDateTime:
		if cell.Kind == colbatch.String {
			tm, err := parseDateTime(cell.S)
			if err != nil {
				return fmt.Errorf("property %q: date-time %q: %w", name, cell.S, err)
			}
			*cell = cache.timeCell(cb, tm)
		}
	case propDate, propTimeOfDay, propUUID:
		if cell.Kind == colbatch.String {
			x, err := formatValue(p, cell.S)
			if err != nil {
				return fmt.Errorf("property %q: %w", name, err)
			}
			*cell = cb.CellOf(x)
		}
	}
	return nil
}

// parseDateTime is time.Parse(time.RFC3339Nano, s) in UTC. The form
// producers write, YYYY-MM-DDTHH:MM:SS[.fraction]Z, is read by its digits
// (time.Parse was most of a JSON Schema row's conversion); anything else
// (an offset, a field out of range) goes to time.Parse, which accepts or
// refuses it with its reason.
func parseDateTime(s string) (time.Time, error) {
	if t, ok := parseUTCDateTime(s); ok {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t.UTC(), err
}

// parseUTCDateTime reads YYYY-MM-DDTHH:MM:SS[.fraction]Z (one to nine
// fraction digits) with every field in range; ok is false for anything
// else.
func parseUTCDateTime(s string) (t time.Time, ok bool) {
	if len(s) < 20 || len(s) > 30 || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return t, false
	}
	num := func(from, to int) int {
		v := 0
		for _, c := range []byte(s[from:to]) {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec := num(11, 13), num(14, 16), num(17, 19)
	if year < 0 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return t, false
	}
	nanos := 0
	if len(s) > 20 {
		digits := len(s) - 21 // between the '.' and the 'Z'
		if s[19] != '.' || digits < 1 || digits > 9 {
			return t, false
		}
		if nanos = num(20, len(s)-1); nanos < 0 {
			return t, false
		}
		for range 9 - digits {
			nanos *= 10
		}
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nanos, time.UTC), true
}

// daysIn is the number of days of month (1 to 12) in year.
func daysIn(year, month int) int {
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return int([...]uint8{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month-1])
}

// formatValue is the string s of a property of format date, time or uuid
// as its column's value.
func formatValue(p jsonProp, s string) (any, error) {
	switch p {
	case propDate:
		return coltype.ParseDate(s)
	case propTimeOfDay:
		return parseFullTime(s)
	}
	return coltype.ParseUUID(s)
}

// parseFullTime reads JSON Schema's time (RFC 3339's full-time,
// HH:MM:SS[.fraction] then Z or ±hh:mm; the offset is also taken absent,
// as producers often leave it out) as the time of day in UTC, as a
// date-time property becomes a UTC timestamp. At most six fraction digits
// that are not zeros: a time of day holds microseconds.
func parseFullTime(s string) (coltype.TimeOfDayValue, error) {
	text, offset := s, int64(0)
	if i := strings.IndexAny(text, "Zz+-"); i >= 0 {
		zone := text[i:]
		text = text[:i]
		if zone != "Z" && zone != "z" {
			z, err := time.Parse("-07:00", zone)
			if err != nil {
				return 0, fmt.Errorf("%w: %.40q is not a time (want HH:MM:SS[.ffffff] and Z or ±hh:mm)", coltype.ErrValue, s)
			}
			_, secs := z.Zone()
			offset = int64(secs) * 1_000_000
		}
	}
	if whole, frac, ok := strings.Cut(text, "."); ok && len(frac) > 6 && strings.Trim(frac[6:], "0") == "" {
		text = whole + "." + frac[:6]
	}
	tod, err := coltype.ParseTimeOfDay(text)
	if err != nil {
		return 0, err
	}
	us := (int64(tod) - offset) % coltype.MicrosPerDay
	if us < 0 {
		us += coltype.MicrosPerDay
	}
	return coltype.TimeOfDayValue(us), nil
}
