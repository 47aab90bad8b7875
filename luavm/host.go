package luavm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Host is what the log and stats modules and sluice.config of one function
// (a computed column or a filter) reach, on either engine: both engines
// convert their arguments and call its methods, so the rate limit, the
// series cap and the metric names are one implementation. A Host outlives
// the versions of its script (a reload keeps its counters and its log
// budget); its owner closes it when the function goes away.
type Host struct {
	log    *slog.Logger
	script string // what log lines call the script: its file, URL or the column
	params map[string]any

	bucket  tokenBucket
	dropped atomic.Int64 // log lines the rate limit suppressed, since start
	pending atomic.Int64 // of them, not yet reported in a log line

	series        seriesSet
	seriesDropped atomic.Int64 // stats calls the series cap ignored
	metrics       *ScriptMetrics
	labels        [2]string // table, column
}

// HostOptions configure a Host.
type HostOptions struct {
	// Logger receives the script's lines; it should carry the table, and
	// the Host adds the column (or filter), the script and the line. nil
	// discards them.
	Logger *slog.Logger
	// Table and Column label the Host's metric series and log lines;
	// Filter says Column names a filter.
	Table, Column string
	Filter        bool
	// Script is what log lines call the script (its file, URL or column).
	Script string
	// Params is what sluice.config reads: strings, numbers, bools.
	Params map[string]any
	// LogRate is the log lines per second the script may write, LogBurst
	// how many at once; the rest are counted and reported in one line.
	// 0: DefaultLogRate and DefaultLogBurst; LogRate < 0: no limit.
	LogRate  float64
	LogBurst int
	// MaxSeries bounds the distinct metric series (name and labels) of
	// the script; the calls beyond it are counted in
	// sluice_script_series_dropped_total. 0: DefaultMaxSeries.
	MaxSeries int
	// Metrics exports the series; nil keeps them (Host.Value reads them)
	// without exporting them.
	Metrics *ScriptMetrics
}

// Defaults of HostOptions.
const (
	DefaultLogRate   = 10
	DefaultLogBurst  = 100
	DefaultMaxSeries = 100
)

// ErrBadMetric: a stats call gave a metric or label name Prometheus does not
// accept, or a value that is not a number. The call fails (naming the script
// and line) rather than being dropped: it is a mistake in the script, not
// data.
var ErrBadMetric = errors.New("bad metric")

