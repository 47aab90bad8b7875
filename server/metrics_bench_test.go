package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/config"
)

// metricsBenchConfig is 10 tables, each with a Lua computed column and a
// filter and 2 Kafka sources (20 in all; never started, so no broker is
// needed: their counters are what /metrics reads).
func metricsBenchConfig() string {
	var b strings.Builder
	b.WriteString("tables:\n")
	for i := range 10 {
		fmt.Fprintf(&b, `  - name: t%d
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
    filters:
      - name: keep
        func: "function main(row) return row.user ~= 'test' end"
    computed:
      - name: double
        type: int64
        func: "function main(row) return row.n * 2 end"
    sources:
      - kafka: {brokers: ["127.0.0.1:9"], topics: [a%d], group: g%d}
      - kafka: {brokers: ["127.0.0.1:9"], topics: [b%d], group: g%d}
`, i, i, i, i, i)
	}
	return b.String()
}

// BenchmarkMetricsScrape is one GET /metrics (without the network) of a
// server with 10 tables and 20 stream sources.
func BenchmarkMetricsScrape(b *testing.B) {
	cfg, err := config.Parse([]byte(metricsBenchConfig()), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(context.Background(), cfg, Options{StorageDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `sluice_source_up{`) {
		b.Fatalf("/metrics: %d\n%s", rec.Code, rec.Body)
	}
	b.SetBytes(int64(rec.Body.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
	}
}
