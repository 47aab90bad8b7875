package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logs "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

const otlpConfig = `
listen: {http: "127.0.0.1:0", grpc: %q}
otlp: {logs_table: logs}
tables:
  - name: logs
    sortBy: time
`

// TestOTLPLogsFromTheSDK: the OpenTelemetry Go SDK's log provider, through
// its OTLP exporters (gRPC on listen.grpc, HTTP/protobuf on POST
// /v1/logs), both gzip-compressed, stores a record each in otlp.logs_table, and every field and
// attribute reads back under its documented column.
func TestOTLPLogsFromTheSDK(t *testing.T) {
	addr := grpcAddr(t)
	s := startServer(t, fmt.Sprintf(otlpConfig, addr), "")
	httpAddr := strings.TrimPrefix(s.url, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Compressed, as OpenTelemetry collectors send by default.
	grpcExp, err := otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(addr), otlploggrpc.WithInsecure(), otlploggrpc.WithCompressor("gzip"))
	if err != nil {
		t.Fatal(err)
	}
	httpExp, err := otlploghttp.New(ctx, otlploghttp.WithEndpoint(httpAddr), otlploghttp.WithInsecure(), otlploghttp.WithCompression(otlploghttp.GzipCompression))
	if err != nil {
		t.Fatal(err)
	}
	traceID, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
	spanID, _ := trace.SpanIDFromHex("1112131415161718")
	spanCtx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	when := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	for i, exp := range []sdklog.Exporter{grpcExp, httpExp} {
		via := []string{"grpc", "http"}[i]
		provider := sdklog.NewLoggerProvider(
			sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)),
			sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"), attribute.Int("pid", 42))),
		)
		logger := provider.Logger("shop/cart", otellog.WithInstrumentationVersion("1.2.3"), otellog.WithInstrumentationAttributes(attribute.String("team", "payments")))
		var rec otellog.Record
		rec.SetTimestamp(when.Add(time.Duration(i) * time.Second))
		rec.SetObservedTimestamp(when.Add(time.Minute))
		rec.SetSeverity(otellog.SeverityWarn)
		rec.SetSeverityText("WARN")
		rec.SetBody(attribute.StringValue("cart abandoned via " + via))
		rec.AddAttributes(
			attribute.String("user", "alice"),
			attribute.Int64("items", 3),
			attribute.Float64("total", 12.5),
			attribute.Bool("guest", true),
			attribute.Map("cart", attribute.String("sku", "A1"), attribute.Slice("tags", attribute.StringValue("x"))),
		)
		logger.Emit(spanCtx, rec)
		if err := provider.Shutdown(ctx); err != nil {
			t.Fatalf("%s exporter: %v", via, err)
		}
	}
	rows := allRows(t, s, "logs", "")
	if len(rows) != 2 {
		t.Fatalf("logs: %d rows, want 2: %v", len(rows), rows)
	}
	for i, r := range rows {
		via := []string{"grpc", "http"}[i]
		want := map[string]any{
			"severity_number":       float64(otellog.SeverityWarn),
			"severity_text":         "WARN",
			"body":                  "cart abandoned via " + via,
			"trace_id":              hex.EncodeToString(traceID[:]),
			"span_id":               hex.EncodeToString(spanID[:]),
			"flags":                 1.0,
			"scope.name":            "shop/cart",
			"scope.version":         "1.2.3",
			"scope.team":            "payments",
			"resource.service.name": "checkout",
			"resource.pid":          42.0,
			"attributes.user":       "alice",
			"attributes.items":      3.0,
			"attributes.total":      12.5,
			"attributes.guest":      true,
			"attributes.cart":       `{"sku":"A1","tags":["x"]}`,
		}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("%s record: %s = %#v, want %#v", via, k, r[k], v)
			}
		}
		for k, at := range map[string]time.Time{"time": when.Add(time.Duration(i) * time.Second), "observed_time": when.Add(time.Minute)} {
			got, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r[k]))
			if err != nil || !got.Equal(at) {
				t.Errorf("%s record: %s = %v, want %v", via, k, r[k], at)
			}
		}
	}
	// OTLP/JSON is refused with its reason, not misread.
	code, body, _ := call(t, "POST", s.url+"/v1/logs", "", strings.NewReader(`{"resourceLogs":[]}`), "Content-Type", "application/json")
	if code != 415 {
		t.Errorf("POST /v1/logs as JSON: %d %s, want 415", code, body)
	}
}

