// Package arrowformat writes query answers as an Apache Arrow IPC stream
// (format=arrow, Content-Type application/vnd.apache.arrow.stream), which
// pyarrow, DuckDB, pandas and polars read batch by batch as it arrives
// (docs/cluster.md). It registers itself in internal/rowformat from init;
// cmd/sluice-full imports it, the lean sluice does not (arrow-go's IPC
// package adds 3.2 MB to the binary and 3 MB to every start's RSS).
package arrowformat

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/rowformat"
	"github.com/sluicedb/sluice/table"
)

// ContentType is the IANA media type of an Arrow IPC stream.
const ContentType = "application/vnd.apache.arrow.stream"

// BatchRows is the most rows of one record batch: large enough that the
// per-batch cost vanishes, small enough that a batch of wide rows stays a
// few MB.
const BatchRows = 64 << 10

func init() {
	rowformat.Register(rowformat.Format{Name: "arrow", ContentType: ContentType, NewEncoder: NewEncoder})
}

// Schema is the Arrow schema of an answer with cols: int64, float64,
// utf8, bool, timestamp[ns, UTC], date32, time64[us], decimal128(p,s),
// binary; json columns are their JSON text, uuid columns their 16 bytes as
// fixed_size_binary[16] (not the arrow.uuid extension type: every reader
// reads the plain type, and the bytes are the same).
func Schema(cols []table.Column) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.Name, Type: arrowType(c.Type), Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

func arrowType(t coltype.Type) arrow.DataType {
	switch t {
	case coltype.Int64, coltype.Int32:
		return arrow.PrimitiveTypes.Int64
	case coltype.Float64:
		return arrow.PrimitiveTypes.Float64
	case coltype.Bool:
		return arrow.FixedWidthTypes.Boolean
	case coltype.Timestamp:
		return &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}
	case coltype.Date:
		return arrow.FixedWidthTypes.Date32
	case coltype.TimeOfDay:
		return arrow.FixedWidthTypes.Time64us
	case coltype.Bytes:
		return arrow.BinaryTypes.Binary
	case coltype.UUID:
		return &arrow.FixedSizeBinaryType{ByteWidth: 16}
	}
	if t.IsDecimal() {
		return &arrow.Decimal128Type{Precision: int32(t.Precision()), Scale: int32(t.Scale())}
	}
	return arrow.BinaryTypes.String
}

// Encoder writes rows into record batches of BatchRows.
type Encoder struct {
	schema *arrow.Schema
	b      *array.RecordBuilder
	w      *ipc.Writer
	rows   int
	closed bool
}

// NewEncoder starts an Arrow IPC stream of cols to w.
func NewEncoder(w io.Writer, cols []table.Column) (rowformat.Encoder, error) {
	schema := Schema(cols)
	mem := memory.DefaultAllocator
	return &Encoder{
		schema: schema,
		b:      array.NewRecordBuilder(mem, schema),
		w:      ipc.NewWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(mem)),
	}, nil
}

// Row appends one row; a full batch is written out.
func (e *Encoder) Row(vals []any) error {
	for i, v := range vals {
		if err := appendValue(e.b.Field(i), v); err != nil {
			return fmt.Errorf("arrow: column %q: %w", e.schema.Field(i).Name, err)
		}
	}
	if e.rows++; e.rows == BatchRows {
		return e.flush()
	}
	return nil
}

func (e *Encoder) flush() error {
	if e.rows == 0 {
		return nil
	}
	rec := e.b.NewRecordBatch()
	defer rec.Release()
	e.rows = 0
	return e.w.Write(rec)
}

func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch b := b.(type) {
	case *array.Int64Builder:
		x, ok := v.(int64)
		if !ok {
			return fmt.Errorf("%T is not an int64", v)
		}
		b.Append(x)
	case *array.Float64Builder:
		x, ok := v.(float64)
		if !ok {
			return fmt.Errorf("%T is not a float64", v)
		}
		b.Append(x)
	case *array.BooleanBuilder:
		x, ok := v.(bool)
		if !ok {
			return fmt.Errorf("%T is not a bool", v)
		}
		b.Append(x)
	case *array.TimestampBuilder:
		x, ok := v.(time.Time)
		if !ok {
			return fmt.Errorf("%T is not a time", v)
		}
		b.Append(arrow.Timestamp(x.UnixNano()))
	case *array.Date32Builder:
		x, ok := v.(coltype.DateValue)
		if !ok {
			return fmt.Errorf("%T is not a date", v)
		}
		b.Append(arrow.Date32(x))
	case *array.Time64Builder:
		x, ok := v.(coltype.TimeOfDayValue)
		if !ok {
			return fmt.Errorf("%T is not a time of day", v)
		}
		b.Append(arrow.Time64(x))
	case *array.BinaryBuilder:
		x, ok := v.([]byte)
		if !ok {
			return fmt.Errorf("%T is not bytes", v)
		}
		b.Append(x)
	case *array.FixedSizeBinaryBuilder:
		x, ok := v.(coltype.UUIDValue)
		if !ok {
			return fmt.Errorf("%T is not a uuid", v)
		}
		b.Append(x[:])
	case *array.Decimal128Builder:
		x, ok := v.(coltype.DecimalValue)
		if !ok {
			return fmt.Errorf("%T is not a decimal", v)
		}
		hi, lo := x.Int128()
		b.Append(decimal128.New(hi, lo))
	case *array.StringBuilder:
		switch x := v.(type) {
		case string:
			b.Append(x)
		case json.RawMessage:
			b.Append(string(x))
		default:
			j, err := json.Marshal(x)
			if err != nil {
				return err
			}
			b.Append(string(j))
		}
	default:
		return fmt.Errorf("no Arrow builder for %T", v)
	}
	return nil
}

// Append copies another Arrow IPC stream's batches, which must have this
// stream's schema (a cluster's nodes answer with the coordinator's
// columns).
func (e *Encoder) Append(r io.Reader, max int) (int, error) {
	if err := e.flush(); err != nil {
		return 0, err
	}
	rd, err := ipc.NewReader(r, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return 0, fmt.Errorf("arrow: reading a stream: %w", err)
	}
	defer rd.Release()
	if !rd.Schema().Equal(e.schema) {
		return 0, fmt.Errorf("arrow: schema %s differs from this answer's %s", rd.Schema(), e.schema)
	}
	n := 0
	for (max < 0 || n < max) && rd.Next() {
		rec := rd.RecordBatch()
		if max >= 0 && n+int(rec.NumRows()) > max {
			part := rec.NewSlice(0, int64(max-n))
			err = e.w.Write(part)
			part.Release()
			n = max
		} else {
			err = e.w.Write(rec)
			n += int(rec.NumRows())
		}
		if err != nil {
			return n, err
		}
	}
	if max < 0 || n < max {
		if err := rd.Err(); err != nil && err != io.EOF {
			return n, fmt.Errorf("arrow: reading a stream: %w", err)
		}
	}
	return n, nil
}

// Close writes the last batch and the end of the stream.
func (e *Encoder) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.flush()
	e.b.Release()
	if cerr := e.w.Close(); err == nil {
		err = cerr
	}
	return err
}
