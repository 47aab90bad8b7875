package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicedb/sluice/internal/coldapi"
	"github.com/sluicedb/sluice/luavm"
)

// /metrics is client_golang's handler over a registry the server owns (no
// package-global one): the server's collector below and the collectors of
// the packages it runs (luavm, luajit, stream), each reading its own atomic
// counters at scrape time and emitting const metrics, so there is no
// second copy of a counter to keep in step. The cold tier's counters come
// through coldapi.Tier.Counters, a snapshot the server's collector reads.
// TestMetricsParseAsPrometheusText reads the page back with Prometheus's
// parser and compares its families with docs/server.md's table.

// metricsHandler makes the server's registry, registers the collectors and
// serves them; New calls it once s.sources is set. A collector's error (a
// duplicate series) costs that series and a log line, not the page.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(serverCollector{s}, s.lua.Collector(), s.sources.Collector(), s.scripts())
	if j, ok := s.jit.(interface{ Collector() prometheus.Collector }); ok {
		reg.MustRegister(j.Collector())
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      metricsErrorLog{s.log},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

type metricsErrorLog struct{ log *slog.Logger }

func (l metricsErrorLog) Println(v ...any) {
	l.log.Error("/metrics: " + strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

// serverCollector reads the server's, its tables' and its store's counters.
type serverCollector struct{ s *Server }

// tableFamily is a family with one series per table.
type tableFamily struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*tableState) int64
}

func newTableFamily(name, help string, kind prometheus.ValueType, value func(*tableState) int64) tableFamily {
	return tableFamily{prometheus.NewDesc(name, help, []string{"table"}, nil), kind, value}
}

var tableFamilies = []tableFamily{
	newTableFamily("sluice_ingest_rows_total", "Rows decoded from ingest requests and files.", prometheus.CounterValue, func(t *tableState) int64 { return t.pipe.Counters().Rows.Load() }),
	newTableFamily("sluice_ingest_rows_accepted_total", "Rows stored (acknowledged).", prometheus.CounterValue, func(t *tableState) int64 { return t.pipe.Counters().Accepted.Load() }),
	newTableFamily("sluice_ingest_rows_filtered_total", "Rows dropped by filters or drop policies.", prometheus.CounterValue, func(t *tableState) int64 { return t.pipe.Counters().Filtered.Load() }),
	newTableFamily("sluice_ingest_rows_failed_total", "Bad lines, dead letters and rows of rejected batches.", prometheus.CounterValue, func(t *tableState) int64 { return t.pipe.Counters().Failed.Load() }),
	newTableFamily("sluice_ingest_bytes_total", "Bytes of ingest input (after gzip decoding).", prometheus.CounterValue, func(t *tableState) int64 { return t.pipe.Counters().Bytes.Load() }),
	newTableFamily("sluice_ingest_batches_total", "Batches computed and appended.", prometheus.CounterValue, func(t *tableState) int64 { return t.pipe.Counters().Batches.Load() }),
	newTableFamily("sluice_ingest_batches_rejected_total", "Batches rejected as a whole.", prometheus.CounterValue, func(t *tableState) int64 { return t.pipe.Counters().RejectedBatches.Load() }),
	newTableFamily("sluice_table_rows_appended_total", "Rows appended to the store.", prometheus.CounterValue, func(t *tableState) int64 { return t.table.Stats().RowsAppended }),
	newTableFamily("sluice_table_bytes_written_total", "Block bytes written to the store.", prometheus.CounterValue, func(t *tableState) int64 { return t.table.Stats().BytesWritten }),
	newTableFamily("sluice_table_queries_total", "Queries run.", prometheus.CounterValue, func(t *tableState) int64 { return t.table.Stats().Queries }),
	newTableFamily("sluice_table_rows_scanned_total", "Rows scanned by queries.", prometheus.CounterValue, func(t *tableState) int64 { return t.table.Stats().RowsScanned }),
	newTableFamily("sluice_table_rows_emitted_total", "Rows returned by queries.", prometheus.CounterValue, func(t *tableState) int64 { return t.table.Stats().RowsEmitted }),
	newTableFamily("sluice_compaction_runs_total", "Compaction runs that succeeded.", prometheus.CounterValue, func(t *tableState) int64 { return t.compactRuns.Load() }),
	newTableFamily("sluice_compaction_errors_total", "Compaction runs that failed.", prometheus.CounterValue, func(t *tableState) int64 { return t.compactErrors.Load() }),
	newTableFamily("sluice_compaction_rows_total", "Rows written to Parquet by compaction.", prometheus.CounterValue, func(t *tableState) int64 { return t.compactRows.Load() }),
	newTableFamily("sluice_key_routing_off", "1 when key routing is off for the table: its rows are not where their Kafka keys say (another partitioner, a grown topic), so key queries ask every node.", prometheus.GaugeValue, func(t *tableState) int64 {
		if t.routingOff.Load() {
			return 1
		}
		return 0
	}),
	newTableFamily("sluice_table_degraded", "1 when the table's computed columns or filters did not load at start (it refuses writes).", prometheus.GaugeValue, func(t *tableState) int64 {
		if t.degraded != "" {
			return 1
		}
		return 0
	}),
}

// coldFamily is a family with one series per table with a cold tier.
type coldFamily struct {
	desc  *prometheus.Desc
	value func(coldapi.Counters) int64
}

func newColdFamily(name, help string, value func(coldapi.Counters) int64) coldFamily {
	return coldFamily{prometheus.NewDesc(name, help, []string{"table"}, nil), value}
}

var coldFamilies = []coldFamily{
	newColdFamily("sluice_coldtier_bytes_uploaded_total", "Parquet bytes committed to the Iceberg table.", func(c coldapi.Counters) int64 { return c.BytesUploaded }),
	newColdFamily("sluice_coldtier_files_total", "Data files committed to the Iceberg table.", func(c coldapi.Counters) int64 { return c.Files }),
	newColdFamily("sluice_coldtier_rows_total", "Rows committed to the Iceberg table.", func(c coldapi.Counters) int64 { return c.Rows }),
	newColdFamily("sluice_coldtier_commit_retries_total", "Commits retried after another writer committed first.", func(c coldapi.Counters) int64 { return c.CommitRetries }),
	newColdFamily("sluice_coldtier_orphan_files_deleted_total", "Unreferenced files (uploads of runs killed before their commit) deleted by the orphan cleanup.", func(c coldapi.Counters) int64 { return c.OrphanFiles }),
	newColdFamily("sluice_coldtier_recovered_runs_total", "Runs found committed but not finished locally (a crash) and finished.", func(c coldapi.Counters) int64 { return c.Recoveries }),
	newColdFamily("sluice_coldtier_maintain_runs_total", "Maintenance passes (small files rewritten, manifests merged, snapshots expired).", func(c coldapi.Counters) int64 { return c.MaintainRuns }),
	newColdFamily("sluice_coldtier_files_rewritten_total", "Small data files replaced by the maintenance's rewrite.", func(c coldapi.Counters) int64 { return c.FilesRewritten }),
	newColdFamily("sluice_coldtier_snapshots_expired_total", "Snapshots expired by the maintenance.", func(c coldapi.Counters) int64 { return c.SnapshotsExpired }),
	newColdFamily("sluice_coldtier_expired_files_deleted_total", "Files only expired snapshots referenced, deleted by the maintenance.", func(c coldapi.Counters) int64 { return c.ExpiredFilesDeleted }),
	newColdFamily("sluice_coldtier_rows_skipped_total", "Stream rows left out of a commit because another store had committed their source offsets (docs/cold-tier.md).", func(c coldapi.Counters) int64 { return c.RowsSkipped }),
}

var (
	computeLabels     = []string{"table", "column", "loader", "filter"}
	computeErrorsDesc = prometheus.NewDesc("sluice_compute_errors_total", "Computed column and filter failures, whatever the policy did.", computeLabels, nil)
	computeCallsDesc  = prometheus.NewDesc("sluice_compute_calls_total", "Rows evaluated by each computed column and filter.", computeLabels, nil)
	throttledDesc     = prometheus.NewDesc("sluice_ingest_throttled_total", "Ingest requests answered 429 because the queue was full.", nil, nil)
	replaysDesc       = prometheus.NewDesc("sluice_ingest_idempotent_replays_total", "Ingest requests answered from the record of their Idempotency-Key (a retry: nothing stored again).", nil, nil)
	inflightDesc      = prometheus.NewDesc("sluice_ingest_inflight", "Ingest batches in flight.", nil, nil)
	inflightLimitDesc = prometheus.NewDesc("sluice_ingest_inflight_limit", "Bound on ingest batches in flight.", nil, nil)
	compactionLagDesc = prometheus.NewDesc("sluice_compaction_lag_seconds", "Age of the newest data compacted to Parquet (now minus the last watermark); absent before the first run.", []string{"table"}, nil)
	storeSizeDesc     = prometheus.NewDesc("sluice_store_size_bytes", "Estimated disk usage of the store.", nil, nil)
	tableSizeDesc     = prometheus.NewDesc("sluice_table_size_bytes", "Estimated disk usage of each table.", []string{"table"}, nil)
	readyDesc         = prometheus.NewDesc("sluice_ready", "1 when the server accepts ingest.", nil, nil)
	stuckCallsDesc    = prometheus.NewDesc("sluice_compute_stuck_calls", fmt.Sprintf("Script calls told to stop (timeout) that still run after %v: a partition or ingest slot they hold makes no progress.", luavm.DefaultStuckAfter), []string{"table"}, nil)
	coldLagDesc       = prometheus.NewDesc("sluice_coldtier_lag_seconds", "How long the oldest row of the table not yet in its Iceberg table has waited, at most (continuous: since it was stored; by watermark: now minus the last committed watermark); absent until known.", []string{"table"}, nil)
	coldLastDesc      = prometheus.NewDesc("sluice_coldtier_last_commit_timestamp_seconds", "Unix time of the end of the last compaction run to Iceberg that succeeded; absent before the first since the start.", []string{"table"}, nil)
	coldFailuresDesc  = prometheus.NewDesc("sluice_coldtier_consecutive_failures", "Compaction runs to Iceberg failed in a row (0: the last one succeeded).", []string{"table"}, nil)
	coldDegradedDesc  = prometheus.NewDesc("sluice_coldtier_degraded", "1 while the table's Iceberg commits fail (its last run failed): the store keeps the rows, the Iceberg table goes stale.", []string{"table"}, nil)
	stuckSecondsDesc  = prometheus.NewDesc("sluice_compute_stuck_seconds", "Since when each stuck script call was told to stop.", []string{"table", "script"}, nil)

	// the store's disk space (diskfull.go)
	diskFreeDesc      = prometheus.NewDesc("sluice_store_disk_free_bytes", "Bytes available on the store's filesystem.", nil, nil)
	diskMinFreeDesc   = prometheus.NewDesc("sluice_store_disk_min_free_bytes", "Free space writes must leave (storage.min_free_bytes; 0: no guard).", nil, nil)
	diskReserveDesc   = prometheus.NewDesc("sluice_store_disk_reserve_bytes", "Size of the reserve file in place (0 while it is released).", nil, nil)
	diskFullDesc      = prometheus.NewDesc("sluice_store_disk_full", "1 while writes are refused for lack of disk space (ingest answers 507, sources retry).", nil, nil)
	readOnlyDesc      = prometheus.NewDesc("sluice_store_read_only", "1 while the store is open read-only (it started on a disk too full to replay its log).", nil, nil)
	writesRefusedDesc = prometheus.NewDesc("sluice_store_writes_refused_total", "Writes refused for lack of disk space.", nil, nil)
)

func (serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range tableFamilies {
		ch <- f.desc
	}
	for _, f := range coldFamilies {
		ch <- f.desc
	}
	for _, d := range []*prometheus.Desc{computeErrorsDesc, computeCallsDesc, throttledDesc, replaysDesc, inflightDesc, inflightLimitDesc,
		compactionLagDesc, coldLagDesc, coldLastDesc, coldFailuresDesc, coldDegradedDesc, storeSizeDesc, tableSizeDesc, readyDesc, stuckCallsDesc, stuckSecondsDesc,
		diskFreeDesc, diskMinFreeDesc, diskReserveDesc, diskFullDesc, readOnlyDesc, writesRefusedDesc} {
		ch <- d
	}
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	metric := func(d *prometheus.Desc, kind prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, kind, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) { metric(d, prometheus.GaugeValue, v, labels...) }
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		metric(d, prometheus.CounterValue, v, labels...)
	}

	now := s.now()
	for _, n := range s.names {
		t := s.tables[n]
		for _, f := range tableFamilies {
			metric(f.desc, f.kind, float64(f.value(t)), n)
		}
		if t.proc != nil {
			for _, st := range t.proc.Stats() {
				filter := strconv.FormatBool(st.Filter)
				counter(computeErrorsDesc, float64(st.Errors), n, st.Name, st.Loader, filter)
				counter(computeCallsDesc, float64(st.Calls), n, st.Name, st.Loader, filter)
			}
		}
		if last := t.lastCompact.Load(); last != 0 {
			gauge(compactionLagDesc, now.Sub(unixNano(last)).Round(time.Millisecond).Seconds(), n)
		}
		if size, err := t.table.DiskUsage(); err == nil {
			gauge(tableSizeDesc, float64(size), n)
		}
		if t.cold != nil {
			cc := t.cold.Counters()
			for _, f := range coldFamilies {
				counter(f.desc, float64(f.value(cc)), n)
			}
			st := t.coldHealth.status(now, t.table.Stats().RowsAppended)
			if st.LagSeconds != nil {
				gauge(coldLagDesc, *st.LagSeconds, n)
			}
			if st.LastCommit != nil {
				gauge(coldLastDesc, float64(st.LastCommit.UnixNano())/1e9, n)
			}
			gauge(coldFailuresDesc, float64(st.ConsecutiveFailures), n)
			gauge(coldDegradedDesc, boolValue(st.Degraded), n)
		}
	}
	counter(throttledDesc, float64(s.throttled.Load()))
	counter(replaysDesc, float64(s.idem.replays.Load()))
	gauge(inflightDesc, float64(s.queue.Len()))
	gauge(inflightLimitDesc, float64(s.queue.Cap()))
	if size, err := s.store.DiskUsage(); err == nil {
		gauge(storeSizeDesc, float64(size))
	}
	gauge(readyDesc, boolValue(s.ready.Load()))

	space := s.store.SpaceStatus()
	gauge(diskFreeDesc, float64(space.Free))
	gauge(diskMinFreeDesc, float64(space.MinFree))
	held := uint64(0)
	if space.ReserveHeld {
		held = space.Reserve
	}
	gauge(diskReserveDesc, float64(held))
	gauge(diskFullDesc, boolValue(space.Full != nil))
	gauge(readOnlyDesc, boolValue(space.ReadOnly))
	counter(writesRefusedDesc, float64(space.Refused))

	perTable, oldest := stuckSeries(s.stuckCalls())
	for _, n := range s.names {
		gauge(stuckCallsDesc, float64(perTable[n]), n)
	}
	for key, seconds := range oldest {
		gauge(stuckSecondsDesc, seconds, key.table, key.script)
	}
}

// stuckKey labels a sluice_compute_stuck_seconds series.
type stuckKey struct{ table, script string }

// stuckSeries counts the stuck calls per table and keeps, per table (the
// tables running the script, joined with ",") and script, the age of the
// oldest: a registry takes one series per label set, and the oldest says
// since when a partition or slot has been held.
func stuckSeries(stuck []stuckCall) (perTable map[string]int, oldest map[stuckKey]float64) {
	perTable, oldest = map[string]int{}, map[stuckKey]float64{}
	for _, c := range stuck {
		for _, t := range c.Tables {
			perTable[t]++
		}
		key := stuckKey{strings.Join(c.Tables, ","), c.Source}
		oldest[key] = max(oldest[key], c.For.Seconds())
	}
	return perTable, oldest
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
