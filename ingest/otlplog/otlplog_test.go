package otlplog

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logs "go.opentelemetry.io/proto/otlp/logs/v1"
	resource "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

func kv(k string, v *common.AnyValue) *common.KeyValue { return &common.KeyValue{Key: k, Value: v} }

func str(s string) *common.AnyValue {
	return &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: s}}
}

// TestAppendLines: a request as a client sends it, read as LogsData as
// the server does, has its record's fields and its resource's, scope's and own
// attributes land under their documented columns, each value kind in its
// documented form; unset fields and attributes are no column.
func TestAppendLines(t *testing.T) {
	rec := &logs.LogRecord{
		TimeUnixNano: 1772359200000000001, SeverityNumber: logs.SeverityNumber_SEVERITY_NUMBER_ERROR, SeverityText: "ERROR",
		Body:    &common.AnyValue{Value: &common.AnyValue_KvlistValue{KvlistValue: &common.KeyValueList{Values: []*common.KeyValue{kv("msg", str("x")), kv("n", &common.AnyValue{Value: &common.AnyValue_IntValue{IntValue: 2}})}}}},
		TraceId: []byte{0xab, 0xcd}, SpanId: []byte{0x01}, Flags: 1, EventName: "checkout",
		Attributes: []*common.KeyValue{
			kv("bytes", &common.AnyValue{Value: &common.AnyValue_BytesValue{BytesValue: []byte("hi")}}),
			kv("nan", &common.AnyValue{Value: &common.AnyValue_DoubleValue{DoubleValue: math.NaN()}}),
			kv("list", &common.AnyValue{Value: &common.AnyValue_ArrayValue{ArrayValue: &common.ArrayValue{Values: []*common.AnyValue{str("a"), {Value: &common.AnyValue_BoolValue{BoolValue: false}}}}}}),
			kv("unset", &common.AnyValue{}),
			kv("time", str("an attribute, not the field")),
		},
	}
	req := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logs.ResourceLogs{{
		Resource: &resource.Resource{Attributes: []*common.KeyValue{kv("service.name", str("shop"))}},
		ScopeLogs: []*logs.ScopeLogs{{
			Scope:      &common.InstrumentationScope{Name: "lib", Attributes: []*common.KeyValue{kv("k", str("v"))}},
			LogRecords: []*logs.LogRecord{rec, {}},
		}},
	}}}
	data := asLogsData(t, req)
	out, n, err := AppendLines(nil, data, 0)
	if err != nil || n != 2 {
		t.Fatalf("AppendLines: %d records, %v", n, err)
	}
	var rows []map[string]any
	dec := json.NewDecoder(bytesReader(out))
	for dec.More() {
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%v in %s", err, out)
		}
		rows = append(rows, r)
	}
	want := map[string]any{
		"time": "2026-03-01T10:00:00.000000001Z", "severity_number": 17.0, "severity_text": "ERROR",
		"body": `{"msg":"x","n":2}`, "trace_id": "abcd", "span_id": "01", "flags": 1.0, "event_name": "checkout",
		"scope.name": "lib", "scope.k": "v", "resource.service.name": "shop",
		"attributes.bytes": "aGk=", "attributes.nan": "NaN", "attributes.list": `["a",false]`,
		"attributes.time": "an attribute, not the field",
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	for k, v := range want {
		if rows[0][k] != v {
			t.Errorf("%s = %#v, want %#v", k, rows[0][k], v)
		}
	}
	if len(rows[0]) != len(want) {
		t.Errorf("columns %v, want exactly %v", rows[0], want)
	}
	if len(rows[1]) != 3 { // the empty record: its scope's and resource's columns only
		t.Errorf("an empty record: %v", rows[1])
	}
	if _, _, err := AppendLines(nil, data, 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a bound of 10 bytes: %v, want ErrTooLarge", err)
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// asLogsData is req as the server reads it: its wire form decoded as
// LogsData, which must hold the request whole.
func asLogsData(t *testing.T, req *collogs.ExportLogsServiceRequest) *logs.LogsData {
	t.Helper()
	wire, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var data logs.LogsData
	if err := proto.Unmarshal(wire, &data); err != nil {
		t.Fatalf("an ExportLogsServiceRequest read as LogsData: %v", err)
	}
	if !proto.Equal(&data, &logs.LogsData{ResourceLogs: req.GetResourceLogs()}) || len(data.ProtoReflect().GetUnknown()) > 0 {
		t.Fatalf("an ExportLogsServiceRequest read as LogsData: %v, want %v", &data, req)
	}
	return &data
}

// TestResponse: AppendResponse's bytes decode as the
// ExportLogsServiceResponse a client expects: empty when every record was
// taken, else its partial success.
func TestResponse(t *testing.T) {
	f := func(rejected int64, message string, want *collogs.ExportLogsServiceResponse) {
		t.Helper()
		wire := AppendResponse([]byte("kept"), rejected, message)
		if !bytes.HasPrefix(wire, []byte("kept")) {
			t.Fatalf("AppendResponse dropped buf: %q", wire)
		}
		var got collogs.ExportLogsServiceResponse
		if err := proto.Unmarshal(wire[len("kept"):], &got); err != nil {
			t.Fatalf("AppendResponse(%d, %q): %v", rejected, message, err)
		}
		if !proto.Equal(&got, want) || len(got.ProtoReflect().GetUnknown()) > 0 {
			t.Errorf("AppendResponse(%d, %q) = %v, want %v", rejected, message, &got, want)
		}
	}
	f(0, "", &collogs.ExportLogsServiceResponse{})
	f(3, "3 log records were not stored", &collogs.ExportLogsServiceResponse{PartialSuccess: &collogs.ExportLogsPartialSuccess{RejectedLogRecords: 3, ErrorMessage: "3 log records were not stored"}})
	f(0, "a warning", &collogs.ExportLogsServiceResponse{PartialSuccess: &collogs.ExportLogsPartialSuccess{ErrorMessage: "a warning"}})
	f(1<<40, "", &collogs.ExportLogsServiceResponse{PartialSuccess: &collogs.ExportLogsPartialSuccess{RejectedLogRecords: 1 << 40}})
	if b := AppendResponse(nil, 0, ""); len(b) != 0 {
		t.Errorf("an export that took every record answers %q, want zero bytes", b)
	}
}
