package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The metrics are written in the Prometheus text format by hand, as luavm's
// are, from the atomic counters the packages own. TestMetricsParseAsPrometheusText
// reads the page back with Prometheus's parser (prometheus/common/expfmt), so a
// line a scraper would reject fails a test.

func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	family := func(name, kind, help string) {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	}
	perTable := func(name, kind, help string, v func(*tableState) int64) {
		family(name, kind, help)
		for _, n := range s.names {
			fmt.Fprintf(bw, "%s{table=%s} %d\n", name, quote(n), v(s.tables[n]))
		}
	}
	perTable("sluice_ingest_rows_total", "counter", "Rows decoded from ingest requests and files.", func(t *tableState) int64 { return t.pipe.Counters().Rows.Load() })
	perTable("sluice_ingest_rows_accepted_total", "counter", "Rows stored (acknowledged).", func(t *tableState) int64 { return t.pipe.Counters().Accepted.Load() })
	perTable("sluice_ingest_rows_filtered_total", "counter", "Rows dropped by filters or drop policies.", func(t *tableState) int64 { return t.pipe.Counters().Filtered.Load() })
	perTable("sluice_ingest_rows_failed_total", "counter", "Bad lines, dead letters and rows of rejected batches.", func(t *tableState) int64 { return t.pipe.Counters().Failed.Load() })
	perTable("sluice_ingest_bytes_total", "counter", "Bytes of ingest input (after gzip decoding).", func(t *tableState) int64 { return t.pipe.Counters().Bytes.Load() })
	perTable("sluice_ingest_batches_total", "counter", "Batches computed and appended.", func(t *tableState) int64 { return t.pipe.Counters().Batches.Load() })
	perTable("sluice_ingest_batches_rejected_total", "counter", "Batches rejected as a whole.", func(t *tableState) int64 { return t.pipe.Counters().RejectedBatches.Load() })
	family("sluice_ingest_throttled_total", "counter", "Ingest requests answered 429 because the queue was full.")
	fmt.Fprintf(bw, "sluice_ingest_throttled_total %d\n", s.throttled.Load())
	family("sluice_ingest_inflight", "gauge", "Ingest batches in flight.")
	fmt.Fprintf(bw, "sluice_ingest_inflight %d\n", s.queue.Len())
	family("sluice_ingest_inflight_limit", "gauge", "Bound on ingest batches in flight.")
	fmt.Fprintf(bw, "sluice_ingest_inflight_limit %d\n", s.queue.Cap())

	family("sluice_compute_errors_total", "counter", "Computed column and filter failures, whatever the policy did.")
	for _, n := range s.names {
		if p := s.tables[n].proc; p != nil {
			for _, st := range p.Stats() {
				fmt.Fprintf(bw, "sluice_compute_errors_total{table=%s,column=%s,loader=%s,filter=\"%t\"} %d\n", quote(n), quote(st.Name), quote(st.Loader), st.Filter, st.Errors)
			}
		}
	}
	family("sluice_compute_calls_total", "counter", "Rows evaluated by each computed column and filter.")
	for _, n := range s.names {
		if p := s.tables[n].proc; p != nil {
			for _, st := range p.Stats() {
				fmt.Fprintf(bw, "sluice_compute_calls_total{table=%s,column=%s,loader=%s,filter=\"%t\"} %d\n", quote(n), quote(st.Name), quote(st.Loader), st.Filter, st.Calls)
			}
		}
	}
	perTable("sluice_table_rows_appended_total", "counter", "Rows appended to the store.", func(t *tableState) int64 { return t.table.Stats().RowsAppended })
	perTable("sluice_table_bytes_written_total", "counter", "Block bytes written to the store.", func(t *tableState) int64 { return t.table.Stats().BytesWritten })
	perTable("sluice_table_queries_total", "counter", "Queries run.", func(t *tableState) int64 { return t.table.Stats().Queries })
	perTable("sluice_table_rows_scanned_total", "counter", "Rows scanned by queries.", func(t *tableState) int64 { return t.table.Stats().RowsScanned })
	perTable("sluice_table_rows_emitted_total", "counter", "Rows returned by queries.", func(t *tableState) int64 { return t.table.Stats().RowsEmitted })
	perTable("sluice_compaction_runs_total", "counter", "Compaction runs that succeeded.", func(t *tableState) int64 { return t.compactRuns.Load() })
	perTable("sluice_compaction_errors_total", "counter", "Compaction runs that failed.", func(t *tableState) int64 { return t.compactErrors.Load() })
	perTable("sluice_compaction_rows_total", "counter", "Rows written to Parquet by compaction.", func(t *tableState) int64 { return t.compactRows.Load() })
	family("sluice_compaction_lag_seconds", "gauge", "Age of the newest data compacted to Parquet (now minus the last watermark); absent before the first run.")
	now := s.now()
	for _, n := range s.names {
		if last := s.tables[n].lastCompact.Load(); last != 0 {
			fmt.Fprintf(bw, "sluice_compaction_lag_seconds{table=%s} %s\n", quote(n), strconv.FormatFloat(now.Sub(unixNano(last)).Seconds(), 'f', 3, 64))
		}
	}
	family("sluice_store_size_bytes", "gauge", "Estimated disk usage of the store.")
	if size, err := s.store.DiskUsage(); err == nil {
		fmt.Fprintf(bw, "sluice_store_size_bytes %d\n", size)
	}
	family("sluice_table_size_bytes", "gauge", "Estimated disk usage of each table.")
	for _, n := range s.names {
		if size, err := s.tables[n].table.DiskUsage(); err == nil {
			fmt.Fprintf(bw, "sluice_table_size_bytes{table=%s} %d\n", quote(n), size)
		}
	}
	s.writeColdMetrics(bw)
	s.writeDiskMetrics(bw)
	family("sluice_ready", "gauge", "1 when the server accepts ingest.")
	ready := 0
	if s.ready.Load() {
		ready = 1
	}
	fmt.Fprintf(bw, "sluice_ready %d\n", ready)
	perTable("sluice_table_degraded", "gauge", "1 when the table's computed columns or filters did not load at start (it refuses writes).", func(t *tableState) int64 {
		if t.degraded != "" {
			return 1
		}
		return 0
	})
	s.sources.WriteMetrics(bw)
	s.writeStuckMetrics(bw, s.stuckCalls())
	bw.Flush()
	_ = s.lua.WriteMetrics(w)
	if m, ok := s.jit.(interface{ WriteMetrics(io.Writer) error }); ok {
		_ = m.WriteMetrics(w)
	}
}

func quote(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}