// NewHost returns the Host of one function and adds its series to
// opts.Metrics.
func NewHost(opts HostOptions) *Host {
	if opts.LogRate == 0 {
		opts.LogRate = DefaultLogRate
	}
	if opts.LogBurst <= 0 {
		opts.LogBurst = DefaultLogBurst
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = DefaultMaxSeries
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kind := "column"
	if opts.Filter {
		kind = "filter"
	}
	h := &Host{
		log:     log.With(kind, opts.Column, "script", opts.Script),
		script:  opts.Script,
		params:  opts.Params,
		metrics: opts.Metrics,
		labels:  [2]string{opts.Table, opts.Column},
	}
	h.bucket.init(opts.LogRate, opts.LogBurst)
	h.series.max = opts.MaxSeries
	h.series.byKey = make(map[string]*series)
	if h.metrics != nil {
		h.metrics.add(h)
	}
	return h
}

// Close reports the log lines still suppressed and takes the Host's series
// off its ScriptMetrics.
func (h *Host) Close() {
	h.reportSuppressed()
	if h.metrics != nil {
		h.metrics.remove(h)
	}
}

// Param is sluice.config(key): the function's params value, ok false when
// the key is not set.
func (h *Host) Param(key string) (any, bool) {
	v, ok := h.params[key]
	return v, ok
}

// ParamsJSON is the params as a JSON object, for an engine that reads
// them in its own VM (LuaJIT).
func (h *Host) ParamsJSON() (string, error) {
	if len(h.params) == 0 {
		return "", nil
	}
	b, err := json.Marshal(h.params)
	if err != nil {
		return "", fmt.Errorf("params: %w", err)
	}
	return string(b), nil
}

// LogBurst is the most lines the Host lets out at once.
func (h *Host) LogBurst() int {
	if h.bucket.rate < 0 {
		return math.MaxInt32
	}
	return int(h.bucket.burst)
}

// RowLocator gives the attributes saying where row i of the batch a script
// runs on came from (file and line, topic, partition and offset, the HTTP
// request). It is called only for the rows a script logs a line about.
type RowLocator func(row int) []slog.Attr

// Log levels of the log module, by function name.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// Allow takes one line from the rate limit: false means the line is to be
// dropped (and is counted).
func (h *Host) Allow() bool { return h.AllowN(1) == 1 }

// AllowN takes up to n lines from the rate limit and returns how many it
// got; the others are counted as suppressed. The LuaJIT engine takes a
// batch's worth at once and gives back what it did not use (Refund).
func (h *Host) AllowN(n int) int {
	got := h.bucket.take(n, time.Now())
	return got
}

// Refund gives back n lines taken by AllowN and not written.
func (h *Host) Refund(n int) { h.bucket.refund(n) }

// Suppressed counts n lines the rate limit dropped.
func (h *Host) Suppressed(n int) {
	if n > 0 {
		h.dropped.Add(int64(n))
		h.pending.Add(int64(n))
	}
}

// SuppressedLines is the count of lines the rate limit dropped since start.
func (h *Host) SuppressedLines() int64 { return h.dropped.Load() }

// Write writes one line the rate limit allowed (Allow): level is debug,
// info, warn or error; line is the script's line; row locates the row
// when locate is not nil (row < 0: no row); fields are the script's own,
// written in a group "fields". Lines suppressed since the last line written
// are reported first, in one line.
func (h *Host) Write(ctx context.Context, level slog.Level, msg string, line int, locate RowLocator, row int, fields []slog.Attr) {
	h.reportSuppressed()
	attrs := make([]slog.Attr, 0, 4)
	attrs = append(attrs, slog.Int("line", line))
	if locate != nil && row >= 0 {
		if src := locate(row); len(src) > 0 {
			attrs = append(attrs, slog.Attr{Key: "source", Value: slog.GroupValue(src...)})
		}
	}
	if len(fields) > 0 {
		attrs = append(attrs, slog.Attr{Key: "fields", Value: slog.GroupValue(fields...)})
	}
	h.log.LogAttrs(ctx, level, msg, attrs...)
}

// reportSuppressed writes the one line that says how many lines the rate
// limit dropped since the last report, if any were.
func (h *Host) reportSuppressed() {
	if n := h.pending.Swap(0); n > 0 {
		h.log.LogAttrs(context.Background(), slog.LevelWarn, fmt.Sprintf("script log: suppressed %d lines (over the log rate limit)", n), slog.Int64("suppressed", n))
	}
}

// LevelOf is the slog level of a log function's name (debug, info, warn,
// error).
func LevelOf(name string) (slog.Level, bool) {
	l, ok := logLevels[name]
	return l, ok
}

// tokenBucket is the log rate limit: rate tokens a second up to burst.
// A mutex rather than atomics: a script that logs every row takes it once
// a row, well under the cost of the Lua call around it, and a suppressed
// line formats nothing.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64 // tokens a second; < 0: no limit
	burst  float64
	tokens float64
	last   time.Time
}

func (b *tokenBucket) init(rate float64, burst int) {
	b.rate, b.burst, b.tokens = rate, float64(burst), float64(burst)
}

