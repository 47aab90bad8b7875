package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	logs "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/sluicedb/sluice/ingest/talaria"
	"github.com/sluicedb/sluice/server/grpclisten"
)

// BenchmarkIngestWire is the same rows sent to a real server over each
// wire, 1000 rows a request from 2 clients: HTTP NDJSON (POST
// /v1/tables/{table}/rows, pre-encoded), Talaria's Ingress (a
// dictionary-encoded batch) and OTLP logs over gRPC (a record per row,
// its fields as attributes). rows/CPU-s is the process's CPU, clients
// included: the gRPC clients marshal each request, the HTTP one sends
// bytes it encoded before the timer.
func BenchmarkIngestWire(b *testing.B) {
	addr := grpcAddr(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := serveConfigOn(b, fmt.Sprintf(`
listen: {http: "127.0.0.1:0", grpc: %q}
ingress: {table: rows}
otlp: {logs_table: logs}
tables:
  - {name: rows, sortBy: ts}
  - {name: logs, sortBy: time}
`, addr), b.TempDir(), ln)
	waitReady(b, s.url)
	cc := dialGRPC(b, addr, nil)
	const perRequest = 1000
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

	var ndjson bytes.Buffer
	events := make([]map[string]any, perRequest)
	var records []*logs.LogRecord
	for i := range perRequest {
		user, action := fmt.Sprintf("user%d", i%50), []string{"view", "click", "buy"}[i%3]
		ts := start.Add(time.Duration(i) * time.Second)
		fmt.Fprintf(&ndjson, `{"ts":%q,"user":%q,"action":%q,"n":%d,"amount":%g}`+"\n", ts.Format(time.RFC3339), user, action, i, float64(i)/4)
		events[i] = map[string]any{"ts": ts, "user": user, "action": action, "n": int64(i), "amount": float64(i) / 4}
		str := func(v string) *common.AnyValue {
			return &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v}}
		}
		records = append(records, &logs.LogRecord{
			TimeUnixNano: uint64(ts.UnixNano()), SeverityNumber: logs.SeverityNumber_SEVERITY_NUMBER_INFO, Body: str(action),
			Attributes: []*common.KeyValue{
				{Key: "user", Value: str(user)},
				{Key: "n", Value: &common.AnyValue{Value: &common.AnyValue_IntValue{IntValue: int64(i)}}},
				{Key: "amount", Value: &common.AnyValue{Value: &common.AnyValue_DoubleValue{DoubleValue: float64(i) / 4}}},
			},
		})
	}
	ingressReq := &talaria.IngestRequest{Data: &talaria.IngestRequest_Batch{Batch: batch(events...)}}
	logsReq := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logs.ResourceLogs{{
		Resource:  &resourcepb.Resource{Attributes: []*common.KeyValue{{Key: "service.name", Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: "bench"}}}}},
		ScopeLogs: []*logs.ScopeLogs{{LogRecords: records}},
	}}}
	ingress, otlp := grpclisten.NewIngressClient(cc), collogs.NewLogsServiceClient(cc)
	body := ndjson.Bytes()
	for _, c := range []struct {
		name string
		send func(ctx context.Context) error
	}{
		{"http-ndjson", func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/tables/rows/rows", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/x-ndjson")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}},
		{"grpc-talaria-batch", func(ctx context.Context) error {
			_, err := ingress.Ingest(ctx, ingressReq)
			return err
		}},
		{"grpc-otlp-logs", func(ctx context.Context) error {
			_, err := otlp.Export(ctx, logsReq)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(1) // GOMAXPROCS (2 here) clients
			b.ResetTimer()
			cpu0 := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					err := c.send(ctx)
					cancel()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)*perRequest/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(b.N)*perRequest/(processCPU()-cpu0).Seconds(), "rows/CPU-s")
		})
	}
}
