// Package otlplog maps OpenTelemetry log records (OTLP's
// ExportLogsServiceRequest) to JSON lines, one row per record, whose keys
// are the record's fields and its resource's, scope's and own attributes
// (docs/grpc.md has the columns), and writes OTLP's export response.
//
// The collector package of go.opentelemetry.io/proto/otlp is not used: its
// generated HTTP gateway links grpc-gateway's runtime into every binary that
// imports it. Its request is wire-identical to logs.v1.LogsData (field 1,
// repeated ResourceLogs), so that is what a request is decoded as; its
// response is written with protowire. The gRPC service is server/grpclisten's:
// this package links no grpc-go, so that POST /v1/logs is served by the lean
// binary.
package otlplog

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/internal/jsonw"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logs "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// The columns of a record's own fields. Attributes are prefixed so that no
// attribute can take a field's column: ResourcePrefix for the resource's,
// ScopePrefix for the instrumentation scope's (and its name and version),
// AttributePrefix for the record's.
const (
	ColumnTime           = "time"
	ColumnObservedTime   = "observed_time"
	ColumnSeverityNumber = "severity_number"
	ColumnSeverityText   = "severity_text"
	ColumnBody           = "body"
	ColumnTraceID        = "trace_id"
	ColumnSpanID         = "span_id"
	ColumnFlags          = "flags"
	ColumnEventName      = "event_name"
	ColumnScopeName      = "scope.name"
	ColumnScopeVersion   = "scope.version"

	ResourcePrefix  = "resource."
	ScopePrefix     = "scope."
	AttributePrefix = "attributes."
)

// ErrTooLarge: the lines of a request would pass the bound given.
var ErrTooLarge = errors.New("otlplog: request too large")

// AppendLines appends a JSON line per log record of data (an
// ExportLogsServiceRequest, decoded as the wire-identical LogsData) to buf and
// returns it with the number of records. Times are RFC 3339 in UTC with
// nanoseconds (a zero time is left out, as OTLP means "unknown"); trace
// and span ids are lowercase hex; a string, integer, float or bool value
// is itself, bytes are base64, and an array or a key-value list is its
// JSON text as a string (the column stays one type whatever a record
// sends). Fields and attributes that are not set are left out, so that
// the table's row has no column for them. Past max bytes of lines (0: no
// bound) it stops with ErrTooLarge.
func AppendLines(buf []byte, data *logs.LogsData, max int) ([]byte, int, error) {
	start, n := len(buf), 0
	for _, rl := range data.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			for _, rec := range sl.GetLogRecords() {
				buf = appendRecord(buf, rl.GetResource().GetAttributes(), sl.GetScope(), rec)
				n++
				if max > 0 && len(buf)-start > max {
					return buf, n, fmt.Errorf("%w: its rows pass %d bytes at record %d", ErrTooLarge, max, n)
				}
			}
		}
	}
	return buf, n, nil
}

func appendRecord(buf []byte, resource []*common.KeyValue, scope *common.InstrumentationScope, rec *logs.LogRecord) []byte {
	buf = append(buf, '{')
	first := true
	key := func(k string) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = jsonw.AppendString(buf, k)
		buf = append(buf, ':')
	}
	if t := rec.GetTimeUnixNano(); t != 0 {
		key(ColumnTime)
		buf = appendTime(buf, t)
	}
	if t := rec.GetObservedTimeUnixNano(); t != 0 {
		key(ColumnObservedTime)
		buf = appendTime(buf, t)
	}
	if s := rec.GetSeverityNumber(); s != 0 {
		key(ColumnSeverityNumber)
		buf = strconv.AppendInt(buf, int64(s), 10)
	}
	if s := rec.GetSeverityText(); s != "" {
		key(ColumnSeverityText)
		buf = jsonw.AppendString(buf, s)
	}
	if b := rec.GetBody(); b != nil && b.GetValue() != nil {
		key(ColumnBody)
		buf = appendValue(buf, b)
	}
	if id := rec.GetTraceId(); len(id) > 0 {
		key(ColumnTraceID)
		buf = appendHex(buf, id)
	}
	if id := rec.GetSpanId(); len(id) > 0 {
		key(ColumnSpanID)
		buf = appendHex(buf, id)
	}
	if f := rec.GetFlags(); f != 0 {
		key(ColumnFlags)
		buf = strconv.AppendUint(buf, uint64(f), 10)
	}
	if e := rec.GetEventName(); e != "" {
		key(ColumnEventName)
		buf = jsonw.AppendString(buf, e)
	}
	if s := scope.GetName(); s != "" {
		key(ColumnScopeName)
		buf = jsonw.AppendString(buf, s)
	}
	if s := scope.GetVersion(); s != "" {
		key(ColumnScopeVersion)
		buf = jsonw.AppendString(buf, s)
	}
	attrs := func(prefix string, kvs []*common.KeyValue) {
		for _, kv := range kvs {
			if kv.GetValue().GetValue() == nil {
				continue
			}
			key(prefix + kv.GetKey())
			buf = appendValue(buf, kv.GetValue())
		}
	}
	attrs(ResourcePrefix, resource)
	attrs(ScopePrefix, scope.GetAttributes())
	attrs(AttributePrefix, rec.GetAttributes())
	return append(buf, '}', '\n')
}