func (b *tokenBucket) take(n int, now time.Time) int {
	if b.rate < 0 {
		return n
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	got := min(n, int(b.tokens))
	b.tokens -= float64(got)
	return got
}

func (b *tokenBucket) refund(n int) {
	if b.rate < 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	b.tokens = math.Min(b.burst, b.tokens+float64(n))
	b.mu.Unlock()
}

// The kinds of a script's metric series.
const (
	Counter   = "counter"
	Gauge     = "gauge"
	Histogram = "histogram"
)

// Series is one metric series of a script: a name and its labels. The
// engines cache it by name (and labels) per VM, so a call that finds it
// costs a map lookup and an atomic add.
type Series struct {
	kind   string
	metric prometheus.Metric // a prometheus.Counter, Gauge or Histogram
	add    func(float64)     // Add, Set or Observe
}

// Add adds v to a counter, sets a gauge or observes v in a histogram.
// A nil Series (one the cap dropped) does nothing.
func (s *Series) Add(v float64) {
	if s != nil {
		s.add(v)
	}
}

// seriesSet is a Host's series, at most max of them.
type seriesSet struct {
	mu    sync.Mutex
	byKey map[string]*series
	max   int
}

type series struct {
	Series
	name   string
	labels []string // name, value pairs
}

var metricName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// reservedLabels are the labels the Host sets itself.
var reservedLabels = map[string]bool{"table": true, "column": true, "name": true, "le": true}

// Series returns the series of kind with name and labels (name, value
// pairs, in any order), making it if the Host has room; nil when the cap
// is reached (the call is counted in sluice_script_series_dropped_total).
// A name or label name Prometheus refuses is ErrBadMetric; so is a series
// asked for as another kind than it was made.
func (h *Host) Series(kind, name string, labels []string) (*Series, error) {
	if !metricName.MatchString(name) {
		return nil, fmt.Errorf("%w: metric name %q (want letters, digits and _, not starting with a digit)", ErrBadMetric, name)
	}
	key := seriesKey(kind, name, labels)
	h.series.mu.Lock()
	defer h.series.mu.Unlock()
	if s, ok := h.series.byKey[key]; ok {
		return &s.Series, nil
	}
	if len(h.series.byKey) >= h.series.max {
		h.seriesDropped.Add(1)
		return nil, nil
	}
	pairs, err := sortedLabels(labels)
	if err != nil {
		return nil, err
	}
	s := &series{name: name, labels: pairs}
	s.kind = kind
	constLabels := prometheus.Labels{"table": h.labels[0], "column": h.labels[1], "name": name}
	for i := 0; i < len(pairs); i += 2 {
		constLabels[pairs[i]] = pairs[i+1]
	}
	switch kind {
	case Counter:
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_script_counter_total", Help: "Counters scripts keep (stats.inc).", ConstLabels: constLabels})
		s.metric, s.add = c, func(v float64) {
			if v >= 0 {
				c.Add(v)
			}
		}
	case Gauge:
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_script_gauge", Help: "Gauges scripts set (stats.set).", ConstLabels: constLabels})
		s.metric, s.add = g, g.Set
	case Histogram:
		o := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_script_histogram", Help: "Values scripts observe (stats.observe).", ConstLabels: constLabels, Buckets: prometheus.DefBuckets})
		s.metric, s.add = o, o.Observe
	default:
		return nil, fmt.Errorf("%w: kind %q", ErrBadMetric, kind)
	}
	h.series.byKey[key] = s
	return &s.Series, nil
}

// DroppedCalls counts n more stats calls the series cap ignored, for an
// engine that hands a series several calls at once.
func (h *Host) DroppedCalls(n int) {
	if n > 0 {
		h.seriesDropped.Add(int64(n))
	}
}

// SeriesCount is the number of series the Host has made.
func (h *Host) SeriesCount() int {
	h.series.mu.Lock()
	defer h.series.mu.Unlock()
	return len(h.series.byKey)
}

// DroppedSeriesCalls counts the stats calls the series cap dropped.
func (h *Host) DroppedSeriesCalls() int64 { return h.seriesDropped.Load() }

func seriesKey(kind, name string, labels []string) string {
	if len(labels) == 0 {
		return kind + "\x00" + name
	}
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte(0)
	b.WriteString(name)
	if len(labels) == 2 { // one label: nothing to sort
		b.WriteByte(0)
		b.WriteString(labels[0])
		b.WriteByte('=')
		b.WriteString(labels[1])
		return b.String()
	}
	pairs := make([][2]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, [2]string{labels[i], labels[i+1]})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i][0] < pairs[j][0] })
	for _, p := range pairs {
		b.WriteByte(0)
		b.WriteString(p[0])
		b.WriteByte('=')
		b.WriteString(p[1])
	}
	return b.String()
}

