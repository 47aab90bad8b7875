package server

import (
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