func appendTime(buf []byte, unixNano uint64) []byte {
	t := time.Unix(0, int64(min(unixNano, math.MaxInt64))).UTC()
	buf = append(buf, '"')
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	return append(buf, '"')
}

func appendHex(buf []byte, id []byte) []byte {
	buf = append(buf, '"')
	buf = hex.AppendEncode(buf, id)
	return append(buf, '"')
}

// appendValue appends v as its column's value: scalars as themselves,
// arrays and key-value lists as their JSON text in a string.
func appendValue(buf []byte, v *common.AnyValue) []byte {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return jsonw.AppendString(buf, x.StringValue)
	case *common.AnyValue_IntValue:
		return strconv.AppendInt(buf, x.IntValue, 10)
	case *common.AnyValue_BoolValue:
		return strconv.AppendBool(buf, x.BoolValue)
	case *common.AnyValue_DoubleValue:
		if b, err := jsonw.AppendFloat(buf, x.DoubleValue, 64); err == nil {
			return b
		}
		// NaN and the infinities have no JSON number: their names.
		return jsonw.AppendString(buf, strconv.FormatFloat(x.DoubleValue, 'g', -1, 64))
	case *common.AnyValue_BytesValue:
		buf = append(buf, '"')
		buf = base64.StdEncoding.AppendEncode(buf, x.BytesValue)
		return append(buf, '"')
	case *common.AnyValue_ArrayValue, *common.AnyValue_KvlistValue:
		return jsonw.AppendString(buf, string(appendJSON(nil, v)))
	}
	return append(buf, "null"...)
}

// appendJSON appends v as JSON: a key-value list is an object, an array
// an array, scalars as in appendValue.
func appendJSON(buf []byte, v *common.AnyValue) []byte {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_ArrayValue:
		buf = append(buf, '[')
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSON(buf, e)
		}
		return append(buf, ']')
	case *common.AnyValue_KvlistValue:
		buf = append(buf, '{')
		for i, kv := range x.KvlistValue.GetValues() {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = jsonw.AppendString(buf, kv.GetKey())
			buf = append(buf, ':')
			buf = appendJSON(buf, kv.GetValue())
		}
		return append(buf, '}')
	}
	return appendValue(buf, v)
}

// ExportMethod is the full name of OTLP's logs export, as gRPC sends it.
const ExportMethod = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

// The field numbers of ExportLogsServiceResponse (partial_success) and of
// its ExportLogsPartialSuccess (rejected_log_records, error_message).
const (
	fieldPartialSuccess     protowire.Number = 1
	fieldRejectedLogRecords protowire.Number = 1
	fieldErrorMessage       protowire.Number = 2
)

// AppendResponse appends an ExportLogsServiceResponse to buf in its wire
// form: nothing when no record was rejected and there is no message (zero
// bytes are the empty message that says every record was taken), else its
// partial_success with rejected and message.
func AppendResponse(buf []byte, rejected int64, message string) []byte {
	if rejected == 0 && message == "" {
		return buf
	}
	var partial []byte
	if rejected != 0 {
		partial = protowire.AppendTag(partial, fieldRejectedLogRecords, protowire.VarintType)
		partial = protowire.AppendVarint(partial, uint64(rejected))
	}
	if message != "" {
		partial = protowire.AppendTag(partial, fieldErrorMessage, protowire.BytesType)
		partial = protowire.AppendString(partial, message)
	}
	buf = protowire.AppendTag(buf, fieldPartialSuccess, protowire.BytesType)
	return protowire.AppendBytes(buf, partial)
}

// PartialSuccess is the partial success of an export whose records failed
// were not stored (the table's dead letters have them; ingest.Result's
// Failed): none and no message when every record was.
func PartialSuccess(failed int) (rejected int64, message string) {
	if failed == 0 {
		return 0, ""
	}
	return int64(failed), fmt.Sprintf("%d log records were not stored: see the table's dead letters", failed)
}