// TestOTLPPartialSuccess: an export whose records the table's policy
// partly sends to the dead letters stores the rest and answers, over gRPC
// and over HTTP, the ExportLogsServiceResponse an OTLP client decodes:
// partial_success with the records rejected; an export stored whole
// answers the empty response (zero bytes over HTTP).
func TestOTLPPartialSuccess(t *testing.T) {
	addr := grpcAddr(t)
	s := startServer(t, fmt.Sprintf(`
listen: {http: "127.0.0.1:0", grpc: %q}
otlp: {logs_table: logs}
tables:
  - name: logs
    sortBy: time
    computed:
      - {name: len, type: int64, on_error: deadletter, func: "function main(row) if row.body == 'bad' then error('a bad record') end return #row.body end"}
`, addr), "")
	export := func(bodies ...string) *collogs.ExportLogsServiceRequest {
		req := logsRequest(bodies[0])
		sl := req.ResourceLogs[0].ScopeLogs[0]
		for _, b := range bodies[1:] {
			sl.LogRecords = append(sl.LogRecords, &logs.LogRecord{
				TimeUnixNano: sl.LogRecords[0].TimeUnixNano,
				Body:         &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: b}},
			})
		}
		return req
	}
	wantPartial := func(via string, resp *collogs.ExportLogsServiceResponse, rejected int64) {
		t.Helper()
		ps := resp.GetPartialSuccess()
		if rejected == 0 {
			if ps != nil || len(resp.ProtoReflect().GetUnknown()) > 0 {
				t.Errorf("%s: an export stored whole answers %v, want the empty response", via, resp)
			}
			return
		}
		if ps.GetRejectedLogRecords() != rejected || !strings.Contains(ps.GetErrorMessage(), "dead letters") {
			t.Errorf("%s: partial success %v, want %d rejected and a message naming the dead letters", via, ps, rejected)
		}
	}

	otlp := collogs.NewLogsServiceClient(dialGRPC(t, addr, nil))
	resp, err := otlp.Export(callCtx(t), export("good", "bad", "fine", "bad"))
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	wantPartial("grpc", resp, 2)
	if resp, err = otlp.Export(callCtx(t), export("whole")); err != nil {
		t.Fatalf("Export: %v", err)
	}
	wantPartial("grpc", resp, 0)

	post := func(req *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, int) {
		t.Helper()
		msg, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		code, body, hdr := call(t, "POST", s.url+"/v1/logs", "", bytes.NewReader(msg), "Content-Type", "application/x-protobuf")
		if code != 200 || hdr.Get("Content-Type") != "application/x-protobuf" {
			t.Fatalf("POST /v1/logs: %d %s %q", code, body, hdr.Get("Content-Type"))
		}
		var resp collogs.ExportLogsServiceResponse
		if err := proto.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("POST /v1/logs answered %q: %v", body, err)
		}
		return &resp, len(body)
	}
	resp, _ = post(export("bad", "good too"))
	wantPartial("http", resp, 1)
	resp, n := post(export("whole too"))
	wantPartial("http", resp, 0)
	if n != 0 {
		t.Errorf("POST /v1/logs stored whole: a %d-byte answer, want zero bytes", n)
	}

	var bodies []string
	for _, r := range allRows(t, s, "logs", "") {
		bodies = append(bodies, fmt.Sprint(r["body"]))
	}
	if got := strings.Join(bodies, ","); len(bodies) != 5 || strings.Contains(got, "bad") {
		t.Errorf("logs: %s, want the five good records", got)
	}
	if dl := allRows(t, s, "logs_deadletter", ""); len(dl) != 3 {
		t.Errorf("logs_deadletter: %d rows, want the three bad records: %v", len(dl), dl)
	}
}