func sortedLabels(labels []string) ([]string, error) {
	if len(labels)%2 != 0 {
		return nil, fmt.Errorf("%w: labels must be name, value pairs", ErrBadMetric)
	}
	pairs := make([][2]string, 0, len(labels)/2)
	for i := 0; i < len(labels); i += 2 {
		k := labels[i]
		if !metricName.MatchString(k) || strings.HasPrefix(k, "__") {
			return nil, fmt.Errorf("%w: label name %q (want letters, digits and _, not starting with a digit or __)", ErrBadMetric, k)
		}
		if reservedLabels[k] {
			return nil, fmt.Errorf("%w: label %q is set by sluice (table, column, name, le)", ErrBadMetric, k)
		}
		pairs = append(pairs, [2]string{k, labels[i+1]})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i][0] < pairs[j][0] })
	out := make([]string, 0, len(labels))
	for _, p := range pairs {
		out = append(out, p[0], p[1])
	}
	return out, nil
}

// ScriptMetrics is the prometheus.Collector of the series scripts make
// through their Hosts (sluice_script_counter_total, sluice_script_gauge,
// sluice_script_histogram) and of what the Hosts dropped
// (sluice_script_series_dropped_total,
// sluice_script_log_lines_suppressed_total). The server registers one and
// gives it to every table's compute (docs/reference/metrics.md).
type ScriptMetrics struct {
	mu    sync.Mutex
	hosts map[*Host]struct{}
}

// NewScriptMetrics returns an empty collector.
func NewScriptMetrics() *ScriptMetrics {
	return &ScriptMetrics{hosts: make(map[*Host]struct{})}
}

func (m *ScriptMetrics) add(h *Host) {
	m.mu.Lock()
	m.hosts[h] = struct{}{}
	m.mu.Unlock()
}

func (m *ScriptMetrics) remove(h *Host) {
	m.mu.Lock()
	delete(m.hosts, h)
	m.mu.Unlock()
}

var (
	seriesDroppedDesc = prometheus.NewDesc("sluice_script_series_dropped_total",
		"Stats calls of a script ignored because it has made as many series as its max_series allows.", []string{"table", "column"}, nil)
	logSuppressedDesc = prometheus.NewDesc("sluice_script_log_lines_suppressed_total",
		"Log lines of a script dropped by its log rate limit (log_rate, log_burst).", []string{"table", "column"}, nil)
)

// Describe sends nothing: the series' labels are the scripts' own, so the
// collector is unchecked.
func (m *ScriptMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect sends every series of every Host, and per Host its dropped
// stats calls and suppressed log lines.
func (m *ScriptMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	hosts := make([]*Host, 0, len(m.hosts))
	for h := range m.hosts {
		hosts = append(hosts, h)
	}
	m.mu.Unlock()
	for _, h := range hosts {
		h.series.mu.Lock()
		for _, s := range h.series.byKey {
			ch <- s.metric
		}
		h.series.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(seriesDroppedDesc, prometheus.CounterValue, float64(h.seriesDropped.Load()), h.labels[0], h.labels[1])
		ch <- prometheus.MustNewConstMetric(logSuppressedDesc, prometheus.CounterValue, float64(h.dropped.Load()), h.labels[0], h.labels[1])
	}
}
